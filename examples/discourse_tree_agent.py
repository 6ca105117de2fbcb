"""A LangChain agent whose model sees the current thread verbatim and other topics summarised.

``DiscourseTreeMiddleware`` sits in ``create_agent``'s middleware list. It organises the
conversation into topic trees with branches (Context-Agent): a trip to Rome, an alternative
trip to Paris branching off it, an unrelated pandas question, and a return to Rome. For each
model call it sends the active path verbatim and one system message summarising the other
topics and branches; the checkpointer keeps the full history. The embedded decider makes no
LLM call. At the end it writes the forest as an HTML page (active path highlighted) to the
temporary folder.

Run it offline (a fake model answers, see ``_fake.py``)::

    python examples/discourse_tree_agent.py

or with a real model, any ``init_chat_model`` string whose provider package is installed::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/discourse_tree_agent.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, converse, example_agent, print_received, sent
from langchain_core.language_models import BaseChatModel

from ctxmgmt import Context
from langchain_ctxmgmt import DiscourseTreeMiddleware

SYSTEM_PROMPT = "You are a friendly travel and coding assistant. Answer briefly."
CONVERSATION = [
    "Help me plan a one-week trip to Rome in May.",
    "Which hotels in Rome are close to the Colosseum?",
    "How many days should I keep for the Vatican museums in Rome?",
    "Instead of Rome, what would a one-week trip to Paris in May look like?",
    "In Python, my pandas merge raises a KeyError. How do I debug the pandas merge?",
    "How do I group a pandas DataFrame by two columns in pandas?",
    "Back to Rome: which of those hotels near the Colosseum has a rooftop terrace?",
]


def make_model() -> BaseChatModel:
    """A real model if ``CTXMGMT_MODEL`` names a usable one, else the offline fake."""
    return chat_model(os.environ.get("CTXMGMT_MODEL"), "using the offline model") or OfflineChatModel()


def note(context: Context) -> str:
    """The topic decision for the question and what was sent."""
    decision = context.details["plan"]["topic"]["action"]
    return f"topic {decision}; {sent(context)}, verbatim turns {context.turn_indices}"


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Talk through branching topics, then show the forest and what the model got last.

    Args:
        model: The agent's chat model; default :func:`make_model`.

    Returns:
        The agent's final state.
    """
    middleware = DiscourseTreeMiddleware(max_tokens=3000)
    agent = example_agent(model or make_model(), middleware, SYSTEM_PROMPT)
    state = converse(agent, middleware, CONVERSATION, note)

    print_received(middleware.last_context)
    print(f"\nThe agent state still holds all {len(state['messages'])} messages.")
    print("\nThe conversation as a forest (* = active path):\n" + middleware.strategy.explain())
    page = middleware.strategy.render_html(os.path.join(tempfile.gettempdir(), "discourse_forest.html"))
    print(f"\nThe same forest as a web page: {page}")
    return state


if __name__ == "__main__":
    main()
