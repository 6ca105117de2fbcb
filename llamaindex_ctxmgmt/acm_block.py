"""ACMTieredBlock: ACM's tiers as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from ctxmgmt import ACMStrategy
from llamaindex_ctxmgmt._block import StrategyMemoryBlock


class ACMTieredBlock(
    StrategyMemoryBlock,
    strategy=ACMStrategy,
    name="acm_tiers",
    text_header="Earlier in this conversation (entities, summaries, then earlier turns):",
):
    """Memory block that keeps the turns ``Memory`` flushes in ACM's tiers.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block runs ACM's cascade over the flushed turns (newest verbatim,
    older summarised once, oldest reduced once to de-duplicated entities with source turn,
    timestamp, label and count) and, on ``Memory.get()``, returns the tiers within
    ``token_limit`` (default 2000 tokens), with the turns behind entities the newest user
    message mentions brought back verbatim when they fit. By default (``output="messages"``)
    the tiers come back as framed memory messages (role ``memory_role``, user by default) and
    the turns as ``ChatMessage`` objects; ``output="text"`` returns one escaped text, which
    ``Memory`` inserts into the system message or, with ``InsertMethod.USER``, the latest user
    message (use that: see :class:`~llamaindex_ctxmgmt._base.StrategyMemoryBlock`).

    Example:
        >>> from llamaindex_ctxmgmt import ACMTieredBlock
        >>> block = ACMTieredBlock(token_limit=1500, output="messages")
        >>> block.strategy_class.config_class.param("unmodified_ratio").default
        0.75
    """
