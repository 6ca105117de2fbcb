"""ContextLayout: the blocks, reasons and details of one ACM selection, from what was packed."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ctxmgmt.messages.context import Block, Context
from ctxmgmt.strategies.acm_cascade import TierCascade
from ctxmgmt.strategies.acm_entity_tier import ENTITY_HEADER
from ctxmgmt.strategies.acm_packer import PackerSettings, Packing
from ctxmgmt.strategies.acm_summary_tier import SUMMARY_HEADER
from ctxmgmt.strategies.base import Strategy


class ContextLayout:
    """Lays a :class:`~ctxmgmt.strategies.acm_packer.Packing` out as a context's blocks and details.

    Every block carries a ``reason`` naming its tier ("entity tier: ...", "summary tier: ...",
    "verbatim tier: ...") or why its turns were brought back ("recalled: ...", "query spans:
    ...", "the query's turns: ..."). ``details`` reports the budget, the tiers, what was shown
    and the calls made, and ``details["explain"]`` says it in lines with the newest tier events.

    Args:
        strategy: The strategy whose blocks these are (it makes and counts them).
        cascade: Its tiers.
        config: Its parameters.
    """

    def __init__(self, strategy: Strategy, cascade: TierCascade, config: PackerSettings) -> None:
        self.strategy = strategy
        self.cascade = cascade
        self.config = config

    def default(self, context: Context, packing: Packing) -> Context:
        """Entities, recalled and older query turns, summaries, verbatim turns: chronological."""
        budget, start = packing.budget, self.cascade.verbatim_start
        if packing.entity_lines:
            reason = f"entity tier: {len(packing.entity_lines)} of {len(packing.ranked)} entities"
            reason += f" of turns 0-{self.cascade.entity_end - 1}"
            context.blocks.append(self._entity_block(packing, reason))
        # recalled turns and older query spans, chronological (one block per run of either)
        names = ", ".join(sorted({r.text for r in packing.mentioned.values()}))
        older = sorted([*packing.recalled, *(t for t in packing.query_spans if t < start)])
        blocks = []
        for recalled, run in itertools.groupby(older, key=lambda t: t in packing.recalled):
            reason = "query spans: older turns it needs"
            if recalled:
                reason = f"recalled: the query mentions {names}"
            blocks.append(self.strategy.turns_block(list(run), reason))
        context.blocks.extend(sorted([*blocks, *self._user_only_blocks(packing)], key=lambda b: b.turns[0]))
        if packing.summary_lines:
            context.blocks.append(self._summary_block(packing))
        if packing.verbatim:
            reason = f"verbatim tier: the newest turns (floor {packing.floor} of {budget} tokens)"
            context.blocks.append(self.strategy.turns_block(packing.verbatim, reason))
        # Belt and braces: block counts are exact, so this never trims; it guards the guarantee.
        while context.blocks and context.tokens > budget:  # pragma: no cover
            context.blocks.pop(0)
        tiers = self.cascade.tiers(len(self.strategy))
        context.details.update(
            self._details(packing, tiers),
            dropped_verbatim=packing.dropped_verbatim,
            **self._call_counts(),
            explain=self._explain(packing, tiers),
        )
        return context

    def stable(self, context: Context, packing: Packing) -> Context:
        """``stable_layout``: entities, summaries, the verbatim tier (the prefix), then the query's turns.

        Over the budget (far below the cascade budget), the prefix's text blocks go first.
        """
        budget = packing.budget
        if packing.entity_lines:
            reason = f"entity tier: {len(packing.entity_lines)} of {len(packing.ranked)} entities"
            context.blocks.append(self._entity_block(packing, f"{reason}, ranked without the query"))
        if packing.summary_lines:
            context.blocks.append(self._summary_block(packing))
        if packing.verbatim:
            reason = f"verbatim tier: from turn {packing.verbatim[0]} (stable prefix)"
            context.blocks.append(self.strategy.turns_block(packing.verbatim, reason))
        asked = sorted({*packing.query_spans, *packing.recalled})
        if asked:
            reason = "the query's turns: spans and mentioned entities"
            context.blocks.append(self.strategy.turns_block(asked, reason))
        context.blocks.extend(self._user_only_blocks(packing))
        while context.blocks and context.tokens > budget:  # pragma: no cover - each part was fitted to it
            context.blocks.pop(0)
        prefix = len(context.blocks) - (1 if asked and context.blocks else 0) - len(packing.query_user_only)
        context.details.update(
            self._details(packing, self.cascade.tiers(len(self.strategy))),
            stable_blocks=prefix,
            **self._call_counts(),
            explain=[
                f"stable layout: budget {budget}, cascade budget {self.config.token_budget}; "
                f"prefix of {prefix} blocks (entities, summaries, turns {span(packing.verbatim)}), "
                f"then the query's turns {asked}",
                *self.cascade.log[-5:],
            ],
        )
        return context

    def _user_only_blocks(self, packing: Packing) -> list[Block]:
        """The older turns the query needs shown as their user message(s) alone, chronological."""
        reason = "query spans: an older turn it needs, its long reply left out"
        return [self.strategy.user_part_block(t, reason) for t in sorted(packing.query_user_only)]

    def _entity_block(self, packing: Packing, reason: str) -> Block:
        """The entity block: the lines shown, with the turns their entities come from."""
        shown = set(packing.entity_lines)
        covered = sorted({t for r in packing.ranked if r.line() in shown for t in r.turns})
        text = "\n".join([ENTITY_HEADER, *packing.entity_lines])
        return self.strategy.text_block("entities", text, turns=covered, reason=reason)

    def _summary_block(self, packing: Packing) -> Block:
        """The summary block: the summaries shown, with the turns they cover."""
        covered = [t for s in packing.summaries for t in range(s.start, s.end + 1)]
        total = len(self.cascade.summary_tier.items)
        reason = f"summary tier: {len(packing.summaries)} of {total} summaries"
        text = "\n".join([SUMMARY_HEADER, *packing.summary_lines])
        return self.strategy.text_block("summary", text, turns=covered, reason=reason)

    def _details(self, packing: Packing, tiers: dict[str, list[int]]) -> dict[str, Any]:
        """What every selection reports of its budget, tiers and entities (``context.details``)."""
        return {
            "token_budget": self.config.token_budget,
            "budget": packing.budget,
            "floor": packing.floor,
            "tiers": tiers,
            "verbatim": packing.verbatim,
            "recalled": packing.recalled,
            "query_spans": packing.query_spans,
            "query_user_only": sorted(packing.query_user_only),
            "mentioned": sorted(r.text for r in packing.mentioned.values()),
            "summaries": [asdict(s) for s in self.cascade.summary_tier.items],
            "entities_shown": len(packing.entity_lines),
            "entities_total": len(self.cascade.entity_tier.records),
        }

    def _call_counts(self) -> dict[str, int]:
        """Summarizer, extractor and LLM calls so far (the last keys of ``context.details``)."""
        return {
            "summarize_calls": self.cascade.summary_tier.calls,
            "extract_calls": self.cascade.entity_tier.calls,
            "llm_calls": self.strategy.llm_calls,
        }

    def _explain(self, packing: Packing, tiers: dict[str, list[int]]) -> list[str]:
        """The default layout's explanation: budget, each tier and what of it is shown, then tier events."""
        summaries, entities = self.cascade.summary_tier.items, self.cascade.entity_tier.records
        lines = [
            f"budget {packing.budget} tokens: verbatim floor {packing.floor} "
            f"({self.config.unmodified_ratio:.0%}), band {packing.budget - packing.floor}",
            f"verbatim tier: turns {span(tiers['verbatim'])}; shown {span(packing.verbatim)}",
            f"summary tier: {len(summaries)} summaries of turns {span(tiers['summary'])}; "
            f"shown {len(packing.summary_lines)}",
            f"entity tier: {len(entities)} entities of turns {span(tiers['entities'])}; "
            f"shown {len(packing.entity_lines)}",
        ]
        if packing.query_spans:
            lines.append(
                f"query spans (BM25 + KadaneDial, {self.config.query_share:.0%} of the floor): "
                f"turns {packing.query_spans}"
            )
        if packing.query_user_only:
            lines.append(f"user message alone, reply left out: turns {sorted(packing.query_user_only)}")
        if packing.mentioned:
            lines.append(
                f"query mentions {sorted(r.text for r in packing.mentioned.values())}: "
                f"recalled turns {packing.recalled}"
            )
        if packing.dropped_verbatim:
            lines.append(f"dropped for the budget: verbatim turns {span(packing.dropped_verbatim)}")
        lines.extend(self.cascade.log[-5:])
        return lines


def span(indices: Sequence[int]) -> str:
    """``indices`` (ascending) as "first-last", one index alone, or "-" when empty."""
    if not indices:
        return "-"
    return f"{indices[0]}-{indices[-1]}" if len(indices) > 1 else str(indices[0])
