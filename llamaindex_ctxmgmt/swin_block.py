"""SWinSummaryBlock: SWin's sliding-window summary memory as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt.strategies.swin import SWinStrategy
from llamaindex_ctxmgmt._block import StrategyMemoryBlock


class SWinSummaryBlock(
    StrategyMemoryBlock,
    strategy=SWinStrategy,
    name="swin_summary",
    text_header="Earlier in this conversation (summary, then the latest earlier turns):",
):
    """Memory block that summarises the turns ``Memory`` flushes out of its queue (SWin).

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block cuts the flushed turns into overlapping windows of ``window``
    turns (sharing ``overlap``), summarises each window once into a deduplicated memory of at
    most ``gamma`` items, and on ``Memory.get()`` returns the memory followed by the flushed
    turns of the window still being filled. By default (``output="messages"``) the memory
    comes back as a framed memory message (role ``memory_role``, user by default) and the
    turns as ``ChatMessage`` objects; ``output="text"`` returns one escaped text, which
    ``Memory`` inserts into the system message or, with ``InsertMethod.USER``, the latest user
    message.

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import SWinSummaryBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[SWinSummaryBlock(window=8)]
        ... )  # doctest: +SKIP
        >>> memory.memory_blocks[0].llm_calls  # doctest: +SKIP
        0
    """
