"""BudgetPacker: what of ACM's tiers one selection shows within its budget, and in which order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ctxmgmt.scoring.kadane import (
    NEIGHBOUR_WEIGHT,
    THETA,
    TUNED_TAU,
    kadane_dial,
    keep_best_within,
    shape_signal,
    trim_to_budget,
)
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import best_above_mean
from ctxmgmt.scoring.vector_text import USER_PART_RANKS
from ctxmgmt.strategies.acm_block_measure import BlockMeasure
from ctxmgmt.strategies.acm_cascade import TierCascade
from ctxmgmt.strategies.acm_entity_tier import ENTITY_HEADER, EntityRecord, recall_order
from ctxmgmt.strategies.acm_summary_tier import SUMMARY_HEADER, SummaryItem


class PackerSettings(Protocol):
    """The parameters :class:`BudgetPacker` reads (``ACMConfig`` has them; see it for their meaning)."""

    @property
    def token_budget(self) -> int:
        """The cascade budget B, in tokens."""
        ...

    @property
    def unmodified_ratio(self) -> float:
        """Share of the budget for the verbatim floor."""
        ...

    @property
    def summary_share(self) -> float:
        """Share of the band for summaries (``stable_layout``)."""
        ...

    @property
    def recall_share(self) -> float:
        """Share of the band query recall may take first."""
        ...

    @property
    def query_recall(self) -> bool:
        """Whether the turns behind mentioned entities come back."""
        ...

    @property
    def query_share(self) -> float:
        """Share of the floor for the query spans."""
        ...

    @property
    def query_turns(self) -> str:
        """How the query's turns are found: ``"spans"`` (KadaneDial) or ``"best"`` (best BM25 first)."""
        ...


@dataclass
class Packing:
    """What one selection shows, as :class:`BudgetPacker` chose it.

    Attributes:
        budget: The selection's budget b, in tokens.
        floor: The verbatim floor, ``unmodified_ratio`` of b (of B with ``stable_layout``).
        verbatim: Turns of the verbatim tier shown (with the query spans among them), ascending.
        query_spans: Turns the query needs, found by BM25 + KadaneDial, ascending.
        query_user_only: Older turns the query needs shown as their user message(s) alone (a long
            reply left out for the query's share) -> those tokens.
        recalled: Turns of the entity tier behind entities the query mentions (ascending;
            best first with ``stable_layout``).
        mentioned: The entities the query mentions, by key.
        summaries: The summaries shown, oldest first.
        summary_lines: Their lines.
        ranked: Every entity, best first.
        entity_lines: The entity lines shown, chronological.
        dropped_verbatim: Verbatim turns left out for the budget.
        used: Tokens of everything chosen.
    """

    budget: int
    floor: int
    verbatim: list[int] = field(default_factory=list)
    query_spans: list[int] = field(default_factory=list)
    query_user_only: dict[int, int] = field(default_factory=dict)
    recalled: list[int] = field(default_factory=list)
    mentioned: dict[str, EntityRecord] = field(default_factory=dict)
    summaries: list[SummaryItem] = field(default_factory=list)
    summary_lines: list[str] = field(default_factory=list)
    ranked: list[EntityRecord] = field(default_factory=list)
    entity_lines: list[str] = field(default_factory=list)
    dropped_verbatim: list[int] = field(default_factory=list)
    used: int = 0


class BudgetPacker:
    """Fills one selection's budget from ACM's tiers, by priority, counting every block exactly.

    :meth:`pack` (budget b; floor ``unmodified_ratio * b``, band ``b - floor``):

    1. the newest verbatim turn whenever it fits in b; the turns the query needs
       (:meth:`query_spans`, beyond ACM) up to ``query_share`` of the floor; the next newest
       verbatim turns, contiguous, up to the floor;
    2. query recall (beyond ACM): turns of the entity tier behind entities the query
       mentions, verbatim, up to ``recall_share`` of the band;
    3. the summaries, newest first, in the rest of the band;
    4. the entities (mentioned first, then by label value, mentions and recency) in what is
       left of the band;
    5. the older verbatim turns, then more recalled turns, then more entities, in what is left
       of b.

    :meth:`pack_stable` (``stable_layout``) sizes a query-independent prefix from the cascade
    budget B instead, then adds the query's turns. Built for one selection.

    Args:
        config: The strategy's parameters.
        cascade: The tiers.
        turn_tokens: Tokens of each turn.
        lexical: BM25 index of every turn (for the query spans).
        measure: Counts the text blocks.
        cascade_floor: What the cascade keeps the verbatim tier within
            (:attr:`~ctxmgmt.strategies.acm.ACMStrategy.cascade_floor`).
        user_part: Turn -> tokens of its user message(s) when a long reply may be left out
            (:meth:`~ctxmgmt.strategies.base.Strategy.long_user_part`), else None; None: never.
    """

    def __init__(
        self,
        config: PackerSettings,
        cascade: TierCascade,
        turn_tokens: Sequence[int],
        lexical: BM25Index,
        measure: BlockMeasure,
        cascade_floor: int,
        user_part: Callable[[int], int | None] | None = None,
    ) -> None:
        self.config = config
        self.cascade = cascade
        self.turn_tokens = turn_tokens
        self.lexical = lexical
        self.measure = measure
        self.cascade_floor = cascade_floor
        self.user_part = user_part
        self._cursor = len(turn_tokens) - 1  # the newest verbatim turn not yet taken

    # -- the default layout -----------------------------------------------------------------------
    def pack(self, query: str, budget: int) -> Packing:
        """The turns, summaries and entity lines shown for ``query`` within ``budget`` tokens.

        ``verbatim`` ends up holding the query spans within the verbatim tier too.
        """
        packing = Packing(budget=budget, floor=int(self.config.unmodified_ratio * budget))
        band = budget - packing.floor
        # 1. the newest turn, the query's spans, then the newest verbatim turns up to the floor
        self._take_newest_turn(packing)
        spans_cap = min(int(self.config.query_share * packing.floor), budget - packing.used)
        found = self.query_turns(query, spans_cap, set(packing.verbatim))
        packing.query_spans, packing.query_user_only = found
        packing.used += self._tokens_of(packing.query_spans) + sum(packing.query_user_only.values())
        self._take_older_turns(packing, packing.floor)
        # 2. query recall in its share of the band
        order = self._mention(packing, query)
        self._recall(packing, order, int(self.config.recall_share * band))
        # 3. and 4. summaries, then entities, in the rest of the band (summaries were sized for
        # the cascade budget, which the system prompt and the current turn make larger than b)
        recalled = self._tokens_of(packing.recalled)
        self._take_summaries(packing, min(band - recalled, budget - packing.used))
        summary_tokens = self.measure.block_tokens(SUMMARY_HEADER, packing.summary_lines)
        self._take_entities(packing, max(0, min(band - recalled - summary_tokens, budget - packing.used)))
        # 5. older verbatim turns, more recall, more entities in what is left of the budget
        self._take_older_turns(packing, budget)
        if self._cursor >= self.cascade.verbatim_start:
            start, spans = self.cascade.verbatim_start, set(packing.query_spans)
            packing.dropped_verbatim = [t for t in range(start, self._cursor + 1) if t not in spans]
        self._recall(packing, order, budget)
        self._take_more_entities(packing)
        # entities in order of first mention; the newer query spans shown with the verbatim turns
        counted = self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines)
        packing.entity_lines = self._chronological(packing, budget - packing.used + counted)
        packing.used += self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines) - counted
        packing.recalled.sort()
        newer_spans = [t for t in packing.query_spans if t >= self.cascade.verbatim_start]
        packing.verbatim = sorted([*packing.verbatim, *newer_spans])
        return packing

    def _take_newest_turn(self, packing: Packing) -> None:
        """The newest turn, verbatim, whenever it fits in the budget at all."""
        cursor = self._cursor
        if cursor >= self.cascade.verbatim_start and self.turn_tokens[cursor] <= packing.budget:
            packing.verbatim.append(cursor)
            packing.used += self.turn_tokens[cursor]
            self._cursor -= 1

    def _take_older_turns(self, packing: Packing, limit: int) -> None:
        """Older verbatim turns, newest first (query spans skipped), while ``used`` stays within ``limit``."""
        while self._cursor >= self.cascade.verbatim_start:
            if self._cursor not in packing.query_spans:
                cost = self.turn_tokens[self._cursor]
                if packing.used + cost > limit:
                    return
                packing.verbatim.append(self._cursor)
                packing.used += cost
            self._cursor -= 1

    def _mention(self, packing: Packing, query: str) -> list[int]:
        """Find the entities ``query`` mentions (with ``query_recall``); the turns behind them, best first."""
        if self.config.query_recall and self.cascade.entity_tier.records:
            packing.mentioned = self.cascade.entity_tier.mentioned(query)
        return recall_order(packing.mentioned, set()) if packing.mentioned else []

    def _recall(self, packing: Packing, order: list[int], cap: int) -> None:
        """Add the turns of ``order`` that fit while the recalled turns stay within ``cap`` tokens."""
        for t in order:
            if t in packing.recalled or t in packing.query_spans or t in packing.query_user_only:
                continue
            cost = self.turn_tokens[t]
            if cost <= cap - self._tokens_of(packing.recalled) and packing.used + cost <= packing.budget:
                packing.recalled.append(t)
                packing.used += cost

    def _take_summaries(self, packing: Packing, cap: int) -> None:
        """The newest summaries whose block fits in ``cap`` tokens (the summary block stays within it)."""
        for item in reversed(self.cascade.summary_tier.items):
            trial = [item.line(), *packing.summary_lines]
            if self.measure.block_tokens(SUMMARY_HEADER, trial) > cap:
                break
            packing.summary_lines = trial
            packing.summaries.insert(0, item)
        packing.used += self.measure.block_tokens(SUMMARY_HEADER, packing.summary_lines)

    def _take_entities(self, packing: Packing, cap: int) -> None:
        """The best entity lines whose block fits in ``cap`` tokens."""
        packing.ranked = self.cascade.entity_tier.ranked(packing.mentioned, len(self.turn_tokens))
        lines = [r.line() for r in packing.ranked]
        packing.entity_lines = self.measure.fill_lines(ENTITY_HEADER, [], lines, cap)
        packing.used += self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines)

    def _take_more_entities(self, packing: Packing) -> None:
        """More entity lines, best first, in what is left of the budget."""
        if len(packing.entity_lines) >= len(packing.ranked):
            return
        before = self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines)
        room = packing.budget - packing.used + before
        shown = set(packing.entity_lines)
        more = [r.line() for r in packing.ranked if r.line() not in shown]
        packing.entity_lines = self.measure.fill_lines(ENTITY_HEADER, packing.entity_lines, more, room)
        packing.used += self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines) - before

    def _chronological(self, packing: Packing, cap: int) -> list[str]:
        """The entity lines in order of first mention, the lowest-ranked dropped until the block fits ``cap``.

        Tokens can merge across line breaks, so the chronological order may count a little
        more than the order the lines were fitted in.
        """
        lines = list(packing.entity_lines)
        if not lines:
            return lines
        order = {r.line(): (r.turns[0], r.text) for r in packing.ranked}
        by_rank = list(lines)  # filled best first
        lines.sort(key=lambda line: order[line])
        while lines and self.measure.block_tokens(ENTITY_HEADER, lines) > cap:
            lines.remove(by_rank.pop())
        return lines

    # -- the stable layout ------------------------------------------------------------------------
    def pack_stable(self, query: str, budget: int) -> Packing:
        """``stable_layout``: a prefix that does not depend on the query, then the turns the query needs.

        The prefix is sized from the cascade budget B (``token_budget``), not from ``budget``
        (which the caller's system prompt and current turn make vary from call to call): the
        summaries and the entities (ranked without the query) share the band
        ``(1 - unmodified_ratio) * B`` as in :meth:`pack`, beside the whole verbatim tier (the
        cascade keeps it within the cascade floor). It changes only when the cascade moves the
        tiers; between, new turns are appended. Then, in the query's share of the floor, the
        query's spans and the turns behind the entities the query mentions.
        """
        cascade_budget = self.config.token_budget
        packing = Packing(budget=budget, floor=int(self.config.unmodified_ratio * cascade_budget))
        band = cascade_budget - packing.floor
        packing.verbatim = self._verbatim_tier_within(min(budget, self.cascade_floor), budget)
        packing.used = self._tokens_of(packing.verbatim)
        self._take_summaries(packing, min(int(self.config.summary_share * band), budget - packing.used))
        summary_tokens = self.measure.block_tokens(SUMMARY_HEADER, packing.summary_lines)
        entity_cap = max(0, min(band - summary_tokens, budget - packing.used))
        packing.ranked = self.cascade.entity_tier.ranked({}, len(self.turn_tokens))
        packing.entity_lines = self.measure.fill_lines(
            ENTITY_HEADER, [], [r.line() for r in packing.ranked], entity_cap
        )
        packing.entity_lines = self._chronological(packing, entity_cap)
        packing.used += self.measure.block_tokens(ENTITY_HEADER, packing.entity_lines)
        self._take_query_turns(packing, query, min(budget - packing.used, packing.floor - self.cascade_floor))
        return packing

    def _verbatim_tier_within(self, cap: int, budget: int) -> list[int]:
        """The newest verbatim turns within ``cap`` tokens; at least the newest if it fits ``budget``."""
        count = len(self.turn_tokens)
        start = count
        while start > self.cascade.verbatim_start and self._tokens_of(range(start - 1, count)) <= cap:
            start -= 1
        if start == count and count > self.cascade.verbatim_start and self.turn_tokens[count - 1] <= budget:
            start = count - 1  # the newest turn whenever it fits at all
        return list(range(start, count))

    def _take_query_turns(self, packing: Packing, query: str, room: int) -> None:
        """The query's spans, then the turns behind the entities it mentions, within ``room`` tokens."""
        if self.config.query_share > 0:
            found = self.query_turns(query, room, set(packing.verbatim))
            packing.query_spans, packing.query_user_only = found
        room -= self._tokens_of(packing.query_spans) + sum(packing.query_user_only.values())
        if self.config.query_recall and self.cascade.entity_tier.records:
            packing.mentioned = self.cascade.entity_tier.mentioned(query)
        if not packing.mentioned:
            return
        shown = set(packing.verbatim) | set(packing.query_spans) | set(packing.query_user_only)
        for t in recall_order(packing.mentioned, shown):
            if self.turn_tokens[t] <= room:
                packing.recalled.append(t)
                room -= self.turn_tokens[t]

    # -- the query's turns ------------------------------------------------------------------------
    def query_spans(self, query: str, cap: int, taken: set[int]) -> list[int]:
        """Turns the query needs whole, within ``cap`` tokens, ascending: :meth:`query_turns`' first part."""
        return self.query_turns(query, cap, taken)[0]

    def query_turns(self, query: str, cap: int, taken: set[int]) -> tuple[list[int], dict[int, int]]:
        """Turns the query needs within ``cap`` tokens (beyond ACM): (whole, ascending; user part -> tokens).

        ``query_turns="spans"``: spans of consecutive turns found as KadaneDial finds them
        (:func:`ctxmgmt.scoring.kadane.kadane_dial`, gain shift ``TUNED_TAU``, the neighbour
        term of ``KadaneDialConfig``) on each turn's BM25 score for ``query`` scaled to [0, 1];
        over ``cap``, the lowest-scoring span edges go first. ``"best"``: the turns with the
        best BM25 score first, each while it fits in ``cap`` (:meth:`best_turns`). ``taken``
        turns are shown anyway and left out. Nothing when ``cap`` is not positive or no turn
        shares a word with the query.

        When the turns found do not fit and some are long older turns (``user_part``: an
        assistant's long reply, before the verbatim tier), those go first as their user
        message(s) alone, best BM25 first, with the long older turns among the
        :data:`~ctxmgmt.scoring.vector_text.USER_PART_RANKS` best that were not found; replies
        come back best first while they fit (:func:`~ctxmgmt.scoring.kadane.keep_best_within`).
        """
        if cap <= 0 or not self.turn_tokens:
            return [], {}
        relevance = self.lexical.scores(query)
        top = float(relevance.max()) if len(relevance) else 0.0
        if top <= 0:
            return [], {}
        if self.config.query_turns == "best":
            chosen = {t for t in range(len(relevance)) if relevance[t] > 0} - taken
        else:
            signal = shape_signal(relevance / top, sharpness=1.0, neighbour_weight=NEIGHBOUR_WEIGHT)
            chosen = set(kadane_dial(signal, tau=TUNED_TAU, theta=THETA).selected) - taken
        if self._tokens_of(sorted(chosen)) > cap:
            ranked = [t for t in best_above_mean(relevance, USER_PART_RANKS) if t not in taken]
            parts = self._user_parts(chosen | set(ranked))
            if parts:
                kept = keep_best_within(chosen, relevance, set(), self.turn_tokens, cap, parts, also=ranked)
                return sorted(chosen), {t: parts[t] for t in kept.user_only}
        if self.config.query_turns == "best":
            return self.best_turns(relevance, cap, taken), {}
        trim_to_budget(chosen, signal, set(), self.turn_tokens, cap)
        return sorted(chosen), {}

    def _user_parts(self, turns: set[int]) -> dict[int, int]:
        """Long turns of ``turns`` older than the verbatim tier -> tokens of their user message(s)."""
        if self.user_part is None:
            return {}
        found = {t: self.user_part(t) for t in turns if t < self.cascade.verbatim_start}
        return {t: n for t, n in found.items() if n is not None}

    def best_turns(self, relevance: np.ndarray, cap: int, taken: set[int]) -> list[int]:
        """Turns scoring above 0, best first (ties: the older), each while within ``cap`` tokens; ascending.

        A turn too long for what is left is skipped, not the end: a long reply's turn does not
        keep the shorter turns after it out (as top-k BM25 fills a budget; :func:`keep_best_within`).
        """
        chosen = {t for t in range(len(relevance)) if relevance[t] > 0} - taken
        keep_best_within(chosen, relevance, set(), self.turn_tokens, cap)
        return sorted(chosen)

    def _tokens_of(self, indices: Sequence[int]) -> int:
        return sum(self.turn_tokens[i] for i in indices)
