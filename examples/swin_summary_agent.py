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
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_ctxmgmt import SWinSummaryMiddleware

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
    name = os.environ.get("CTXMGMT_MODEL")
    if not name:
        return None
    try:
        from langchain.chat_models import init_chat_model

        return init_chat_model(name)
    except Exception as exc:  # missing provider package, bad name, ...
        print(f"Cannot build {name!r} ({exc}); summarising offline.")
        return None


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Talk through a few topics, then ask about an early one and show what the model got.

    Args:
        model: The agent's chat model; default the summariser's model, else the offline one.

    Returns:
        The agent's final state.
    """
    llm = summarizer_model()
    middleware = SWinSummaryMiddleware(max_tokens=2000, window=6, overlap=2, llm=llm)
    agent = create_agent(
        model or llm or OfflineChatModel(),
        tools=[],
        system_prompt="You are Dana's assistant. Answer in one or two sentences.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "example"}}
    for question in CONVERSATION:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
        context = middleware.last_context
        print(f"> {question}")
        print(f"  {state['messages'][-1].text}")
        sent = f"{context.tokens} of {context.history_tokens} tokens"
        print(f"  [sent {sent}, verbatim turns {context.turn_indices}]")

    print("\nFor the last question the model received:")
    for message in middleware.last_context.messages():
        print(f"  {message.role}: {message.text}")
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print(f"Summariser LLM calls: {middleware.llm_calls}")
    print("\nWhy:\n" + middleware.explain())
    return state


if __name__ == "__main__":
    main()
