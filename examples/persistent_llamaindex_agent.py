"""A LlamaIndex ``FunctionAgent`` whose memory survives a restart: ``Memory`` in SQL, our block in SQLite.

``llama_index.core.memory.Memory`` keeps the recent messages of a session in its SQL chat
store (here SQLite through ``aiosqlite``: ``chat.db``) and flushes the oldest whole turns into
its memory blocks. ``KadaneDialBlock(store="sqlite:///memories.db")`` keeps what was flushed
to it and what it derived (each turn's embedding), keyed by ``Memory``'s ``session_id``; on
every ``Memory.get()`` it brings back the flushed turns relevant to the newest message.

The script talks through the first half of a conversation (one question runs a tool), then
restarts: it disposes of the database engine and builds a new ``Memory``, block and agent on
the same files. The new block finds the flushed turns in its store (without embedding them
again; an embedder wrapper counts what is embedded), and the LLM still gets the relevant turn
from before the restart.

Run it offline (a fake LLM answers, see ``_fake.py``; the bundled MiniLM embedder runs
locally). The files go to ``--dir`` (default ``<temp dir>/ctxmgmt-persistent-llamaindex``)::

    python examples/persistent_llamaindex_agent.py                # first half, restart, second half
    python examples/persistent_llamaindex_agent.py --first-half   # or: the first half only, then
    python examples/persistent_llamaindex_agent.py --restart      # a new process continues

On PostgreSQL: ``store="postgresql://..."`` for the block and
``async_database_uri="postgresql+psycopg://..."`` for ``Memory``; nothing else changes.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from _fake import OfflineFunctionLLM
from _run import print_turn
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import LLM
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.tools import FunctionTool
from sqlalchemy.ext.asyncio import create_async_engine

from ctxmgmt.app.testing import CountingEmbedder
from llamaindex_ctxmgmt import KadaneDialBlock

SYSTEM_PROMPT = "You are a friendly assistant. Answer in one or two sentences."
SESSION = "user-1"
BEFORE_RESTART = [
    "Hi! I just adopted a grey cat from the shelter and named her Miso.",
    "What's the weather like in Lisbon right now?",
    "My sourdough starter smells like nail polish remover. Is that bad?",
    "The car makes a clunking sound over speed bumps.",
    "Any tips for learning barre chords on the guitar?",
]
AFTER_RESTART = [
    "I'm repainting the kitchen in a dark green.",
    "Which vaccinations does my new kitten need at the vet?",
]


def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"Sunny and 24 degrees in {city}."


def make_llm(first_half: bool = True) -> OfflineFunctionLLM:
    """The offline fake: it says how many messages it was sent, except for the weather question.

    There (one LLM call per earlier question) it calls ``get_weather``, and on the next call it
    answers with the tool's result.

    Args:
        first_half: The fake will be asked the first half (False for a ``--restart`` process,
            which asks no weather question).
    """
    if not first_half:
        return OfflineFunctionLLM()
    weather = next(i for i, question in enumerate(BEFORE_RESTART) if "weather" in question.lower())
    call = ToolCallBlock(tool_call_id="call-weather", tool_name="get_weather", tool_kwargs={"city": "Lisbon"})
    return OfflineFunctionLLM(
        script={
            weather: ChatMessage(role=MessageRole.ASSISTANT, blocks=[call]),
            weather + 1: f"The tool says: {get_weather('Lisbon')}",
        }
    )


def default_directory() -> Path:
    """Where the SQLite files go by default: ``<temp dir>/ctxmgmt-persistent-llamaindex``."""
    return Path(tempfile.gettempdir()) / "ctxmgmt-persistent-llamaindex"


def turns(block: KadaneDialBlock) -> int:
    """How many turns ``Memory`` flushed into ``block`` for :data:`SESSION`."""
    return sum(message.role == MessageRole.USER for message in block.stored_messages(SESSION))


def flushed(block: KadaneDialBlock) -> str:
    """``8 flushed messages (3 turns)``: what ``Memory`` flushed into ``block`` for :data:`SESSION`."""
    return f"{len(block.stored_messages(SESSION))} flushed messages ({turns(block)} turns)"


async def run(llm: LLM, questions: list[str], directory: Path) -> Memory:
    """One "process": build the memory, its block and the agent on the files, ask ``questions``.

    Args:
        llm: The agent's LLM (stateless: the same one before and after the restart).
        questions: What to ask in ``Memory`` session :data:`SESSION`.
        directory: Where ``chat.db`` (``Memory``'s messages) and ``memories.db`` (the block's) are.

    Returns:
        The memory (its database engine disposed of: :meth:`Memory.aget_all` reconnects).
    """
    engine = create_async_engine(f"sqlite+aiosqlite:///{directory / 'chat.db'}")
    embedder = CountingEmbedder()
    block = KadaneDialBlock(embed_model=embedder, store=f"sqlite:///{directory / 'memories.db'}")
    memory = Memory.from_defaults(
        session_id=SESSION,
        token_limit=300,
        chat_history_token_ratio=0.3,  # a queue of at most 90 tokens: older turns go to the block
        token_flush_size=60,
        memory_blocks=[block],
        async_engine=engine,
    )
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=get_weather)], llm=llm, system_prompt=SYSTEM_PROMPT
    )
    try:
        queued = await memory.aget_all(status=MessageStatus.ACTIVE)
        print(
            f"Memory's queue (chat.db) holds {len(queued)} messages of session {SESSION!r}; "
            f"the block (memories.db) holds {flushed(block)}.\n"
        )
        before = turns(block)
        for question in questions:
            embedded = (embedder.texts, embedder.queries)
            response = await agent.run(user_msg=question, memory=memory)
            context = block.last_context
            picked = "none" if context is None else str(context.turn_indices)
            print_turn(
                question,
                str(response),
                f"flushed turns brought back: {picked}; embedded {embedder.texts - embedded[0]} "
                f"turn(s), {embedder.queries - embedded[1]} question(s)",
            )

        print(f"\nThe block holds {flushed(block)}.")
        if before:
            print(f"The {before} turn(s) flushed before this process started came back from memories.db.")
        print(
            f"Turns flushed while this process ran: {turns(block) - before}; "
            f"turns this process embedded: {embedder.texts}."
        )
        print("\nFor the last question the LLM received:")
        for message in llm.received[-1]:
            calls = [b.tool_name for b in message.blocks if isinstance(b, ToolCallBlock)]
            print(f"  {message.role.value}: {message.content or ''}{f' {calls}' if calls else ''}")
        return memory
    finally:
        await engine.dispose()


def main(llm: LLM | None = None, *, part: str = "both", directory: Path | None = None) -> Memory:
    """Talk, restart, and talk on in the same session; show what survived and what the LLM got.

    Args:
        llm: The agent's LLM (a function-calling one); default :func:`make_llm`.
        part: ``"both"`` (first half, restart, second half in this process), ``"first"`` (first
            half only, starting anew) or ``"restart"`` (second half only, on what a previous
            ``"first"`` run stored).
        directory: Where the SQLite files go; default :func:`default_directory`.

    Returns:
        The last ``Memory``.
    """
    llm = llm or make_llm(first_half=part != "restart")
    directory = directory or default_directory()
    directory.mkdir(parents=True, exist_ok=True)
    memory: Memory | None = None
    if part in ("both", "first"):
        for name in ("chat.db", "memories.db"):  # start anew
            for suffix in ("", "-wal", "-shm"):
                (directory / (name + suffix)).unlink(missing_ok=True)
        print("=== First process ===")
        memory = asyncio.run(run(llm, BEFORE_RESTART, directory))
    if part == "both":
        print("\n=== Restart: new Memory, block and agent on the same files ===")
    if part in ("both", "restart"):
        memory = asyncio.run(run(llm, AFTER_RESTART, directory))
    assert memory is not None
    return memory


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--first-half", action="store_true", help="run the first half only (a new session)")
    group.add_argument("--restart", action="store_true", help="continue the session a --first-half run left")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go")
    args = parser.parse_args()
    main(part="first" if args.first_half else "restart" if args.restart else "both", directory=args.dir)
