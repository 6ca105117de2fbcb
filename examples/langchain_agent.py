"""A LangChain agent whose model sees only the relevant part of a long conversation.

``KadaneDialMiddleware`` sits in ``create_agent``'s middleware list. Before each model call
it scores the past turns of the thread against the newest user message and sends the
relevant spans (plus the turn in progress); the checkpointer keeps the full history.

Run it offline (a small rule-based fake model answers)::

    python examples/langchain_agent.py

or with a real model, any ``init_chat_model`` string whose provider package is installed::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/langchain_agent.py
    OPENAI_API_KEY=... python examples/langchain_agent.py      # uses openai:gpt-4o-mini
"""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_ctxmgmt import KadaneDialMiddleware

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


class OfflineChatModel(BaseChatModel):
    """A tiny rule-based stand-in for a chat model, so the example runs without a network.

    It calls ``get_weather`` when asked about the weather and otherwise says how many
    messages it received (which is the point of the example).
    """

    @property
    def _llm_type(self) -> str:
        return "offline-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:
        """Tools are described to real models; this one knows ``get_weather`` already."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"The tool says: {last.content}")
        elif isinstance(last, HumanMessage) and "weather" in last.text.lower():
            call = {"id": f"call-{len(messages)}", "name": "get_weather", "args": {"city": "Lisbon"}}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"(offline model) I was sent {len(messages)} messages for this answer.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def make_model() -> BaseChatModel:
    """A real model if ``CTXMGMT_MODEL`` or ``OPENAI_API_KEY`` is set and usable, else the fake."""
    name = os.environ.get("CTXMGMT_MODEL") or (
        "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else None
    )
    if name:
        try:
            from langchain.chat_models import init_chat_model

            return init_chat_model(name)
        except Exception as exc:  # missing provider package, bad name, ...
            print(f"Cannot build {name!r} ({exc}); using the offline model.")
    return OfflineChatModel()


def main() -> None:
    """Talk through a few topics, then ask about the first one and show what the model got."""
    middleware = KadaneDialMiddleware(max_tokens=3000)
    agent = create_agent(
        make_model(),
        tools=[get_weather],
        system_prompt="You are a friendly assistant. Answer in one or two sentences.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "example"}}
    for question in CONVERSATION:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
        context = middleware.last_context
        print(f"> {question}")
        print(f"  {state['messages'][-1].text}")
        print(f"  [sent {context.tokens} of {context.history_tokens} tokens, turns {context.turn_indices}]")

    print("\nFor the last question the model received:")
    for message in middleware.last_context.messages():
        calls = f" {[c['name'] for c in message.tool_calls]}" if message.tool_calls else ""
        print(f"  {message.role}: {message.text}{calls}")
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print("\nWhy:\n" + middleware.explain())


if __name__ == "__main__":
    main()
