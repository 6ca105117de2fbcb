"""TierCascade: ACM's three tiers of one conversation, and the cascade that moves turns down them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.acm_block_measure import BlockMeasure
from ctxmgmt.strategies.acm_entity_tier import EntityTier, turn_time
from ctxmgmt.strategies.acm_summary_tier import SummaryTier
from ctxmgmt.strategies.state import CappedLog


@dataclass(frozen=True)
class CascadeLimits:
    """The token limits the cascade keeps the tiers within (from ``ACMConfig`` and its budget B).

    Attributes:
        token_budget: B, the cascade budget.
        floor: What the verbatim tier keeps, ``unmodified_ratio * B``.
        cascade_floor: What the cascade keeps the verbatim tier within: the floor, less the
            query's share of it with ``stable_layout``.
        summary_tier_limit: Most tokens of the summary block, ``summary_share * (B - floor)``.
        entity_reserve: Tokens kept for the entity block, ``B - floor - summary_tier_limit``.
        summary_limit: Most tokens of one summary (``ACMConfig.summary_limit``).
        cascade_batch: Share of the floor freed beyond what must be (``ACMConfig.cascade_batch``).
    """

    token_budget: int
    floor: int
    cascade_floor: int
    summary_tier_limit: int
    entity_reserve: int
    summary_limit: int
    cascade_batch: float


class TierCascade:
    """The verbatim, summary and entity tiers of one conversation, and the cascade between them.

    Turns ``[verbatim_start, n)`` are verbatim, the summary tier covers the turns before
    ``verbatim_start`` that it still summarises, and turns ``[0, entity_end)`` are in the entity
    tier. :meth:`add` runs the cascade as each turn arrives, against the budget B: the new turn
    joins the verbatim tier; when verbatim + summaries + the entity reserve exceed B, the
    oldest verbatim turns leave (at least one, until the tier is within the cascade floor) and
    are summarised together into one summary. When the summary block exceeds its limit, its
    oldest summaries collapse into the entity tier (the entities of their *source turns* are
    extracted and merged). Each turn is summarised at most once and entity-extracted at most
    once; a query never triggers either.

    Args:
        log_entries: Tier events kept in :attr:`log` (the newest).
    """

    def __init__(self, log_entries: int) -> None:
        self.verbatim_start = 0
        """First turn of the verbatim tier."""
        self.entity_end = 0
        """Turns ``[0, entity_end)`` are in the entity tier."""
        self.summary_tier = SummaryTier()
        self.entity_tier = EntityTier()
        self.log: CappedLog[str] = CappedLog(log_entries)
        """What the cascade did, one line per summary or collapse (the newest ``log_entries``)."""

    def tiers(self, turn_count: int) -> dict[str, list[int]]:
        """Turn indices per tier: ``{"verbatim": [...], "summary": [...], "entities": [...]}``."""
        items = self.summary_tier.items
        first_summary = items[0].start if items else self.verbatim_start
        return {
            "verbatim": list(range(self.verbatim_start, turn_count)),
            "summary": list(range(first_summary, self.verbatim_start)),
            "entities": list(range(self.entity_end)),
        }

    def add(
        self,
        turns: Sequence[Turn],
        tokens: Sequence[int],
        start: int,
        limits: CascadeLimits,
        *,
        summarizer: Any,
        fallback: Any,
        entity_extractor: Any,
        measure: BlockMeasure,
        extract: bool = True,
    ) -> int:
        """Run the cascade for turns ``start`` onwards, one turn at a time; the LLM calls made.

        ``turns`` and ``tokens`` (each turn's tokens) cover the whole conversation, new turns
        included. The entities of the turns collapsed meanwhile are extracted after the cascade
        (which never reads them), in one batch where the extractor allows it; the log gets
        every line in the order a turn-by-turn run writes them. ``extract=False`` leaves them
        queued (:meth:`merge_entities` merges them later, in the same order, to the same records).
        """
        lines: list[str] = []
        llm_calls = 0
        try:
            for count in range(start + 1, len(turns) + 1):  # one turn at a time: batching never matters
                llm_calls += self._step(turns, tokens, count, limits, summarizer, fallback, measure, lines)
        finally:
            for line in lines:
                self.log.append(line)
            if extract:
                llm_calls += self.merge_entities(turns, entity_extractor)
        return llm_calls

    def merge_entities(self, turns: Sequence[Turn], entity_extractor: Any, limit: int | None = None) -> int:
        """Extract and merge the queued collapses of up to ``limit`` turns (None = all); LLM calls made.

        Whenever it runs, the records come out the same: the groups merge in the order they
        collapsed (the cascade never reads them).
        """
        _, llm_calls = self.entity_tier.merge_pending(turns, entity_extractor, limit)
        return llm_calls

    def _step(
        self,
        turns: Sequence[Turn],
        tokens: Sequence[int],
        count: int,
        limits: CascadeLimits,
        summarizer: Any,
        fallback: Any,
        measure: BlockMeasure,
        lines: list[str],
    ) -> int:
        """The cascade once the first ``count`` turns are in; the LLM calls made."""
        verbatim = sum(tokens[self.verbatim_start : count])
        if not self._overflows(verbatim, limits, measure):
            return 0
        batch = self._leave_verbatim(tokens, count, verbatim, limits)
        llm_calls = self.summary_tier.summarize(
            turns,
            batch,
            time=turn_time(turns[batch[0]]),
            limit=min(limits.summary_limit, limits.summary_tier_limit - MESSAGE_OVERHEAD),
            summarizer=summarizer,
            fallback=fallback,
            measure=measure,
            log=lines,
        )
        self._collapse_oldest_summaries(limits, measure, lines)
        return llm_calls

    def _overflows(self, verbatim: int, limits: CascadeLimits, measure: BlockMeasure) -> bool:
        """Whether verbatim + summaries + the entity reserve (and the query's share) exceed B."""
        reserve = limits.floor - limits.cascade_floor  # the query's share with stable_layout
        summary = self.summary_tier.tokens(measure)
        return verbatim + summary + limits.entity_reserve + reserve > limits.token_budget

    def _leave_verbatim(
        self, tokens: Sequence[int], count: int, verbatim: int, limits: CascadeLimits
    ) -> list[int]:
        """Move the oldest verbatim turns out until the tier is within its target; the turns moved.

        At least one turn moves; the target is the cascade floor less ``cascade_batch`` of it.
        """
        batch: list[int] = []
        target = int(limits.cascade_floor * (1 - limits.cascade_batch))  # room for a few turns more
        while self.verbatim_start < count and (verbatim > target or not batch):
            batch.append(self.verbatim_start)
            verbatim -= tokens[self.verbatim_start]
            self.verbatim_start += 1
        return batch

    def _collapse_oldest_summaries(
        self, limits: CascadeLimits, measure: BlockMeasure, lines: list[str]
    ) -> None:
        """Collapse the oldest summaries' turns into the entity tier while the summaries are over their limit.

        With no summary left, every turn between the entity tier and the verbatim tier (summarised
        into nothing, or with no room for a summary) goes to the entity tier too.
        """
        summaries = self.summary_tier
        while summaries.items and summaries.tokens(measure) > limits.summary_tier_limit:
            summaries.drop_oldest()
            end = summaries.items[0].start if summaries.items else self.verbatim_start
            self._collapse(list(range(self.entity_end, end)), lines)  # its turns and any unsummarised gap
        if not summaries.items:
            self._collapse(list(range(self.entity_end, self.verbatim_start)), lines)

    def _collapse(self, indices: list[int], lines: list[str]) -> None:
        """Move the turns ``indices`` to the entity tier (nothing when there are none)."""
        if not indices:
            return
        self.entity_tier.collapse(indices)
        self.entity_end = max(self.entity_end, indices[-1] + 1)
        lines.append(f"collapsed turns {indices[0]}-{indices[-1]} to entities")
