"""LlamaIndex adapters of ctxmgmt: chat memories and ``Memory`` blocks.

``KadaneDialMemory`` is a ``BaseMemory`` for chat engines and agents (``memory=...``);
``KadaneDialBlock`` is a block for ``llama_index.core.memory.Memory(memory_blocks=[...])``;
``SWinSummaryBuffer`` / ``SWinSummaryBlock`` are the same pair for SWin summarisation;
``DiscourseTreeMemory`` / ``DiscourseTreeBlock`` for Context-Agent discourse trees.
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('llamaindex_ctxmgmt needs LlamaIndex: pip install "ctxmgmt[llamaindex]"') from exc

from llamaindex_ctxmgmt._base import StrategyMemory
from llamaindex_ctxmgmt._block import StrategyMemoryBlock, erase_from_blocks, flush_early
from llamaindex_ctxmgmt.acm_block import ACMTieredBlock
from llamaindex_ctxmgmt.acm_memory import ACMTieredBuffer
from llamaindex_ctxmgmt.discourse_tree_block import DiscourseTreeBlock
from llamaindex_ctxmgmt.discourse_tree_memory import DiscourseTreeMemory
from llamaindex_ctxmgmt.kadanedial_block import KadaneDialBlock
from llamaindex_ctxmgmt.kadanedial_memory import KadaneDialMemory
from llamaindex_ctxmgmt.swin_block import SWinSummaryBlock
from llamaindex_ctxmgmt.swin_memory import SWinSummaryBuffer
from llamaindex_ctxmgmt.topic_thread_block import TopicThreadBlock
from llamaindex_ctxmgmt.topic_thread_memory import TopicThreadMemory

__all__ = [
    "ACMTieredBlock",
    "ACMTieredBuffer",
    "DiscourseTreeBlock",
    "DiscourseTreeMemory",
    "KadaneDialBlock",
    "KadaneDialMemory",
    "SWinSummaryBlock",
    "SWinSummaryBuffer",
    "StrategyMemory",
    "StrategyMemoryBlock",
    "TopicThreadBlock",
    "TopicThreadMemory",
    "erase_from_blocks",
    "flush_early",
]
