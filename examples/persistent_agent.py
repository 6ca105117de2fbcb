"""A LangChain agent whose conversation survives a restart: in SQLite, or PostgreSQL with a DSN.

Two things persist, both keyed by the LangGraph ``thread_id``:

* the raw history: LangGraph's checkpointer (``SqliteSaver`` from ``langgraph-checkpoint-sqlite``,
  or ``PostgresSaver`` from ``langgraph-checkpoint-postgres``);
* what ``KadaneDialMiddleware`` derived from it (each turn's embedding, ...): its ``store=``,
  ``"sqlite:///memories.db"`` or the PostgreSQL DSN.

The script talks through the first half of a conversation, then restarts: it closes the
checkpointer, the store, the middleware and the agent, builds new ones on the same files (or
database) and continues the same thread. The new middleware loads the stored turns instead of
embedding them again (an embedder wrapper counts what is embedded), and the model still gets
the relevant turns from before the restart.

Run it offline (a fake model answers, see ``_fake.py``; the bundled MiniLM embedder runs
locally). The files go to ``--dir`` (default ``<temp dir>/ctxmgmt-persistent-agent``)::

    python examples/persistent_agent.py                # first half, restart, second half
    python examples/persistent_agent.py --first-half   # or: the first half only, then
    python examples/persistent_agent.py --restart      # a new process continues the thread

On PostgreSQL (the middleware's state and, if ``langgraph-checkpoint-postgres`` is installed,
the checkpoints; otherwise the checkpoints stay in SQLite, and the script says so)::

    CTXMGMT_POSTGRES_DSN="postgresql://user:password@localhost:5432/app" python examples/persistent_agent.py

With a real model: ``CTXMGMT_MODEL="openai:gpt-4o-mini"`` (any ``init_chat_model`` string).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, converse, example_agent, print_received, sent
from langchain_core.language_models import BaseChatModel

from ctxmgmt.app.testing import CountingEmbedder
from ctxmgmt.store import open_store
from langchain_ctxmgmt import KadaneDialMiddleware

try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError as exc:  # pragma: no cover - the langchain extra installs it
    raise SystemExit(
        "This example keeps the checkpoints in SQLite: pip install langgraph-checkpoint-sqlite"
    ) from exc

SYSTEM_PROMPT = "You are a friendly assistant. Answer in one or two sentences."
THREAD = "persistent-example"
BEFORE_RESTART = [
    "Hi! I just adopted a grey cat from the shelter and named her Miso.",
    "My sourdough starter smells like nail polish remover. Is that bad?",
    "The car makes a clunking sound over speed bumps.",
    "Any tips for learning barre chords on the guitar?",
]
AFTER_RESTART = [
    "I'm repainting the kitchen in a dark green.",
    "Which vaccinations does my new kitten need at the vet?",
]


def make_model() -> BaseChatModel:
    """A real model if ``CTXMGMT_MODEL`` is set and usable, else the offline fake."""
    return chat_model(os.environ.get("CTXMGMT_MODEL"), "using the offline model") or OfflineChatModel()


def default_directory() -> Path:
    """Where the SQLite files go by default: ``<temp dir>/ctxmgmt-persistent-agent``."""
    return Path(tempfile.gettempdir()) / "ctxmgmt-persistent-agent"


def open_storage(stack: ExitStack, directory: Path, dsn: str | None) -> tuple[Any, Any]:
    """The checkpointer and the middleware's state store, closed when ``stack`` closes.

    Args:
        stack: Owns the connections (a process's lifetime, here).
        directory: Where the SQLite files are.
        dsn: A PostgreSQL DSN; None for SQLite.

    Returns:
        ``(checkpointer, store)``.
    """
    sqlite_checkpoints = directory / "checkpoints.db"
    if dsn is None:
        store_spec = f"sqlite:///{directory / 'memories.db'}"
        checkpointer = stack.enter_context(SqliteSaver.from_conn_string(str(sqlite_checkpoints)))
        print(f"Checkpoints: SQLite {sqlite_checkpoints}\nMiddleware state: {store_spec}")
    else:
        store_spec = dsn
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            checkpointer = stack.enter_context(SqliteSaver.from_conn_string(str(sqlite_checkpoints)))
            print(
                "langgraph-checkpoint-postgres is not installed, so the checkpoints stay in SQLite "
                f"{sqlite_checkpoints}, NOT in PostgreSQL (pip install langgraph-checkpoint-postgres)."
            )
        else:
            checkpointer = stack.enter_context(PostgresSaver.from_conn_string(dsn))
            checkpointer.setup()  # creates or migrates its tables; safe on every start
            print("Checkpoints: PostgreSQL (PostgresSaver)")
        print("Middleware state: PostgreSQL (CTXMGMT_POSTGRES_DSN)")
    # store_spec would do as is (KadaneDialMiddleware(store="sqlite:///memories.db")); opening it
    # here lets the "process" close its connections (a PostgreSQL pool) when it stops.
    store = stack.enter_context(closing(open_store(store_spec)))
    return checkpointer, store


def run(
    model: BaseChatModel, questions: list[str], directory: Path, dsn: str | None, *, fresh: bool
) -> dict[str, Any]:
    """One "process": open the storage, build the middleware and agent, ask ``questions``, close.

    Args:
        model: The agent's chat model (stateless: the same one before and after the restart).
        questions: What to ask in thread :data:`THREAD`.
        directory: Where the SQLite files are.
        dsn: A PostgreSQL DSN; None for SQLite.
        fresh: Start the thread anew (delete its checkpoints and stored state first).

    Returns:
        The agent's final state.
    """
    with ExitStack() as stack:
        checkpointer, store = open_storage(stack, directory, dsn)
        embedder = CountingEmbedder()
        middleware = KadaneDialMiddleware(max_tokens=3000, embedder=embedder, store=store)
        agent = example_agent(model, middleware, SYSTEM_PROMPT, checkpointer=checkpointer)
        config = {"configurable": {"thread_id": THREAD}}
        if fresh:
            checkpointer.delete_thread(THREAD)
            middleware.conversation(THREAD).clear()
        restored = agent.get_state(config).values.get("messages", [])
        print(f"The checkpointer holds {len(restored)} messages of thread {THREAD!r}.\n")

        seen = {"texts": 0, "queries": 0}

        def note(context: Any) -> str:
            texts, queries = embedder.texts - seen["texts"], embedder.queries - seen["queries"]
            seen.update(texts=embedder.texts, queries=embedder.queries)
            embedded = f"embedded {texts} turn(s), {queries} question(s)"
            return f"{sent(context)}, turns {context.turn_indices}; {embedded}"

        state = converse(agent, middleware, questions, note, thread_id=THREAD)

        held = len(middleware.conversation(THREAD).strategy)
        print(
            f"\nThe middleware holds {held} completed turns: {held - embedder.texts} restored from the "
            f"store without embedding, {embedder.texts} embedded by this process.\n"
            "(A turn is embedded once, at the first model call after it ended, and stored then.)"
        )
        print(f"Questions embedded by this process: {embedder.queries}.")
        print_received(middleware.last_context)
        print(f"\nThe checkpointer now holds all {len(state['messages'])} messages.")
        return state


def main(
    model: BaseChatModel | None = None, *, part: str = "both", directory: Path | None = None
) -> dict[str, Any]:
    """Talk, restart, and talk on in the same thread; show what survived and what the model got.

    Args:
        model: The agent's chat model; default :func:`make_model`.
        part: ``"both"`` (first half, restart, second half in this process), ``"first"`` (first
            half only, starting the thread anew) or ``"restart"`` (second half only, on what
            a previous ``"first"`` run stored).
        directory: Where the SQLite files go; default :func:`default_directory`.

    Returns:
        The agent's final state.
    """
    model = model or make_model()
    directory = directory or default_directory()
    directory.mkdir(parents=True, exist_ok=True)
    dsn = os.environ.get("CTXMGMT_POSTGRES_DSN") or None
    state: dict[str, Any] = {}
    if part in ("both", "first"):
        print("=== First process ===")
        state = run(model, BEFORE_RESTART, directory, dsn, fresh=True)
    if part == "both":
        print("\n=== Restart: new checkpointer, store, middleware and agent on the same storage ===")
    if part in ("both", "restart"):
        state = run(model, AFTER_RESTART, directory, dsn, fresh=False)
    return state


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--first-half", action="store_true", help="run the first half only (a new thread)")
    group.add_argument("--restart", action="store_true", help="continue the thread a --first-half run left")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go")
    args = parser.parse_args()
    main(part="first" if args.first_half else "restart" if args.restart else "both", directory=args.dir)
