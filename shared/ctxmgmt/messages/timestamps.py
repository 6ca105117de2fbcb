"""A message's time, read from what users put in it, and "first seen" stamps.

Relative dates ("yesterday") are anchored from the time a message was said
(:mod:`ctxmgmt.messages.dates`). Users give that time in many shapes; the adapters read it from a
message's ``additional_kwargs["timestamp"]`` and pass :func:`timestamp_text` of it to the
core :class:`~ctxmgmt.messages.types.Message`. A message with no time of its own gets the time the
memory first saw it (:func:`stamp_missing`), kept in ``Message.seen``.

Accepted values (anything else reads as no time, with one logged warning per kind of value):

- an ISO 8601 string, with or without time and time zone, ``Z`` included
  (``"2023-05-08"``, ``"2023-05-08T13:56:00Z"``, ``"2023-05-08 13:56+02:00"``);
- a date written out, optionally with a time before it (``"1:56 pm on 8 May, 2023"``, the
  LoCoMo session format; ``"8 May 2023"``, ``"May 8, 2023"``, ``"13:56, 8 Sept 2023"``);
- a :class:`datetime.datetime` or :class:`datetime.date`;
- an int or float of seconds since 1970-01-01 UTC (a value above ``10**11``, which would be
  after the year 5138, is read as milliseconds, as JavaScript's ``Date.now()`` gives).

The date anchored is the one the value names: an ISO string or a ``datetime`` with a time
zone keeps its own local date; an epoch number is a UTC date.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import math
import numbers
import re
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence

from ctxmgmt.messages.dates import parse_date
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.types import Message, clean_text

logger = logging.getLogger(__name__)

MAX_TIMESTAMP_CHARS = 100
"""Longest string read as a timestamp (longer ones are not a time: no time is read)."""
MILLISECONDS_ABOVE = 10**11
"""An epoch number above this (seconds after the year 5138) is read as milliseconds."""

_TIME = re.compile(r"\b(\d{1,2})[:.](\d{2})(?::(\d{2}))?\s*(?:([ap])\.?\s?m\b\.?)?", re.IGNORECASE)
"""A time of day: ``1:56 pm``, ``13:56``, ``9.30am``, ``13:56:07``."""
_warned: set[str] = set()


def _warn_once(kind: str, value: object) -> None:
    """Log that a timestamp could not be read, once per ``kind`` of value in this process."""
    if kind not in _warned:
        _warned.add(kind)
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        logger.warning(
            "message timestamp %s (%s) is not a time ctxmgmt reads (ISO 8601, '1:56 pm on 8 May, "
            "2023', a datetime or epoch seconds): the message is taken as undated; further "
            "timestamps of this kind are not reported",
            shown,
            kind,
        )


def _from_iso(text: str) -> dt.datetime | None:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value


def _from_words(text: str) -> dt.datetime | None:
    """A written-out date (:func:`ctxmgmt.messages.dates.parse_date`) with the time of day it names."""
    day = parse_date(text)
    if day is None:
        return None
    when = dt.datetime(day.year, day.month, day.day)
    match = _TIME.search(text)
    if match is None:
        return when
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    if match[4]:
        if not 1 <= hour <= 12:
            return when
        hour = hour % 12 + (12 if match[4].lower() == "p" else 0)
    try:
        return when.replace(hour=hour, minute=minute, second=second)
    except ValueError:  # "25:61": keep the day
        return when


def _from_epoch(value: float) -> dt.datetime | None:
    if not math.isfinite(value):
        return None
    if abs(value) > MILLISECONDS_ABOVE:
        value /= 1000
    try:
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_timestamp(value: object) -> dt.datetime | None:
    """The time ``value`` names, or None (never raises) when it names none.

    Reads the values listed in the module documentation. A date without a time of day
    gives midnight; a value with a time zone gives an aware datetime, one without a naive
    one; epoch numbers give UTC. Anything else (an unreadable string, a time of day without
    a date, a bool, another type) gives None and one logged warning per kind of value.

    Example:
        >>> parse_timestamp("1:56 pm on 8 May, 2023")
        datetime.datetime(2023, 5, 8, 13, 56)
        >>> parse_timestamp("2023-05-08T13:56:00Z").tzinfo
        datetime.timezone.utc
    """
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, bool):
        _warn_once("bool", value)
        return None
    if isinstance(value, numbers.Real):
        parsed = _from_epoch(float(value))
        if parsed is None:
            _warn_once(f"{type(value).__name__} out of range", value)
        return parsed
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        parsed = None
        if len(text) <= MAX_TIMESTAMP_CHARS:
            parsed = _from_iso(text) or _from_words(text)
        if parsed is None:
            _warn_once("unreadable str", value)
        return parsed
    _warn_once(type(value).__name__, value)
    return None


def timestamp_text(value: object) -> str | None:
    """What :attr:`Message.timestamp <ctxmgmt.messages.types.Message.timestamp>` holds for ``value``.

    A string :func:`parse_timestamp` reads is kept as written (stripped), so turn text shows
    the user's own form ("[1:56 pm on 8 May, 2023] user: ..."), unless the anchoring
    (:func:`ctxmgmt.messages.dates.parse_date`) would not read the same day from it (ISO basic and
    week forms such as "20230508"): then, like a ``datetime``, ``date`` or epoch number, it
    becomes ISO 8601 (seconds precision; epoch numbers in UTC). Anything
    unreadable gives None (the message is undated, and :func:`stamp_missing` can stamp it).

    Example:
        >>> timestamp_text(dt.datetime(2023, 5, 8, 13, 56, 7, 120))
        '2023-05-08T13:56:07'
        >>> timestamp_text(1683554160)
        '2023-05-08T13:56:00+00:00'
    """
    parsed = parse_timestamp(value)
    if parsed is None:
        return None
    if isinstance(value, str) and parse_date(value) == parsed.date():
        return value.strip()  # as written, when the anchoring reads the same day from it
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return parsed.isoformat(timespec="seconds")


def _content_key(message: Message) -> tuple[str, str, str | None]:
    """What identifies a message's content apart from when it was seen."""
    return message.role, message.render(seen=False), message.tool_call_id


def stamp_missing(
    messages: Sequence[Message],
    now: dt.datetime | dt.date,
    *,
    known: Iterable[Message] = (),
    in_place: bool = False,
) -> list[Message]:
    """``messages`` with every message that has no time of its own stamped as first seen.

    The rule for "first seen" stamps: a message without a ``timestamp`` (none given, or none
    readable) is seen by the memory at some moment; that moment is its ``seen`` stamp, which
    anchors its relative dates like a timestamp would. The stamp is not the message's
    content: it is left out of the turn fingerprint and of message equality
    (:class:`~ctxmgmt.messages.types.Message`), so re-reading the raw history (which does not keep
    it) after a restart finds the same turns and rebuilds nothing. It is kept where derived
    state is kept (a strategy's turns hold their messages, ``seen`` included) and handed
    back here as ``known``: a message whose content equals a known stamped one (the first
    unused one, in order, so repeated "ok"s keep their own stamps) gets that stamp again;
    others get ``now``. A stamp lost with the derived state is replaced by the time of the
    restart, and the turns still match.

    Messages that already have a ``timestamp`` or a ``seen`` stamp are returned as they are
    (the same objects); the caller's list is not modified. The others are stamped copies, or,
    with ``in_place=True`` (messages nobody else holds yet, such as a fresh conversion), the
    same objects stamped.

    Args:
        messages: The conversation's messages in order.
        now: The time to stamp new messages with (e.g. ``datetime.now(timezone.utc)``);
            written in ISO 8601 to seconds.
        known: Messages stamped before (e.g. the messages of a restored strategy's turns).
        in_place: Stamp ``messages`` themselves instead of copies (only for messages that
            nothing else holds yet); default False.

    Raises:
        ConfigurationError: ``now`` is not a ``datetime`` or ``date``.

    Example:
        >>> now = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)
        >>> stamp_missing([Message("user", "I moved yesterday")], now)[0].seen
        '2023-05-08T13:56:00+00:00'
    """
    if not isinstance(now, dt.date):
        raise ConfigurationError(f"now must be a datetime or date, got {now!r}")
    stamp = now.isoformat(timespec="seconds") if isinstance(now, dt.datetime) else now.isoformat()
    earlier: dict[tuple[str, str, str | None], deque[str]] = defaultdict(deque)
    for message in known:
        if message.seen and not message.timestamp:
            earlier[_content_key(message)].append(message.seen)
    stamped: list[Message] = []
    for message in messages:
        if message.timestamp or message.seen:
            stamped.append(message)
            continue
        same = earlier.get(_content_key(message)) if earlier else None
        target = message if in_place else copy.copy(message)
        object.__setattr__(target, "seen", clean_text(same.popleft() if same else stamp))  # frozen
        stamped.append(target)
    return stamped
