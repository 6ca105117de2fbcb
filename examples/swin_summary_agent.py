"""A LangChain agent that sees a running summary of older turns plus the recent ones (SWin).

``SWinSummaryMiddleware`` sits in ``create_agent``'s middleware list. Every 4 turns it
summarises the last window of 6 turns (windows overlap by 2) into a small memory, and each
model call gets: the system prompt, the memory, the recent turns and the new question. The
checkpointer keeps the full history.

Run it offline (extractive summaries, a fake model answers, see ``_fake.py``)::

    python examples/swin_summary_agent.py

or summarise with a real model (any ``init_chat_model`` string whose provider is installed)::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/swin_summary_agent.py
"""

from __future__ import annotations

import os
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, converse, example_agent, print_received, sent
from langchain_core.language_models import BaseChatModel

from langchain_ctxmgmt import SWinSummaryMiddleware

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


def summarizer_model() -> BaseChatModel | None:
    """A real model to summarise with if ``CTXMGMT_MODEL`` is set and usable, else None (extractive)."""
    return chat_model(os.environ.get("CTXMGMT_MODEL"), "summarising offline")


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Talk through a few topics, then ask about an early one and show what the model got.

    Args:
        model: The agent's chat model; default the summariser's model, else the offline one.

    Returns:
        The agent's final state.
    """
    llm = summarizer_model()
    middleware = SWinSummaryMiddleware(max_tokens=2000, window=6, overlap=2, llm=llm)
    agent = example_agent(model or llm or OfflineChatModel(), middleware, SYSTEM_PROMPT)
    state = converse(
        agent,
        middleware,
        CONVERSATION,
        lambda context: f"{sent(context)}, verbatim turns {context.turn_indices}",
    )

    print_received(middleware.last_context)
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print(f"Summariser LLM calls: {middleware.llm_calls}")
    print("\nWhy:\n" + middleware.explain())
    return state


if __name__ == "__main__":
    main()
