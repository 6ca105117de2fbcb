"""SWinSummaryBuffer: SWin's sliding-window summary memory as a LlamaIndex chat memory."""

from __future__ import annotations

from ctxmgmt.strategies.swin import SWinStrategy
from llamaindex_ctxmgmt._base import StrategyMemory


class SWinSummaryBuffer(StrategyMemory, strategy=SWinStrategy):
    """Chat memory that sends a running summary of older turns plus the recent turns verbatim.

    Completed turns are cut into overlapping windows of ``window`` turns (consecutive windows
    share ``overlap`` turns); each window is summarised once, conditioned on the memory so
    far (SWin), into deduplicated items; above ``gamma`` items the least recent/salient is
    forgotten. :meth:`get` returns the system messages, the memory as one framed
    memory message (user role by default),
    the recent turns (the window being filled) and the turn in progress, within
    ``token_limit``. The chat store keeps every message (:meth:`get_all` is lossless).

    With the default extractive summariser there is no LLM call; with ``llm=`` (any
    LlamaIndex ``LLM``) about one ``llm.complete`` call per ``window - overlap`` turns.
    ``from_defaults(llm=...)`` also sizes ``token_limit`` from the LLM's context window.

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import SWinSummaryBuffer
        >>> memory = SWinSummaryBuffer.from_defaults(token_limit=2000)
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])
        >>> [m.content for m in memory.get(input="How old is my cat?")]
        ['My cat Miso is three.', 'Noted!']
    """

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        self.strategy.flush()

    def new_session(self) -> None:
        """Start a new conversation that remembers this one: clear the stored history, keep the memory."""
        conversation = self._conversation()
        with conversation.lock:
            conversation.carry_over(self.get_all())
            self.chat_store.delete_messages(self.chat_store_key)
