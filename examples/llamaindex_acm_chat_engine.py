"""A LlamaIndex chat engine whose LLM input stays under a hard token budget: ACM's three tiers.

``ACMTieredBuffer`` is the engine's memory. Newest turns are sent verbatim, older ones as a
summary, the oldest as a list of named entities (spaCy) with the turn and date they came
from; when the question names one of those entities, the turn behind it comes back verbatim.
What the engine sends (its system prompt included) never exceeds ``token_limit``; the chat
store keeps the full history.

Run it offline (a mock LLM answers, see ``_fake.py``; summaries are extractive)::

    python examples/llamaindex_acm_chat_engine.py

or with a real model (needs ``pip install llama-index-llms-openai``)::

    OPENAI_API_KEY=... python examples/llamaindex_acm_chat_engine.py
"""

from __future__ import annotations

from _fake import OfflineLLM
from _run import chat, openai_llm, print_received, sent
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM

from llamaindex_ctxmgmt import ACMTieredBuffer

SYSTEM_PROMPT = "You are a helpful assistant."
CONVERSATION = [
    "[3 March, 2024] My sister Priya is visiting from Toronto next Friday.",
    "[3 March, 2024] I booked a table at Casa Lume for her birthday dinner.",
    "[5 March, 2024] The plumber Marek fixed the leaking kitchen tap for 85 euros.",
    "[5 March, 2024] I started reading The Left Hand of Darkness by Ursula K. Le Guin.",
    "[9 March, 2024] My running club meets at Parque Eduardo VII every Sunday at 8 am.",
    "[9 March, 2024] I need to renew my passport before the trip to Japan in June.",
    "[12 March, 2024] Our team at Northwind moved the product launch to 14 May.",
    "[12 March, 2024] I adopted a grey cat from the shelter and named her Miso.",
    "[15 March, 2024] The dentist appointment with Dr. Okafor is on 2 April at 10 am.",
    "[15 March, 2024] I want to learn to bake sourdough bread this spring.",
    "Which day is Priya arriving from Toronto?",
]
BUDGET = 400


def make_llm() -> LLM:
    """OpenAI when ``OPENAI_API_KEY`` is set and ``llama-index-llms-openai`` is installed, else offline."""
    return openai_llm("using the offline model") or OfflineLLM()


def main(llm: LLM | None = None) -> ACMTieredBuffer:
    """Replay the conversation, ask about its first turn, show what the LLM received and why.

    Args:
        llm: The chat model; default :func:`make_llm`.

    Returns:
        The memory, for inspection (``get_all()`` holds every message).
    """
    memory = ACMTieredBuffer.from_defaults(token_limit=BUDGET)
    engine = SimpleChatEngine.from_defaults(llm=llm or make_llm(), memory=memory, system_prompt=SYSTEM_PROMPT)
    chat(
        engine,
        memory,
        CONVERSATION,
        lambda context: f"{sent(context)}, verbatim turns {context.turn_indices}",
    )

    # SimpleChatEngine sends its system prompt, then exactly what memory.get() returned
    # (the entity and summary tiers as system messages, then the verbatim turns).
    print_received(memory.last_context, who="LLM", system=SYSTEM_PROMPT)
    print(f"\nThe chat store still holds all {len(memory.get_all())} messages.")
    print("\nWhy:\n" + memory.explain())
    return memory


if __name__ == "__main__":
    main()
