"""DiscourseTreeBlock: Context-Agent's discourse trees as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from llamaindex_ctxmgmt._base import StrategyMemoryBlock


class DiscourseTreeBlock(StrategyMemoryBlock, strategy=DiscourseTreeStrategy):
    """Memory block that organises the turns ``Memory`` flushes out of its queue into topic trees.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block places each flushed turn in a forest of topic trees
    (Context-Agent) and, on ``Memory.get()``, places the newest user message too and returns
    the summaries of the other topics and side branches followed by the flushed turns of the
    active path. By default (``output="text"``) that is one text, which ``Memory`` inserts
    into the system message (or the latest user message, per its ``insert_method``);
    ``output="messages"`` returns a system message with the summaries and the path turns as
    ``ChatMessage`` objects.

    Example:
        >>> from llama_index.core.memory import Memory, InsertMethod
        >>> from llamaindex_ctxmgmt import DiscourseTreeBlock
        >>> memory = Memory.from_defaults(  # the outline goes into the latest user message
        ...     memory_blocks=[DiscourseTreeBlock()], insert_method=InsertMethod.USER
        ... )  # doctest: +SKIP
    """
