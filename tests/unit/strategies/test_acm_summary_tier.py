"""SummaryTier: one summary per batch within its limit, the fallback summarizer, summary lines."""

from __future__ import annotations

import logging

from ctxmgmt import Message, Turn
from ctxmgmt.components.summarizer import ExtractiveSummarizer
from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.strategies.acm_summary_tier import MIN_SUMMARY_TOKENS, SUMMARY_HEADER, SummaryItem, SummaryTier
from tests.unit.strategies.test_acm_block_measure import MEASURE

TURNS = [
    Turn(i, (Message("user", f"I moved to city {i}. It rains."), Message("assistant", "Noted.")))
    for i in range(6)
]


class Echo:
    """Returns each line of the window as a summary item; records what it was given."""

    uses_llm = True

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []

    def summarize(self, previous, text):
        self.calls.append((list(previous), text))
        return text.splitlines()


class Broken:
    uses_llm = False

    def summarize(self, previous, text):
        raise RuntimeError("down")


def summarize(tier: SummaryTier, batch: list[int], summarizer, limit: int = 120, time: str = ""):
    log: list[str] = []
    calls = tier.summarize(
        TURNS,
        batch,
        time=time,
        limit=limit,
        summarizer=summarizer,
        fallback=ExtractiveSummarizer(),
        measure=MEASURE,
        log=log,
    )
    return calls, log


def test_a_batch_becomes_one_item_covering_its_turns_with_the_previous_summaries_given():
    tier, echo = SummaryTier(), Echo()
    calls, log = summarize(tier, [0, 1], echo, time="8 May, 2023")
    assert calls == 1 and tier.calls == 1  # an LLM-backed summarizer: one call charged
    (item,) = tier.items
    assert (item.start, item.end, item.time) == (0, 1, "8 May, 2023")
    assert "city 0" in item.text and "city 1" in item.text
    assert log == [f"summarised turns 0-1 into {len(item.text.split())} words"]
    summarize(tier, [2], echo)
    assert echo.calls[1][0] == [item.text]  # the earlier summaries are passed as context
    assert [i.start for i in tier.items] == [0, 2]


def test_a_summary_is_cut_to_the_limit_less_its_line_prefix_and_header():
    tier = SummaryTier()
    summarize(tier, [0, 1, 2, 3], Echo(), limit=30)
    (item,) = tier.items
    assert item.text.endswith(" ...")
    # the header and the item's line within the limit, the message overhead beside it
    assert MEASURE.memory_tokens(SUMMARY_HEADER + "\n" + item.line()) <= 30 + MESSAGE_OVERHEAD
    assert tier.tokens(MEASURE) == MEASURE.block_tokens(SUMMARY_HEADER, [item.line()])


def test_with_too_little_room_the_summarizer_is_not_asked():
    tier, echo = SummaryTier(), Echo()
    prefix = MEASURE.memory_tokens(SUMMARY_HEADER + "\n" + SummaryItem("", 0, 0).line()) - MESSAGE_OVERHEAD
    calls, log = summarize(tier, [0], echo, limit=prefix + MIN_SUMMARY_TOKENS - 1)
    assert (calls, tier.calls, echo.calls, tier.items) == (0, 0, [], [])
    assert log == ["no room for a summary of turns 0-0: straight to entities"]


def test_a_failing_summarizer_falls_back_to_the_extractive_summary(caplog):
    tier = SummaryTier()
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.strategies.acm"):
        calls, _ = summarize(tier, [0, 1], Broken())
    assert calls == 0 and tier.calls == 1 and tier.items and tier.items[0].text
    assert "summarizer failed on turns 0-1" in caplog.text


def test_an_empty_summary_is_not_kept_and_the_oldest_can_be_dropped():
    tier = SummaryTier()

    class Empty:
        def summarize(self, previous, text):
            return ["  "]

    _, log = summarize(tier, [0], Empty())
    assert tier.items == [] and log == ["turns 0-0 gave no summary within the tier limit"]
    summarize(tier, [1], Echo())
    summarize(tier, [2], Echo())
    tier.drop_oldest()
    assert [i.start for i in tier.items] == [2]
    assert SummaryTier().tokens(MEASURE) == 0


def test_summary_lines_name_the_turns_and_the_time():
    assert SummaryItem("Ana moved.", 3, 3).line() == "- (turn 3) Ana moved."
    assert SummaryItem("Ana moved.", 3, 5, "8 May, 2023").line() == "- (turns 3-5, 8 May, 2023) Ana moved."
