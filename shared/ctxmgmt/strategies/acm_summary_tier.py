"""SummaryTier: ACM's middle tier, summaries of the turns that left the verbatim tier."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmgmt.components.llm_call import meter_calls
from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.messages.framing import speaker_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.acm_block_measure import BlockMeasure

logger = logging.getLogger("ctxmgmt.strategies.acm")  # one logger for ACM, as before the split

SUMMARY_HEADER = "Summary of earlier turns:"
"""First line of the summary tier's block."""
MIN_SUMMARY_TOKENS = 8
"""Smallest room for a summary's text, in tokens; with less the turns go straight to entities."""


@dataclass
class SummaryItem:
    """One summary of the summary tier.

    Attributes:
        text: The summary (at most the per-summary token limit).
        start: First turn it covers.
        end: Last turn it covers (inclusive).
        time: Timestamp of its first turn ("" if none).
    """

    text: str
    start: int
    end: int
    time: str = ""

    def line(self) -> str:
        """The summary as one line of the summary block."""
        span = f"turn {self.start}" if self.start == self.end else f"turns {self.start}-{self.end}"
        when = f", {self.time}" if self.time else ""
        return f"- ({span}{when}) {self.text}"


class SummaryTier:
    """ACM's summary tier: one summary per batch of turns.

    Each batch of turns that leaves the verbatim tier is summarised once, into one
    :class:`SummaryItem` of at most ``summary_limit`` tokens (what is left of it once the block's
    header and the item's own prefix are counted). The items are kept oldest first; the cascade
    (:class:`~ctxmgmt.strategies.acm_cascade.TierCascade`) drops the oldest when the block
    grows over its limit and moves their turns to the entity tier.

    Args:
        items: The summaries, oldest first (restored state); none by default.
        calls: Summarizer calls made so far (restored state); 0 by default.
    """

    def __init__(self, items: list[SummaryItem] | None = None, calls: int = 0) -> None:
        self.items: list[SummaryItem] = items if items is not None else []
        self.calls = calls

    def tokens(self, measure: BlockMeasure) -> int:
        """Tokens of the whole tier as one block (0 when it holds nothing)."""
        return measure.block_tokens(SUMMARY_HEADER, [item.line() for item in self.items])

    def drop_oldest(self) -> None:
        """Forget the oldest summary (its turns go to the entity tier)."""
        self.items.pop(0)

    def summarize(
        self,
        turns: Sequence[Turn],
        batch: list[int],
        *,
        time: str,
        limit: int,
        summarizer: Any,
        fallback: Any,
        measure: BlockMeasure,
        log: list[str],
    ) -> int:
        """Summarise the turns ``batch`` (consecutive, ascending) into one new item; the LLM calls made.

        Args:
            turns: Every turn of the conversation (``batch`` indexes it).
            batch: The turns that just left the verbatim tier.
            time: Timestamp of the batch's first turn ("" if none).
            limit: Most tokens of the summary block holding this item alone (its header and
                the item's line; the message overhead not counted): the smaller of
                ``summary_limit`` and the tier's limit less that overhead.
            summarizer: The :class:`~ctxmgmt.components.summarizer.Summarizer` asked.
            fallback: The summarizer used when ``summarizer`` raises (the extractive one).
            measure: Counts the block's tokens.
            log: Where the line saying what happened is appended.

        With less than :data:`MIN_SUMMARY_TOKENS` of room the summarizer is not asked (the
        turns go straight to the entity tier); a summary that comes back empty is not kept.
        """
        text = "\n".join(
            f"{speaker_label(m.name, m.role)}: {' '.join(m.text.split())}"
            for i in batch
            for m in turns[i].messages
            if m.text.strip()
        )
        item = SummaryItem("", batch[0], batch[-1], time)
        # the line's own prefix, the header and the memory framing (ctxmgmt.messages.framing)
        limit -= measure.memory_tokens(SUMMARY_HEADER + "\n" + item.line()) - MESSAGE_OVERHEAD
        if limit < MIN_SUMMARY_TOKENS:
            log.append(f"no room for a summary of turns {batch[0]}-{batch[-1]}: straight to entities")
            return 0
        previous = [s.text for s in self.items]
        self.calls += 1
        with meter_calls() as meter:
            try:
                parts = list(summarizer.summarize(previous, text))
            except Exception as exc:  # a custom summarizer failed: keep the turns with the extractive one
                logger.warning(
                    "summarizer failed on turns %d-%d (%s); using the extractive summary",
                    batch[0],
                    batch[-1],
                    exc,
                )
                parts = fallback.summarize(previous, text)
        llm_calls = meter.calls_of(summarizer)
        item.text = measure.fit(" ".join(" ".join(str(p).split()) for p in parts if str(p).strip()), limit)
        if item.text:
            self.items.append(item)
            log.append(f"summarised turns {item.start}-{item.end} into {len(item.text.split())} words")
        else:
            log.append(f"turns {batch[0]}-{batch[-1]} gave no summary within the tier limit")
        return llm_calls
