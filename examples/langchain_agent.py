"""A LangChain agent whose model sees only the relevant part of a long conversation.

``KadaneDialMiddleware`` sits in ``create_agent``'s middleware list. Before each model call
it scores the past turns of the thread against the newest user message and sends the
relevant spans (plus the turn in progress); the checkpointer keeps the full history.

Run it offline (a scripted fake model answers, see ``_fake.py``)::

    python examples/langchain_agent.py

or with a real model, any ``init_chat_model`` string whose provider package is installed::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/langchain_agent.py
    OPENAI_API_KEY=... python examples/langchain_agent.py      # uses openai:gpt-4o-mini
"""

from __future__ import annotations

import os
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, converse, example_agent, print_received, sent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from langchain_ctxmgmt import KadaneDialMiddleware

SYSTEM_PROMPT = "You are a friendly assistant. Answer in one or two sentences."
CONVERSATION = [
    "Hi! I just adopted a grey cat from the shelter and named her Miso.",
    "My sourdough starter smells like nail polish remover. Is that bad?",
    "What's the weather like in Lisbon right now?",
    "The car makes a clunking sound over speed bumps.",
    "Any tips for learning barre chords on the guitar?",
    "I'm repainting the kitchen in a dark green.",
    "Which vaccinations does my new kitten need at the vet?",
]


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"Sunny and 24 degrees in {city}."


def offline_model() -> OfflineChatModel:
    """The offline fake: it says how many messages it was sent, except for the weather question.

    There (one model call per earlier question) it calls ``get_weather``, and on the next call
    it answers with the tool's result.
    """
    weather = next(i for i, question in enumerate(CONVERSATION) if "weather" in question.lower())
    call = {"id": "call-weather", "name": "get_weather", "args": {"city": "Lisbon"}}
    answer = f"The tool says: {get_weather.invoke({'city': 'Lisbon'})}"
    return OfflineChatModel(script={weather: AIMessage("", tool_calls=[call]), weather + 1: answer})


def make_model() -> BaseChatModel:
    """A real model if ``CTXMGMT_MODEL`` or ``OPENAI_API_KEY`` is set and usable, else the fake."""
    name = os.environ.get("CTXMGMT_MODEL") or (
        "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else None
    )
    return chat_model(name, "using the offline model") or offline_model()


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Talk through a few topics, then ask about the first one and show what the model got.

    Args:
        model: The agent's chat model; default :func:`make_model`.

    Returns:
        The agent's final state.
    """
    middleware = KadaneDialMiddleware(max_tokens=3000)
    agent = example_agent(model or make_model(), middleware, SYSTEM_PROMPT, tools=[get_weather])
    state = converse(
        agent, middleware, CONVERSATION, lambda context: f"{sent(context)}, turns {context.turn_indices}"
    )

    print_received(middleware.last_context)
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print("\nWhy:\n" + middleware.explain())
    return state


if __name__ == "__main__":
    main()
