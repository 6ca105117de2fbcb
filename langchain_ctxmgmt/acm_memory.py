"""``ACMTieredBuffer``: classic LangChain memory with ACM's verbatim / summary / entity tiers."""

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
from langchain_ctxmgmt._base import CtxMgmtMemory
from langchain_ctxmgmt._llm import resolve_summarizer


class ACMTieredBuffer(CtxMgmtMemory):
    r"""ACM adaptive context management as a classic ``BaseMemory`` (``langchain_classic``).

    Within ``max_token_limit`` the newest saved turns stay verbatim (at least
    ``unmodified_ratio`` of the budget while there are enough), older turns are summarised
    once into the summarised tier (at most ``summary_limit`` tokens per summary) and, when
    that tier is full, its oldest turns collapse into a de-duplicated list of named entities
    (spaCy ``en_core_web_sm``) with their source turn, timestamp, label and mention count.
    When the input mentions one of those entities, the verbatim turns behind it come back
    if the budget allows. ``load_memory_variables`` returns the entity and summary tiers as
    ``SystemMessage`` s (string form: ``System:`` lines) around the verbatim turns, never more
    than ``max_token_limit`` tokens. ``explain()`` shows the tiers. The full history stays in
    ``chat_memory`` / :attr:`messages`.

    Attributes:
        max_token_limit: Token budget (default 2000); at least 16 (``MIN_TOKEN_BUDGET``),
            else ConfigurationError at construction.
        unmodified_ratio: Share of the budget kept verbatim; 0.75 per ACM 5.
        summary_limit: Most tokens per summary; 120 per ACM 4.
        summary_share: Share of the non-verbatim band for summaries (rest: entities); 0.6.
        recall_share: Share of the non-verbatim band query recall may take first; 0.5.
        query_recall: Bring back turns behind entities the input mentions; default True.
        llm: A LangChain chat model to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        entity_extractor: Any ctxmgmt EntityExtractor or ``text -> entities`` callable;
            None = spaCy ``en_core_web_sm`` (loaded once per process).

    The shared fields (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
    ``human_prefix``, ``ai_prefix``, ``token_counter``, ``chat_memory``) are described on
    :class:`~langchain_ctxmgmt._base.CtxMgmtMemory`; ``embedder`` is unused.

    Example:
        >>> from langchain_ctxmgmt import ACMTieredBuffer
        >>> memory = ACMTieredBuffer(max_token_limit=2000)
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]
        'Human: My cat is Miso.\nAI: Cute!'
    """

    max_token_limit: int | None = DEFAULT_TOKEN_BUDGET
    unmodified_ratio: float = UNMODIFIED_RATIO
    summary_limit: int = SUMMARY_LIMIT
    summary_share: float = SUMMARY_SHARE
    recall_share: float = RECALL_SHARE
    query_recall: bool = True
    llm: Any = None
    summarizer: Any = None
    entity_extractor: Any = None

    def _make_strategy(self) -> Strategy:
        if self.max_token_limit is None:
            self.max_token_limit = DEFAULT_TOKEN_BUDGET
        return ACMStrategy(
            token_budget=check_min_budget(self.max_token_limit, name="max_token_limit"),
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
    def acm(self) -> ACMStrategy:
        """The ACMStrategy (tiers, summaries, entities)."""
        strategy = self.strategy
        assert isinstance(strategy, ACMStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser and entity extractor so far."""
        return self.acm.llm_calls
