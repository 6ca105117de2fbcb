"""``KadaneDialMemory``: classic LangChain memory that sends only the relevant spans of history."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy
from langchain_ctxmgmt._base import StrategyMemory


class KadaneDialMemory(StrategyMemory, strategy=KadaneDialStrategy):
    r"""DYCP KadaneDial selection as a classic ``BaseMemory`` (``langchain_classic``).

    Every saved turn (user input + AI output) is embedded once. For each new input, the
    turns are scored against it, z-normalised, and KadaneDial picks the contiguous spans of
    high relevance; they are returned in chronological order, within ``max_token_limit``.
    No extra LLM call. The full history stays in ``chat_memory`` / :attr:`messages`.

    Defaults are ``KadaneDialStrategy``'s; ``tau=0.6, lexical_weight=0, sharpness=1,
    neighbour_weight=0, common_share=None`` is DYCP exactly as published.

    Example:
        >>> from langchain_ctxmgmt import KadaneDialMemory
        >>> memory = KadaneDialMemory(max_token_limit=1000)  # bundled embedder, loaded on first use
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})  # doctest: +SKIP
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]  # doctest: +SKIP
        'Human: My cat is Miso.\nAI: Cute!'
    """
