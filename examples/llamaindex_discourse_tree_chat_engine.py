"""A LlamaIndex chat engine whose LLM sees the current thread verbatim and other topics summarised.

``DiscourseTreeMemory`` is the engine's memory. It organises the conversation into topic
trees with branches (Context-Agent): a trip to Rome, an alternative trip to Paris branching
off it, an unrelated pandas question, and a return to Rome. For each LLM call it sends the
active path verbatim and one system message summarising the other topics and branches; the
chat store keeps the full history. The embedded decider makes no LLM call. At the end it
writes the forest as an HTML page (active path highlighted) to the temporary folder.

Run it offline (a mock LLM answers, see ``_fake.py``; the bundled MiniLM embedder runs locally)::

    python examples/llamaindex_discourse_tree_chat_engine.py

or with a real model (needs ``pip install llama-index-llms-openai``)::

    OPENAI_API_KEY=... python examples/llamaindex_discourse_tree_chat_engine.py
"""

from __future__ import annotations

import os
import tempfile

from _fake import OfflineLLM
from _run import chat, openai_llm, print_received, sent
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM

from ctxmgmt import Context
from llamaindex_ctxmgmt import DiscourseTreeMemory

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


def make_llm() -> LLM:
    """OpenAI when ``OPENAI_API_KEY`` is set and ``llama-index-llms-openai`` is installed, else offline."""
    return openai_llm("using the offline model") or OfflineLLM()


def note(context: Context) -> str:
    """The topic decision for the question and what was sent."""
    decision = context.details["plan"]["topic"]["action"]
    return f"topic {decision}; {sent(context)}, verbatim turns {context.turn_indices}"


def main(llm: LLM | None = None) -> DiscourseTreeMemory:
    """Talk through branching topics, then show the forest and what the LLM got last.

    Args:
        llm: The chat model; default :func:`make_llm`.

    Returns:
        The memory, for inspection (``get_all()`` holds every message).
    """
    memory = DiscourseTreeMemory.from_defaults(token_limit=3000)
    engine = SimpleChatEngine.from_defaults(llm=llm or make_llm(), memory=memory, system_prompt=SYSTEM_PROMPT)
    chat(engine, memory, CONVERSATION, note)

    print_received(memory.last_context, who="LLM", system=SYSTEM_PROMPT)
    print(f"\nThe chat store still holds all {len(memory.get_all())} messages.")
    print("\nThe conversation as a forest (* = active path):\n" + memory.strategy.explain())
    page = memory.strategy.render_html(os.path.join(tempfile.gettempdir(), "discourse_forest.html"))
    print(f"\nThe same forest as a web page: {page}")
    return memory


if __name__ == "__main__":
    main()
