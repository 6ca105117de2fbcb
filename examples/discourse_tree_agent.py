"""A LangChain agent whose model sees the current thread verbatim and other topics summarised.

``DiscourseTreeMiddleware`` sits in ``create_agent``'s middleware list. It organises the
conversation into topic trees with branches (Context-Agent): a trip to Rome, an alternative
trip to Paris branching off it, an unrelated pandas question, and a return to Rome. For each
model call it sends the active path verbatim and one system message summarising the other
topics and branches; the checkpointer keeps the full history. The embedded decider makes no
LLM call. At the end it writes the forest as an HTML page (active path highlighted) to the
temporary folder.

Run it offline (a small fake model answers)::

    python examples/discourse_tree_agent.py

or with a real model, any ``init_chat_model`` string whose provider package is installed::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/discourse_tree_agent.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from langchain_ctxmgmt import DiscourseTreeMiddleware

CONVERSATION = [
    "Help me plan a one-week trip to Rome in May.",
    "Which hotels in Rome are close to the Colosseum?",
    "How many days should I keep for the Vatican museums in Rome?",
    "Instead of Rome, what would a one-week trip to Paris in May look like?",
    "In Python, my pandas merge raises a KeyError. How do I debug the pandas merge?",
    "How do I group a pandas DataFrame by two columns in pandas?",
    "Back to Rome: which of those hotels near the Colosseum has a rooftop terrace?",
]


class OfflineChatModel(BaseChatModel):
    """A stand-in for a chat model, so the example runs without a network: it says what it got."""

    @property
    def _llm_type(self) -> str:
        return "offline-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:
        """No tools in this example."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = AIMessage(f"(offline model) I was sent {len(messages)} messages for this answer.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def make_model() -> BaseChatModel:
    """A real model if ``CTXMGMT_MODEL`` names a usable one, else the offline fake."""
    name = os.environ.get("CTXMGMT_MODEL")
    if name:
        try:
            from langchain.chat_models import init_chat_model

            return init_chat_model(name)
        except Exception as exc:  # missing provider package, bad name, ...
            print(f"Cannot build {name!r} ({exc}); using the offline model.")
    return OfflineChatModel()


def main() -> None:
    """Talk through branching topics, then show the forest and what the model got last."""
    middleware = DiscourseTreeMiddleware(max_tokens=3000)
    agent = create_agent(
        make_model(),
        tools=[],
        system_prompt="You are a friendly travel and coding assistant. Answer briefly.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "example"}}
    for question in CONVERSATION:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
        context = middleware.last_context
        decision = context.details["plan"]["topic"]["action"]
        print(f"> {question}")
        print(f"  {state['messages'][-1].text}")
        print(
            f"  [topic {decision}; sent {context.tokens} of {context.history_tokens} tokens, "
            f"verbatim turns {context.turn_indices}]"
        )

    print("\nFor the last question the model received:")
    for message in middleware.last_context.messages():
        print(f"  {message.role}: {message.text}")
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print("\nThe conversation as a forest (* = active path):\n" + middleware.tree.explain())
    page = middleware.tree.render_html(os.path.join(tempfile.gettempdir(), "discourse_forest.html"))
    print(f"\nThe same forest as a web page: {page}")


if __name__ == "__main__":
    main()
