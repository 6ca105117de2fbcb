"""ACMTieredBuffer: ACM's verbatim / summary / entity tiers as a LlamaIndex chat memory."""

from __future__ import annotations

from ctxmgmt import ACMStrategy
from llamaindex_ctxmgmt._base import StrategyMemory


class ACMTieredBuffer(StrategyMemory, strategy=ACMStrategy):
    """Chat memory with ACM's tiers: recent turns verbatim, older summarised, oldest as entities.

    Within ``token_limit`` the newest turns stay verbatim (at least ``unmodified_ratio`` of
    the budget while there are enough), older turns are summarised once (at most
    ``summary_limit`` tokens per summary) and, when the summarised tier is full, its oldest
    turns collapse into de-duplicated named entities (spaCy ``en_core_web_sm``) with source
    turn, timestamp, label and mention count. When the query mentions one of those entities,
    the verbatim turns behind it come back if the budget allows. :meth:`get` returns the
    system messages, the entity and summary tiers as framed memory messages (user role by
    default, ``memory_role``), the verbatim turns and
    the turn in progress, never more than ``token_limit`` tokens. :meth:`explain` shows the
    tiers; the chat store keeps every message (:meth:`get_all` is lossless).

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import ACMTieredBuffer
        >>> memory = ACMTieredBuffer.from_defaults(token_limit=2000)
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])
        >>> [m.content for m in memory.get(input="How old is my cat?")]
        ['My cat Miso is three.', 'Noted!']
    """
