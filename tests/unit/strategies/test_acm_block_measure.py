"""BlockMeasure: exact block counts, greedy line filling within a cap, word-prefix fitting."""

from __future__ import annotations

from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.strategies.acm_block_measure import BlockMeasure
from tests.helpers import words

MEASURE = BlockMeasure(memory_tokens=lambda text: words(text) + MESSAGE_OVERHEAD, count=words)
"""Word tokens, and a message's overhead per block: the measure the ACM tier tests share."""


def test_a_block_is_its_header_and_lines_as_one_message_and_nothing_without_lines():
    assert MEASURE.block_tokens("Header line:", []) == 0
    assert MEASURE.block_tokens("Header line:", ["- one two", "- three"]) == 2 + 3 + 2 + MESSAGE_OVERHEAD


def test_fill_lines_adds_in_order_while_the_block_fits_and_skips_what_does_not():
    candidates = ["- a b", "- c d e f g h", "- i"]
    # the estimate: header 1 + message overhead, then each line's tokens + 1 for its newline
    cap = 1 + MESSAGE_OVERHEAD + 4 + 3  # room for the first and the last only
    filled = MEASURE.fill_lines("H:", [], candidates, cap)
    assert filled == ["- a b", "- i"]
    assert MEASURE.block_tokens("H:", filled) <= cap


def test_fill_lines_keeps_the_chosen_lines_and_does_not_change_them():
    chosen = ["- kept line"]
    filled = MEASURE.fill_lines("H:", chosen, ["- more"], cap=100)
    assert filled == ["- kept line", "- more"] and chosen == ["- kept line"]
    assert MEASURE.fill_lines("H:", chosen, ["- more"], cap=0) == chosen  # never drops what was chosen


def test_fill_lines_removes_the_last_lines_when_the_exact_count_is_over_the_estimate():
    # a block costs three tokens more than its lines' estimate (as if tokens merged across lines)
    surprising = BlockMeasure(memory_tokens=lambda text: words(text) + MESSAGE_OVERHEAD + 3, count=words)
    cap = 1 + MESSAGE_OVERHEAD + 3 * 2  # the estimate fits "- a" and "- b"
    filled = surprising.fill_lines("H:", [], ["- a", "- b", "- c"], cap)
    assert filled == ["- a"] and surprising.block_tokens("H:", filled) <= cap


def test_fit_keeps_a_text_within_its_limit_and_marks_a_cut():
    text = "one two three four five six"
    assert MEASURE.fit(text, 6) == text
    assert MEASURE.fit(text, 4) == "one two three ..."
    assert words(MEASURE.fit(text, 4)) <= 4
    assert MEASURE.fit(text, 1) == ""  # not even one word and the mark
    assert MEASURE.fit(text, 0) == "" and MEASURE.fit("", 10) == ""
