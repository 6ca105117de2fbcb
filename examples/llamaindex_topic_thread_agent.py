"""A LlamaIndex ``FunctionAgent`` with ``Memory``: old turns return as the topic threads a question needs.

``llama_index.core.memory.Memory`` keeps the recent messages in its queue and flushes the
oldest whole turns into its memory blocks. ``TopicThreadBlock`` writes each flushed turn into
a small memory of topic threads (a new thread when the topic shifts, else the best-matching
thread's compressed state is revised) and, on every ``Memory.get()``, returns the threads
relevant to the newest user message (their compressed state and most relevant turns);
``Memory`` puts them before its queue.

Run it offline (bundled embedder, extractive compression, a fake LLM, see ``_fake.py``)::

    python examples/llamaindex_topic_thread_agent.py

or with a real model, which then also compresses the threads (needs ``pip install
llama-index-llms-openai``)::

    OPENAI_API_KEY=... python examples/llamaindex_topic_thread_agent.py
"""

from __future__ import annotations

import asyncio

from _fake import OfflineFunctionLLM
from _run import openai_llm, print_llm_input, run_agent
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import LLM
from llama_index.core.memory import Memory

from ctxmgmt import Context
from llamaindex_ctxmgmt import TopicThreadBlock

SYSTEM_PROMPT = "You are Dana's assistant. Answer in one or two sentences."
CONVERSATION = [
    "My sister Lea visits me in Porto on 14 June; she is allergic to peanuts.",
    "The warehouse robot's lidar keeps failing in bright sunlight.",
    "I'm learning Portuguese on Tuesdays with a tutor called Rui.",
    "Lea wants to see the Douro valley while she is here in June.",
    "We swapped the robot's lidar for a sunlight-filtered model; it works now.",
    "Rui says my Portuguese past tense needs more practice.",
    "Any ideas for a vegetarian dinner I could cook tonight?",
    "When does my sister arrive, and what must I avoid cooking for her?",
]


def main(llm: LLM | None = None) -> Memory:
    """Talk through interleaved topics, then ask about the first one and show what the LLM got.

    Args:
        llm: The agent's LLM (a function-calling one); default the compressor's LLM, else the
            offline one.

    Returns:
        The ``Memory``, for inspection (``get_all()`` holds every message).
    """
    compressor = openai_llm("compressing offline")
    block = TopicThreadBlock(llm=compressor)  # llm=None: extractive compression, no LLM call
    memory = Memory.from_defaults(
        session_id="dana",
        token_limit=1000,
        chat_history_token_ratio=0.06,  # a small queue (60 tokens), so that this
        token_flush_size=40,  # short conversation reaches the block; real apps keep more
        memory_blocks=[block],
    )
    agent = FunctionAgent(
        tools=[], llm=llm or compressor or OfflineFunctionLLM(), system_prompt=SYSTEM_PROMPT
    )

    def note(context: Context | None) -> str:
        if context is None:
            return "nothing flushed to the block yet"
        return f"the block sent {context.tokens} tokens from threads {context.details.get('retrieved', [])}"

    llm_input, context = asyncio.run(run_agent(agent, memory, block, CONVERSATION, note))

    # the retrieved threads' flushed turns (and compressed state), then Memory's queue
    print_llm_input(llm_input)
    print(f"\nMemory's chat store still holds all {len(memory.get_all())} messages.")
    print(f"Compressor LLM calls: {block.llm_calls}")
    print("\nThreads, scores and decay:\n" + (context.explain() if context else "nothing was flushed"))
    return memory


if __name__ == "__main__":
    main()
