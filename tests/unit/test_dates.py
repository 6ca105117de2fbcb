"""Relative dates anchored to the day they were said (ctxmgmt.dates)."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxmgmt.dates import anchor_dates, format_date, parse_date

SAID = "1:56 pm on 8 May, 2023"  # a Monday


@pytest.mark.parametrize(
    ("stamp", "day"),
    [
        (SAID, dt.date(2023, 5, 8)),
        ("2023-05-08T13:56:00", dt.date(2023, 5, 8)),
        ("May 8, 2023 at noon", dt.date(2023, 5, 8)),
        ("8 Sept 2023", dt.date(2023, 9, 8)),
        ("31 February 2023", None),
        ("next Tuesday", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_date(stamp, day):
    assert parse_date(stamp) == day


@pytest.mark.parametrize(
    ("text", "anchored"),
    [
        ("I went there yesterday.", "I went there yesterday (7 May 2023)."),
        ("Last night was fun", "Last night (7 May 2023) was fun"),
        ("We meet tomorrow", "We meet tomorrow (9 May 2023)"),
        ("two days ago it rained", "two days ago (6 May 2023) it rained"),
        ("3 weeks ago", "3 weeks ago (the week of 17 April 2023)"),
        ("my talk last week", "my talk last week (the week before 8 May 2023)"),
        ("this weekend", "this weekend (the weekend of 8 May 2023)"),
        ("camping next month", "camping next month (June 2023)"),
        ("a trip last month", "a trip last month (April 2023)"),
        ("the fest last year", "the fest last year (2022)"),
        ("ten years ago", "ten years ago (2013)"),
        ("Last Fri I baked", "Last Fri (the Friday before 8 May 2023) I baked"),
        ("next Tuesday", "next Tuesday (the Tuesday after 8 May 2023)"),
        ("this Friday", "this Friday"),  # before or after is unclear: left alone
        ("on 3 May 2023", "on 3 May 2023"),
    ],
)
def test_anchor_dates(text, anchored):
    assert anchor_dates(text, SAID) == anchored


def test_anchoring_needs_a_readable_day_and_happens_once():
    assert anchor_dates("I went there yesterday.", "sometime") == "I went there yesterday."
    assert anchor_dates("I went there yesterday.", None) == "I went there yesterday."
    once = anchor_dates("yesterday", dt.date(2024, 1, 1))
    assert once == "yesterday (31 December 2023)" and anchor_dates(once, SAID) == once
    assert anchor_dates("last month", dt.date(2024, 1, 15)) == "last month (December 2023)"
    assert format_date(dt.date(2023, 5, 8)) == "8 May 2023"
