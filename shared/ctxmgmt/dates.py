"""Relative dates ("yesterday", "last Friday") anchored to the day they were said.

A summary or an entity list shown long after a message was written loses the timestamp
that gave "yesterday" its meaning. :func:`anchor_dates` writes the absolute date after
each relative expression, from the message's timestamp (:func:`parse_date`), so
"I went there yesterday" said on 8 May 2023 becomes "I went there yesterday (7 May 2023)".
Only the expressions listed in :data:`RELATIVE` are anchored; nothing is guessed when the
timestamp cannot be read.
"""

from __future__ import annotations

import datetime as dt
import re

MONTHS = "january february march april may june july august september october november december".split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTH = {m[:3]: i + 1 for i, m in enumerate(MONTHS)}
_WEEKDAY = {d[:3]: i for i, d in enumerate(WEEKDAYS)}
_COUNT = {w: i + 1 for i, w in enumerate("one two three four five six seven eight nine ten".split())}
_COUNT.update({"a": 1, "an": 1, "a couple of": 2, "couple of": 2, "few": 3, "a few": 3})

_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})")
_WEEKDAY_WORD = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\.?"
_NUMBER_WORD = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few|an?)"
RELATIVE = re.compile(
    r"\b(?:"
    r"(?P<day>yesterday|today|tonight|tomorrow|last night|this morning|this afternoon|this evening)"
    r"|(?P<ago>" + _NUMBER_WORD + r")\s+(?P<unit>days?|weeks?|months?|years?)\s+ago"
    r"|(?P<rel>last|this|next|past)\s+(?P<what>week(?:end)?|month|year|" + _WEEKDAY_WORD + r")"
    r")\b(?!\s*\()",
    re.IGNORECASE,
)
"""The relative expressions :func:`anchor_dates` anchors: yesterday/today/tomorrow, last
night, "N days/weeks/months/years ago", and last/this/next week, weekend, month, year or
weekday. One already followed by "(" is left alone (anchoring twice changes nothing)."""


def parse_date(stamp: str | None) -> dt.date | None:
    """The calendar date of a timestamp, or None when none can be read.

    Reads ISO dates ("2023-05-08T13:56"), day-month-year ("1:56 pm on 8 May, 2023") and
    month-day-year ("May 8, 2023"); month names may be abbreviated.

    Example:
        >>> parse_date("1:56 pm on 8 May, 2023")
        datetime.date(2023, 5, 8)
    """
    if not stamp:
        return None
    try:
        match = _ISO.search(stamp)
        if match:
            return dt.date(int(match[1]), int(match[2]), int(match[3]))
        match = _DAY_MONTH_YEAR.search(stamp)
        if match and match[2][:3].lower() in _MONTH:
            return dt.date(int(match[3]), _MONTH[match[2][:3].lower()], int(match[1]))
        match = _MONTH_DAY_YEAR.search(stamp)
        if match and match[1][:3].lower() in _MONTH:
            return dt.date(int(match[3]), _MONTH[match[1][:3].lower()], int(match[2]))
    except ValueError:  # 31 February
        return None
    return None


def format_date(day: dt.date) -> str:
    """``8 May 2023`` (day, month name, year)."""
    return f"{day.day} {MONTHS[day.month - 1].capitalize()} {day.year}"


def _month(day: dt.date, shift: int) -> str:
    index = day.year * 12 + day.month - 1 + shift
    return f"{MONTHS[index % 12].capitalize()} {index // 12}"


def _resolve(match: re.Match[str], day: dt.date) -> str | None:
    """The absolute date of one :data:`RELATIVE` match said on ``day``."""
    said = format_date(day)
    if match["day"]:
        word = match["day"].lower()
        shift = -1 if word in ("yesterday", "last night") else 1 if word == "tomorrow" else 0
        return format_date(day + dt.timedelta(days=shift))
    if match["ago"]:
        count = _COUNT.get(match["ago"].lower(), None) if not match["ago"].isdigit() else int(match["ago"])
        unit = match["unit"].lower().rstrip("s")
        if count is None:
            return None
        if unit == "day":
            return format_date(day - dt.timedelta(days=count))
        if unit == "week":
            return f"the week of {format_date(day - dt.timedelta(weeks=count))}"
        if unit == "month":
            return _month(day, -count)
        return str(day.year - count)
    rel, what = match["rel"].lower(), match["what"].lower().rstrip(".")
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[rel]
    if what == "month":
        return _month(day, step)
    if what == "year":
        return str(day.year + step)
    if what in ("week", "weekend"):
        where = {-1: "before", 0: "of", 1: "after"}[step]
        return f"the {what} {where} {said}"
    weekday = _WEEKDAY.get(what[:3])
    if weekday is None:
        return None
    name = WEEKDAYS[weekday].capitalize()
    if step < 0:
        return f"the {name} before {said}"
    if step > 0:
        return f"the {name} after {said}"
    return None  # "this Friday": before or after is unclear


def anchor_dates(text: str, when: str | dt.date | None) -> str:
    """``text`` with the absolute date written after each relative date expression.

    ``when`` is the day ``text`` was said (a date or a timestamp :func:`parse_date` reads);
    when it is unknown the text is returned unchanged.

    Example:
        >>> anchor_dates("I ran a race last Saturday and painted yesterday.", "8 May, 2023")
        'I ran a race last Saturday (the Saturday before 8 May 2023) and painted yesterday (7 May 2023).'
    """
    day = when if isinstance(when, dt.date) else parse_date(when)
    if day is None or not text:
        return text

    def replace(match: re.Match[str]) -> str:
        resolved = _resolve(match, day)
        return f"{match[0]} ({resolved})" if resolved else match[0]

    return RELATIVE.sub(replace, text)
