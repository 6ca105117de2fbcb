"""KadaneDialBlock: DYCP span selection as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy
from llamaindex_ctxmgmt._block import StrategyMemoryBlock


class KadaneDialBlock(
    StrategyMemoryBlock,
    strategy=KadaneDialStrategy,
    name="kadanedial_memory",
    text_header="Earlier turns of this conversation relevant to the latest message:",
):
    """Memory block that brings back the earlier turns relevant to the current message.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block embeds each flushed turn once and, on every ``Memory.get()``,
    scores them against the newest user message (``input`` or the last user message in the
    queue), then picks contiguous relevant spans with KadaneDial (DYCP). By default
    (``output="messages"``) the spans come back verbatim as ``ChatMessage`` objects, which
    ``Memory`` places right before its queue: the LLM sees the relevant old turns and the recent
    ones in chronological order. ``output="text"`` returns a transcript instead, inserted by
    ``Memory`` into the system message or the latest user message per its ``insert_method``.

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import KadaneDialBlock
        >>> block = KadaneDialBlock(keep_last=1)  # the newest flushed turn always comes back
        >>> memory = Memory.from_defaults(session_id="user-1", memory_blocks=[block])  # doctest: +SKIP
    """
