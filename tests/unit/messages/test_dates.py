"""Relative dates anchored to the day they were said (ctxmgmt.messages.dates)."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxmgmt.messages.dates import anchor_dates, format_date, parse_date

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


@pytest.mark.parametrize(
    ("text", "anchored"),
    [
        # the longest phrase wins: "the day before yesterday" is one expression
        ("the day before yesterday we met", "the day before yesterday (6 May 2023) we met"),
        ("Day before yesterday", "Day before yesterday (6 May 2023)"),
        ("the day after tomorrow", "the day after tomorrow (10 May 2023)"),
        ("this morning", "this morning (8 May 2023)"),
        ("tonight", "tonight (8 May 2023)"),
        # "N units ago" / "from now", counts in digits or words
        ("a day ago", "a day ago (7 May 2023)"),
        ("a couple of days ago", "a couple of days ago (6 May 2023)"),
        ("twenty-one years ago", "twenty-one years ago (2002)"),
        ("twenty one days ago", "twenty one days ago (17 April 2023)"),
        ("15 years ago", "15 years ago (2008)"),
        ("a month ago", "a month ago (April 2023)"),
        ("a fortnight ago", "a fortnight ago (the week of 24 April 2023)"),
        ("two weekends ago", "two weekends ago (the weekend before 1 May 2023)"),
        ("three days from now", "three days from now (11 May 2023)"),
        ("a fortnight from now", "a fortnight from now (the week of 22 May 2023)"),
        # "in N units": only when the sentence speaks of the future
        ("I will be back in three days.", "I will be back in three days (11 May 2023)."),
        ("I'll know in 2 weeks", "I'll know in 2 weeks (the week of 22 May 2023)"),
        ("The wedding is in a fortnight", "The wedding is in a fortnight (the week of 22 May 2023)"),
        ("I'm moving in two months", "I'm moving in two months (July 2023)"),
        ("We're going to Peru in a year", "We're going to Peru in a year (2024)"),
        ("We haven't talked in a few days!", "We haven't talked in a few days!"),
        ("Rome wasn't built in a day", "Rome wasn't built in a day"),
        ("We drove it in three days", "We drove it in three days"),
        ("I will go twice in a week", "I will go twice in a week"),
        # week / weekend before last, after next
        ("the week before last", "the week before last (the week before 1 May 2023)"),
        ("the weekend before last", "the weekend before last (the weekend before 1 May 2023)"),
        ("the week after next", "the week after next (the week after 15 May 2023)"),
        ("the weekend after next", "the weekend after next (the weekend after 15 May 2023)"),
        # last / this past / coming ...
        ("this past weekend", "this past weekend (the weekend before 8 May 2023)"),
        ("the past week", "the past week (the week before 8 May 2023)"),
        ("this coming Friday", "this coming Friday (the Friday after 8 May 2023)"),
        ("next week", "next week (the week after 8 May 2023)"),
        ("this month", "this month (May 2023)"),
        ("next year", "next year (2024)"),
        ("last Sunday", "last Sunday (the Sunday before 8 May 2023)"),
        # "on <weekday>" by the sentence's tense; unclear tense is left alone
        ("I won a tournament on Friday!", "I won a tournament on Friday (the Friday before 8 May 2023)!"),
        ("On Saturday we visited Mum.", "On Saturday (the Saturday before 8 May 2023) we visited Mum."),
        ("I'll call you on Monday", "I'll call you on Monday (the Monday after 8 May 2023)"),
        ("The party is on Saturday", "The party is on Saturday (the Saturday after 8 May 2023)"),
        ("I'm so excited about the show on Friday", "I'm so excited about the show on Friday"),
        ("I went there and will go again on Friday", "I went there and will go again on Friday"),
        ("We meet on Fridays", "We meet on Fridays"),
        # no such date: left alone
        ("9999 years ago", "9999 years ago"),
        ("in 9000 years we will see", "in 9000 years we will see"),
    ],
)
def test_anchor_more_expressions(text, anchored):
    assert anchor_dates(text, SAID) == anchored
    assert anchor_dates(anchored, SAID) == anchored  # anchoring twice changes nothing


def test_tense_is_read_in_the_expressions_own_sentence():
    text = "I went hiking yesterday. I'll see you on Monday. We won on Friday."
    assert anchor_dates(text, SAID) == (
        "I went hiking yesterday (7 May 2023). I'll see you on Monday (the Monday after 8 May 2023). "
        "We won on Friday (the Friday before 8 May 2023)."
    )


def test_many_expressions_in_one_long_text():
    text = "On Friday we won. " * 2000 + "I will be back in three days."
    anchored = anchor_dates(text, SAID)
    assert anchored.count("(the Friday before 8 May 2023)") == 2000
    assert anchored.endswith("in three days (11 May 2023).")


def test_anchoring_needs_a_readable_day_and_happens_once():
    assert anchor_dates("I went there yesterday.", "sometime") == "I went there yesterday."
    assert anchor_dates("I went there yesterday.", None) == "I went there yesterday."
    once = anchor_dates("yesterday", dt.date(2024, 1, 1))
    assert once == "yesterday (31 December 2023)" and anchor_dates(once, SAID) == once
    assert anchor_dates("last month", dt.date(2024, 1, 15)) == "last month (December 2023)"
    assert format_date(dt.date(2023, 5, 8)) == "8 May 2023"
