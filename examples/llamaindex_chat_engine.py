"""A LlamaIndex chat engine whose LLM sees only the relevant part of a long conversation.

``KadaneDialMemory`` is the engine's memory. Before each LLM call it scores the earlier turns
against the newest user message and sends the relevant spans (plus the new message); the
chat store keeps the full history.

Run it offline (a mock LLM answers, see ``_fake.py``; the bundled MiniLM embedder runs locally)::

    python examples/llamaindex_chat_engine.py

or with a real model (needs ``pip install llama-index-llms-openai``)::

    OPENAI_API_KEY=... python examples/llamaindex_chat_engine.py
    OPENAI_API_KEY=... CTXMGMT_MODEL=gpt-4o python examples/llamaindex_chat_engine.py
"""

from __future__ import annotations

from typing import Any

from _fake import OfflineLLM
from _run import chat, openai_llm, print_received, sent
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM

from llamaindex_ctxmgmt import KadaneDialMemory

SYSTEM_PROMPT = "You are a friendly assistant. Answer in one or two sentences."

CONVERSATION = [
    "Hi! I just adopted a grey cat from the shelter and named her Miso.",
    "My sourdough starter smells like nail polish remover. Is that bad?",
    "The car makes a clunking sound over speed bumps.",
    "Any tips for learning barre chords on the guitar?",
    "I'm repainting the kitchen in a dark green.",
    "Which vaccinations does my new kitten need at the vet?",
]


def make_llm() -> LLM:
    """OpenAI when ``OPENAI_API_KEY`` is set and ``llama-index-llms-openai`` is installed, else offline."""
    return openai_llm("using the offline model") or OfflineLLM()


def main(llm: LLM | None = None, embed_model: Any = None) -> KadaneDialMemory:
    """Talk through a few topics, then ask about the first one and show what the LLM got.

    Args:
        llm: The chat model; default :func:`make_llm`.
        embed_model: Embedder for the memory; default the bundled all-MiniLM-L6-v2.

    Returns:
        The memory, for inspection.
    """
    memory = KadaneDialMemory.from_defaults(token_limit=3000, embed_model=embed_model)
    engine = SimpleChatEngine.from_defaults(llm=llm or make_llm(), memory=memory, system_prompt=SYSTEM_PROMPT)
    chat(engine, memory, CONVERSATION, lambda context: f"{sent(context)}, turns {context.turn_indices}")

    # SimpleChatEngine sends its system prompt, then exactly what memory.get() returned.
    print_received(memory.last_context, who="LLM", system=SYSTEM_PROMPT)
    print(f"\nThe chat store still holds all {len(memory.get_all())} messages.")
    print("\nWhy:\n" + memory.explain())
    return memory


if __name__ == "__main__":
    main()
