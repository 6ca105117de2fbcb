"""A LangChain agent whose context stays under a hard token budget: ACM's three tiers.

``ACMTieredMiddleware`` sits in ``create_agent``'s middleware list. Newest turns are sent
verbatim, older ones as a summary, the oldest as a list of named entities (spaCy) with the
turn and date they came from; when the question names one of those entities, the turn
behind it comes back verbatim. The context never exceeds ``max_tokens``; the checkpointer
keeps the full history.

Run it offline (a fake model answers, see ``_fake.py``)::

    python examples/acm_tiered_agent.py

or with a real model, any ``init_chat_model`` string whose provider package is installed::

    CTXMGMT_MODEL="openai:gpt-4o-mini" python examples/acm_tiered_agent.py
"""

from __future__ import annotations

import os
from typing import Any

from _fake import OfflineChatModel
from _run import chat_model, example_agent
from langchain_core.language_models import BaseChatModel

from langchain_ctxmgmt.acm_middleware import ACMTieredMiddleware

CONVERSATION = [
    ("3 March, 2024", "My sister Priya is visiting from Toronto next Friday."),
    ("3 March, 2024", "I booked a table at Casa Lume for her birthday dinner."),
    ("5 March, 2024", "The plumber Marek fixed the leaking kitchen tap for 85 euros."),
    ("5 March, 2024", "I started reading The Left Hand of Darkness by Ursula K. Le Guin."),
    ("9 March, 2024", "My running club meets at Parque Eduardo VII every Sunday at 8 am."),
    ("9 March, 2024", "I need to renew my passport before the trip to Japan in June."),
    ("12 March, 2024", "Our team at Northwind moved the product launch to 14 May."),
    ("12 March, 2024", "I adopted a grey cat from the shelter and named her Miso."),
    ("15 March, 2024", "The dentist appointment with Dr. Okafor is on 2 April at 10 am."),
    ("15 March, 2024", "I want to learn to bake sourdough bread this spring."),
]
QUESTION = "Which day is Priya arriving from Toronto?"
BUDGET = 400


def make_model() -> BaseChatModel:
    """The model named by ``CTXMGMT_MODEL``, else the offline stand-in."""
    return chat_model(os.environ.get("CTXMGMT_MODEL"), "using the offline model") or OfflineChatModel()


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Replay the conversation, ask the question, show what the model received and why.

    Args:
        model: The agent's chat model; default :func:`make_model`.

    Returns:
        The agent's final state.
    """
    middleware = ACMTieredMiddleware(max_tokens=BUDGET)
    agent = example_agent(model or make_model(), middleware, system_prompt="You are a helpful assistant.")
    config = {"configurable": {"thread_id": "demo"}}
    for when, text in CONVERSATION:
        agent.invoke({"messages": [{"role": "user", "content": f"[{when}] {text}"}]}, config)
    result = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config)

    context = middleware.last_context
    assert context is not None
    print(f"For the last question the model received ({context.tokens} of at most {BUDGET} tokens):")
    for message in context.messages():
        print(f"  {message.role}: {message.text}")
    print()
    print(middleware.explain())
    print()
    print(f"Answer: {result['messages'][-1].content}")
    print(f"The agent state still holds all {len(result['messages'])} messages.")
    return result


if __name__ == "__main__":
    main()
