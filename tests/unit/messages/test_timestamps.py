"""A message's time read from what users give, and "first seen" stamps (ctxmgmt.messages.timestamps)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from ctxmgmt.components.summarizer import ExtractiveSummarizer
from ctxmgmt.messages import timestamps
from ctxmgmt.messages.dates import parse_date
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.timestamps import parse_timestamp, stamp_missing, timestamp_text
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.strategies.swin import SWinStrategy

UTC = dt.UTC
NOW = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(timestamps, "_warned", set())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-08", dt.datetime(2023, 5, 8)),
        ("2023-05-08T13:56:00", dt.datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:00Z", dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (
            "2023-05-08 13:56+02:00",
            dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        ),
        ("1:56 pm on 8 May, 2023", dt.datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", dt.datetime(2023, 9, 13, 0, 9)),
        ("10:43 am on 4 February, 2023", dt.datetime(2023, 2, 4, 10, 43)),
        ("13:56, 8 Sept 2023", dt.datetime(2023, 9, 8, 13, 56)),
        ("8 May 2023", dt.datetime(2023, 5, 8)),
        ("May 8, 2023", dt.datetime(2023, 5, 8)),
        ("  8 May 2023  ", dt.datetime(2023, 5, 8)),
        (dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC), dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (dt.date(2023, 5, 8), dt.datetime(2023, 5, 8)),
        (1683554160, dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1683554160.5, dt.datetime(2023, 5, 8, 13, 56, 0, 500000, tzinfo=UTC)),
        (1683554160000, dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),  # milliseconds
    ],
)
def test_parse_timestamp_reads_what_users_give(value, expected):
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    "value",
    ["sometime", "13:56", "31 February 2023", "x" * 500, True, float("nan"), 1e300, [2023, 5, 8], {"t": 1}],
)
def test_unreadable_values_are_no_time(value, caplog):
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.messages.timestamps"):
        assert parse_timestamp(value) is None
        assert timestamp_text(value) is None
    assert len(caplog.records) == 1  # once per kind, not once per call
    assert "not a time ctxmgmt reads" in caplog.records[0].getMessage()


def test_no_value_is_no_time_and_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.messages.timestamps"):
        assert parse_timestamp(None) is None
        assert parse_timestamp("  ") is None
    assert not caplog.records


def test_warning_once_per_kind(caplog):
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.messages.timestamps"):
        for value in ("soon", "later", "never", b"2023", b"2024", object()):
            parse_timestamp(value)
    assert len(caplog.records) == 3  # unreadable str, bytes, object


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1:56 pm on 8 May, 2023", "1:56 pm on 8 May, 2023"),  # the user's own form is kept
        (" 2023-05-08T13:56:00Z ", "2023-05-08T13:56:00Z"),
        ("20230508", "2023-05-08T00:00:00"),  # ISO basic form: written as the anchoring reads it
        ("2023-W19-1", "2023-05-08T00:00:00"),  # ISO week date (Monday of week 19)
        (dt.datetime(2023, 5, 8, 13, 56, 7, 999), "2023-05-08T13:56:07"),
        (
            dt.datetime(2023, 5, 8, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
            "2023-05-08T23:30:00-05:00",
        ),
        (dt.date(2023, 5, 8), "2023-05-08"),
        (1683554160, "2023-05-08T13:56:00+00:00"),
    ],
)
def test_timestamp_text_is_a_time_the_anchoring_reads(value, text):
    assert timestamp_text(value) == text
    assert parse_date(text) == dt.date(2023, 5, 8)  # the speaker's own date, time zone kept


def test_stamp_missing_stamps_only_undated_messages():
    dated = Message("user", "hello", timestamp="2023-05-01")
    undated = Message("assistant", "hi")
    messages = [dated, undated]
    stamped = stamp_missing(messages, NOW)
    assert stamped[0] is dated
    assert stamped[1].seen == "2023-05-08T13:56:00+00:00" and stamped[1].timestamp is None
    assert messages[1].seen is None  # the caller's messages are not modified
    assert stamped[1] == undated  # the stamp is not content
    assert stamp_missing(stamped, NOW + dt.timedelta(days=3))[1] is stamped[1]  # first seen stays
    assert stamp_missing([undated], dt.date(2023, 5, 8))[0].seen == "2023-05-08"


def test_stamp_missing_reuses_known_stamps_by_content_in_order():
    first = stamp_missing([Message("user", "ok"), Message("user", "ok"), Message("user", "new")], NOW)
    first = [first[0], Message("user", "ok", seen="2023-05-09T00:00:00+00:00"), first[2]]
    restarted = [
        Message("user", "ok"),
        Message("user", "ok"),
        Message("user", "moved"),
        Message("user", "new"),
    ]
    later = NOW + dt.timedelta(days=30)
    stamped = stamp_missing(restarted, later, known=first)
    assert [m.seen for m in stamped] == [
        "2023-05-08T13:56:00+00:00",
        "2023-05-09T00:00:00+00:00",
        later.isoformat(),  # not seen before
        "2023-05-08T13:56:00+00:00",
    ]


def test_stamp_missing_refuses_a_now_that_is_no_time():
    with pytest.raises(ConfigurationError, match="now must be a datetime"):
        stamp_missing([Message("user", "hi")], "2023-05-08")  # type: ignore[arg-type]


def test_first_seen_stamp_is_shown_to_summarisers_but_not_scored_or_fingerprinted():
    plain = Turn(0, (Message("user", "I moved yesterday"), Message("assistant", "Nice")))
    stamped = Turn(0, tuple(stamp_missing(plain.messages, NOW)))
    later = Turn(0, tuple(stamp_missing(plain.messages, NOW + dt.timedelta(days=9))))
    assert stamped.dated_text.startswith("[seen 2023-05-08T13:56:00+00:00] user: I moved yesterday")
    assert stamped.text == plain.text == plain.dated_text  # scoring reads no first-seen stamp
    assert stamped.fingerprint == plain.fingerprint == later.fingerprint
    own = Turn(0, (Message("user", "I moved yesterday", timestamp="2023-05-08"), plain.messages[1]))
    assert own.fingerprint != plain.fingerprint  # a timestamp of its own is content


def test_seen_survives_the_message_dict_and_older_dicts_still_read():
    message = stamp_missing([Message("user", "hi")], NOW)[0]
    assert Message.from_dict(message.to_dict()).seen == message.seen
    assert "seen" not in Message("user", "hi").to_dict()
    assert Message.from_dict({"role": "user", "text": "hi"}).seen is None


def test_swin_anchors_relative_dates_from_first_seen_stamps():
    summarizer = ExtractiveSummarizer()
    messages = []
    for i in range(8):
        messages += [
            Message("user", f"I adopted a puppy named Rex number {i} yesterday at the shelter."),
            Message("assistant", "That is lovely news, congratulations on the new puppy!"),
        ]
    swin = SWinStrategy(summarizer=summarizer, token_counter=lambda t: len(t.split()), window=4, overlap=0)
    swin.add_many(group_turns(stamp_missing(messages, NOW)))
    memory = "\n".join(item.text for item in swin.items)
    assert "yesterday (7 May 2023)" in memory
    undated = SWinStrategy(summarizer=summarizer, token_counter=lambda t: len(t.split()), window=4, overlap=0)
    undated.add_many(group_turns(messages))
    assert "(7 May 2023)" not in "\n".join(item.text for item in undated.items)
