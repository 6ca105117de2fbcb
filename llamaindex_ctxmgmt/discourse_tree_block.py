"""DiscourseTreeBlock: Context-Agent's discourse trees as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from llamaindex_ctxmgmt._block import StrategyMemoryBlock


class DiscourseTreeBlock(
    StrategyMemoryBlock,
    strategy=DiscourseTreeStrategy,
    name="discourse_tree",
    text_header="Earlier in this conversation (other topics summarised, then the current thread):",
):
    """Memory block that organises the turns ``Memory`` flushes out of its queue into topic trees.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block places each flushed turn in a forest of topic trees
    (Context-Agent) and, on ``Memory.get()``, places the newest user message too and returns
    the summaries of the other topics and side branches followed by the flushed turns of the
    active path. By default (``output="messages"``) the summaries come back as a framed
    memory message (role ``memory_role``, user by default) and the path turns as
    ``ChatMessage`` objects; ``output="text"`` returns one escaped text, which ``Memory``
    inserts into the system message or, with ``InsertMethod.USER``, the latest user message.

    Example:
        >>> from llama_index.core.memory import Memory, InsertMethod
        >>> from llamaindex_ctxmgmt import DiscourseTreeBlock
        >>> memory = Memory.from_defaults(  # a text outline goes into the latest user message
        ...     memory_blocks=[DiscourseTreeBlock(output="text")], insert_method=InsertMethod.USER
        ... )  # doctest: +SKIP
    """
