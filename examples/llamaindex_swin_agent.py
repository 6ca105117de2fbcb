"""A LlamaIndex ``FunctionAgent`` with ``Memory``: recent turns verbatim, older ones summarised (SWin).

``llama_index.core.memory.Memory`` keeps the recent messages in its queue and flushes the
oldest whole turns into its memory blocks. ``SWinSummaryBlock`` cuts the flushed turns into
overlapping windows (6 turns sharing 2), summarises each window once into a small memory and,
on every ``Memory.get()``, returns that memory (one message, framed as a record of the
conversation) and the flushed turns of the window still being filled; ``Memory`` puts them
before its queue.

Run it offline (extractive summaries, a fake LLM answers, see ``_fake.py``)::

    python examples/llamaindex_swin_agent.py

or with a real model, which then also writes the summaries (needs ``pip install
llama-index-llms-openai``)::

    OPENAI_API_KEY=... python examples/llamaindex_swin_agent.py
"""

from __future__ import annotations

import asyncio

from _fake import OfflineFunctionLLM
from _run import openai_llm, print_llm_input, run_agent
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import LLM
from llama_index.core.memory import Memory

from ctxmgmt import Context
from llamaindex_ctxmgmt import SWinSummaryBlock

SYSTEM_PROMPT = "You are Dana's assistant. Answer in one or two sentences."
CONVERSATION = [
    "Hi, I'm Dana. I moved to Porto in March 2024 for a job at a robotics startup.",
    "My sister Lea visits me on 14 June; she is allergic to peanuts.",
    "Can you suggest a weekend hike near Porto?",
    "I bought a used Vespa for 1,800 euros last week.",
    "My team ships the warehouse robot demo on 2 September.",
    "I'm learning Portuguese on Tuesdays and Thursdays with a tutor called Rui.",
    "Any ideas for a vegetarian dinner I could cook tonight?",
    "The robot's lidar keeps failing in bright sunlight.",
    "I want to run the Porto half marathon in November.",
    "When does my sister arrive, and what must I avoid cooking for her?",
]


def flushed_turns(block: SWinSummaryBlock, session: str) -> int:
    """How many turns ``Memory`` has flushed into ``block`` for ``session``."""
    return sum(message.role.value == "user" for message in block.stored_messages(session))


def main(llm: LLM | None = None) -> Memory:
    """Talk through a few topics, then ask about an early one and show what the LLM got.

    Args:
        llm: The agent's LLM (a function-calling one); default the summariser's LLM, else the
            offline one.

    Returns:
        The ``Memory``, for inspection (``get_all()`` holds every message).
    """
    summarizer = openai_llm("summarising offline")
    block = SWinSummaryBlock(window=6, overlap=2, llm=summarizer)  # llm=None: extractive, no LLM call
    memory = Memory.from_defaults(
        session_id="dana",
        token_limit=1000,
        chat_history_token_ratio=0.12,  # a small queue (120 tokens), so that this
        token_flush_size=40,  # short conversation reaches the block; real apps keep more
        memory_blocks=[block],
    )
    agent = FunctionAgent(
        tools=[], llm=llm or summarizer or OfflineFunctionLLM(), system_prompt=SYSTEM_PROMPT
    )

    def note(context: Context | None) -> str:
        flushed = f"turns flushed to the block: {flushed_turns(block, 'dana')}"
        return flushed if context is None else f"{flushed}; the block sent {context.tokens} tokens of them"

    llm_input, context = asyncio.run(run_agent(agent, memory, block, CONVERSATION, note))

    # the block's summary and the flushed turns of the open window, then Memory's queue
    print_llm_input(llm_input)
    print(f"\nMemory's chat store still holds all {len(memory.get_all())} messages.")
    print(f"Summariser LLM calls: {block.llm_calls}")
    print("\nWhy:\n" + (context.explain() if context else "nothing was flushed to the block"))
    return memory


if __name__ == "__main__":
    main()
