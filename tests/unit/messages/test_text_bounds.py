"""The bound on what a component reads of one text (``ctxmgmt.messages.text_bounds``)."""

from __future__ import annotations

import re

import pytest

from ctxmgmt.components import llm_call
from ctxmgmt.messages.text_bounds import MAX_INPUT_CHARS, TRUNCATION_MARKER, bound_input, cap_text


@pytest.mark.parametrize("limit", [200, 1_000, 24_000])
def test_cap_text_keeps_head_and_tail_within_the_limit(limit):
    text = "HEAD " + "x" * 1_000_000 + " TAIL"
    capped = cap_text(text, limit)
    assert len(capped) <= limit
    assert capped.startswith("HEAD ") and capped.endswith(" TAIL")
    head, marker, tail = re.split(r"(\n\[\.\.\. \d+ characters left out \.\.\.\]\n)", capped)
    assert len(head) + int(re.findall(r"\d+", marker)[0]) + len(tail) == len(text)
    assert len(head) >= len(tail)  # the head (where a message states its point) gets more room


def test_cap_text_leaves_short_text_and_none_alone():
    assert cap_text("short", 200) == "short"
    assert cap_text("y" * 10_000, None) == "y" * 10_000


def test_cap_text_at_exactly_the_limit_is_unchanged_and_one_more_is_cut():
    text = "z" * 300
    assert cap_text(text, 300) is text
    cut = cap_text(text + "!", 300)
    assert len(cut) <= 300 and "characters left out" in cut


def test_a_limit_smaller_than_the_marker_leaves_only_the_marker():
    capped = cap_text("q" * 1_000, 5)
    assert capped == TRUNCATION_MARKER.format(removed=1_000)


def test_bound_input_cuts_to_max_input_chars_and_leaves_short_text_alone():
    assert bound_input("a short message") == "a short message"
    long = "w" * (MAX_INPUT_CHARS * 3)
    bounded = bound_input(long)
    assert len(bounded) <= MAX_INPUT_CHARS
    assert bounded == cap_text(long, MAX_INPUT_CHARS)


def test_the_llm_components_use_the_same_function():
    assert llm_call.cap_text is cap_text
