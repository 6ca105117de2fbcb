"""TopicThreadMemory: C-DIC's revisable per-thread memory as a LlamaIndex chat memory."""

from __future__ import annotations

from ctxmgmt import TopicThreadStrategy
from llamaindex_ctxmgmt._base import StrategyMemory


class TopicThreadMemory(StrategyMemory, strategy=TopicThreadStrategy):
    """Chat memory of topic threads with revisable compressed states (C-DIC, in text space).

    Each completed turn is written back: if no thread scores at least ``tau``
    (``cos(turn, thread) * exp(-alpha * turns since last retrieved)``, mean-centred cosine) a
    new thread is opened, otherwise the best thread is revised (the summariser updates its
    compressed state with the turn). :meth:`get` retrieves the threads scoring above ``tau``
    for the query (``input`` or the newest user message; else the best thread) and returns the
    system messages, each retrieved thread's state as one framed
    memory message (user role by default), their most relevant
    turns verbatim, the newest turn and the turn in progress, within ``token_limit``. The chat
    store keeps every message (:meth:`get_all` is lossless).

    With the default extractive compressor there is no LLM call; with ``llm=`` one
    ``llm.complete`` per turn (plus re-compressions). ``from_defaults(llm=...)`` also sizes
    ``token_limit`` from the LLM's context window.

    Example:
        >>> from llamaindex_ctxmgmt import TopicThreadMemory
        >>> memory = TopicThreadMemory.from_defaults(token_limit=1500, tau=0.3)
        >>> memory.strategy.config.tau
        0.3
        >>> print(memory.strategy.explain())  # doctest: +SKIP
    """
