"""A LangChain agent whose model sees the topic threads relevant to each question (C-DIC).

``TopicThreadMiddleware`` sits in ``create_agent``'s middleware list. After every turn it writes
the turn back into a small memory of topic threads: a new thread when the topic shifts, else
the best-matching thread's compressed state is revised. Each model call gets: the system
prompt, the compressed state of the threads retrieved for the question, their most relevant
turns verbatim, the newest turn and the question. The checkpointer keeps the full history.

Run it offline (bundled embedder, extractive compression, a fake model, see ``_fake.py``)::

    python examples/topic_thread_agent.py

or compress with a real model (any ``init_chat_model`` string whose provider is installed)::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/topic_thread_agent.py
"""

from __future__ import annotations

import os
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, converse, example_agent, print_received, sent
from langchain_core.language_models import BaseChatModel

from langchain_ctxmgmt.topic_thread_middleware import TopicThreadMiddleware

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


def compressor_model() -> BaseChatModel | None:
    """A real model to compress with if ``CTXMGMT_MODEL`` is set and usable, else None (extractive)."""
    return chat_model(os.environ.get("CTXMGMT_MODEL"), "compressing offline")


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Talk through interleaved topics, then ask about the first one and show what the model got.

    Args:
        model: The agent's chat model; default the compressor's model, else the offline one.

    Returns:
        The agent's final state.
    """
    llm = compressor_model()
    middleware = TopicThreadMiddleware(max_tokens=1500, llm=llm)
    agent = example_agent(model or llm or OfflineChatModel(), middleware, SYSTEM_PROMPT)
    state = converse(
        agent,
        middleware,
        CONVERSATION,
        lambda context: f"{sent(context)}, threads {context.details.get('retrieved', [])}",
    )

    print_received(middleware.last_context)
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print(f"Compressor LLM calls: {middleware.llm_calls}")
    print("\nThreads, scores and decay:\n" + middleware.explain())
    return state


if __name__ == "__main__":
    main()
