"""KadaneDialMemory: DYCP span selection as a LlamaIndex chat memory."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy
from llamaindex_ctxmgmt._base import StrategyMemory


class KadaneDialMemory(StrategyMemory, strategy=KadaneDialStrategy):
    """Chat memory that sends the LLM only the spans of earlier turns relevant to the query.

    Every completed turn (a user message and the replies, tool calls and tool results after
    it) is embedded once. On :meth:`get` the turns are scored against the query (``input`` if
    given, else the newest user message), the scores are z-normalised and KadaneDial (DYCP)
    picks contiguous high-relevance spans, returned in chronological order between the system
    messages and the turn in progress. No extra LLM call. The chat store keeps every message
    (:meth:`get_all` is lossless); a tool call never leaves without its result.

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import KadaneDialMemory
        >>> memory = KadaneDialMemory.from_defaults(token_limit=2000)  # doctest: +SKIP
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])  # doctest: +SKIP
        >>> memory.get(input="How old is my cat?")  # doctest: +SKIP
        [ChatMessage(role=<MessageRole.USER: 'user'>, ...), ChatMessage(role=<MessageRole.ASSISTANT: ...>)]
        >>> print(memory.explain())  # doctest: +SKIP
    """
