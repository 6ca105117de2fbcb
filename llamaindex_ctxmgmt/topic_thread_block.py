"""TopicThreadBlock: C-DIC's topic-thread memory as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt import TopicThreadStrategy
from llamaindex_ctxmgmt._block import StrategyMemoryBlock


class TopicThreadBlock(
    StrategyMemoryBlock,
    strategy=TopicThreadStrategy,
    name="topic_threads",
    text_header="Earlier topic threads of this conversation relevant to the latest message:",
):
    """Memory block that keeps the turns ``Memory`` flushes as revisable topic threads (C-DIC).

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. Each flushed turn is written back into the thread memory (a new thread on
    a topic shift, else the best thread's compressed state is revised). On ``Memory.get()``
    the threads relevant to the newest user message are retrieved and returned as their
    compressed states plus their most relevant turns. By default (``output="messages"``)
    each thread state comes back as a framed memory message (role ``memory_role``, user by
    default) and the turns as ``ChatMessage`` objects; ``output="text"`` returns one escaped
    text, which ``Memory`` inserts into the system message or, with ``InsertMethod.USER``, the
    latest user message.

    Example:
        >>> from llamaindex_ctxmgmt import TopicThreadBlock
        >>> block = TopicThreadBlock(top_k=2, name="threads")
        >>> block.name, block.output
        ('threads', 'messages')
    """
