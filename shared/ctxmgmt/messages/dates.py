"""Relative dates ("yesterday", "last Friday") anchored to the day they were said.

A summary or an entity list shown long after a message was written loses the timestamp
that gave "yesterday" its meaning. :func:`anchor_dates` writes the absolute date after
each relative expression, from the message's timestamp (:func:`parse_date`), so
"I went there yesterday" said on 8 May 2023 becomes "I went there yesterday (7 May 2023)".
Only the expressions listed in :data:`RELATIVE` are anchored; nothing is guessed when the
timestamp cannot be read.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import re
from collections.abc import Callable

MONTHS = "january february march april may june july august september october november december".split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTH = {m[:3]: i + 1 for i, m in enumerate(MONTHS)}
_WEEKDAY = {d[:3]: i for i, d in enumerate(WEEKDAYS)}
_UNITS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_COUNT = {w: i + 1 for i, w in enumerate(_UNITS)}
for _t, _tens in enumerate(_TENS):
    _COUNT[_tens] = 20 + 10 * _t
    for _u, _unit in enumerate(_UNITS[:9]):
        _COUNT[f"{_tens} {_unit}"] = _COUNT[f"{_tens}-{_unit}"] = 20 + 10 * _t + _u + 1
_COUNT.update({"a": 1, "an": 1, "a couple of": 2, "couple of": 2, "few": 3, "a few": 3})

_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})[-/](\d{2})[-/](\d{2})")
_WEEKDAY_WORD = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\.?"
_WEEKDAY_FULL = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_NUMBER_WORD = (
    r"(?:\d{1,4}|(?:"
    + "|".join(_TENS)
    + r")(?:[- ](?:"
    + "|".join(_UNITS[:9])
    + r"))?|"
    + "|".join(sorted(_UNITS, key=len, reverse=True))
    + r"|a\s+couple\s+of|couple\s+of|a\s+few|few|an?)"
)
_UNIT = r"(?:days?|weekends?|weeks?|fortnights?|months?|years?)"
RELATIVE = re.compile(
    r"\b(?:"
    r"(?P<day>(?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|yesterday|today"
    r"|tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))"
    r"|(?P<count>" + _NUMBER_WORD + r")\s+(?P<unit>" + _UNIT + r")\s+(?P<dir>ago|from\s+now)"
    r"|(?<!once\s)(?<!twice\s)(?<!times\s)in\s+(?P<in_count>"
    + _NUMBER_WORD
    + r")\s+(?P<in_unit>"
    + _UNIT
    + r")"
    r"|the\s+(?P<span>weekend|week)\s+(?P<beyond>before\s+last|after\s+next)"
    r"|(?P<rel>last|this\s+past|past|this\s+coming|coming|this|next)\s+"
    r"(?P<what>weekend|week|month|year|" + _WEEKDAY_WORD + r")"
    r"|on\s+(?P<on>" + _WEEKDAY_FULL + r")"
    r")\b(?!\s*\()",
    re.IGNORECASE,
)
"""The relative expressions :func:`anchor_dates` anchors, each by its longest form ("the day
before yesterday" is one expression, never "yesterday" alone):

- yesterday, today, tonight, tomorrow, last night, this morning/afternoon/evening, the day
  before yesterday, the day after tomorrow;
- "N days/weeks/weekends/fortnights/months/years ago" and "... from now" (N in digits or
  words up to ninety-nine, "a", "a couple of", "a few" = 3);
- "in N days/weeks/..." when the sentence speaks of the future ("I'll be back in three days",
  "the wedding is in two weeks"); otherwise "in" gives a duration ("we haven't talked in a
  few days", "built in a day") and the phrase is left alone;
- last/this/next/past/coming week, weekend, month, year or weekday; "the week (or weekend)
  before last" and "after next";
- "on Friday" when the sentence's tense tells past ("the Friday before") from future ("the
  Friday after"); "this Friday" and an "on Friday" of unclear tense are left alone.

One already followed by "(" is left alone (anchoring twice changes nothing). The pattern has
no nested quantifiers: matching takes time linear in the text."""

_FUTURE = re.compile(
    r"\b(?:will|shall|gonna|going\s+to|plan(?:s|ning)?\s+to|hop(?:e|ing)\s+to|about\s+to|can't\s+wait"
    r"|looking\s+forward|see\s+you)\b|'ll\b|(?:\b(?:am|is|are)|'m|'re|'s)\s+(?P<verb>[a-z]+ing)\b",
    re.IGNORECASE,
)
"""Words that put a sentence in the future: will, 'll, going to, gonna, "I'm leaving"."""
_NOT_FUTURE = frozenset(
    """thing something nothing anything everything amazing interesting exciting morning evening
    boring annoying surprising relaxing inspiring during""".split()
)
"""Words ending in "-ing" that do not make "is ...ing" a present progressive ("it's amazing")."""
_PAST = re.compile(
    r"\b(?:was|were|did|had|went|got|saw|won|lost|made|took|came|met|ran|ate|found|gave|bought|felt"
    r"|left|told|thought|said|heard|wrote|drove|flew|sang|began|brought|caught|taught|spent|sent|built"
    r"|kept|slept|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
"""Past-tense verbs: the common irregular ones and any word ending in "-ed" (bar :data:`_NOT_PAST`)."""
_NOT_PAST = frozenset(
    """excited interested tired scared bored worried pleased thrilled stressed amazed surprised
    blessed married engaged indeed speed proceed exceed succeed breed bleed embed hundred sacred
    kindred wicked naked rugged beloved scheduled supposed""".split()
)
"""Words ending in "-ed" that do not put a sentence in the past ("I'm excited", "scheduled")."""
_SCHEDULED = re.compile(r"\b(?:is|are|'s|'re)\s+$", re.IGNORECASE)
"""A phrase right after "is"/"are" ("the party is on Friday") speaks of a scheduled event."""
_SENTENCE_END = re.compile(r"[.!?\n]")
_REACH = 200
"""Characters looked at on each side of an expression to find its sentence."""


def parse_date(stamp: str | None) -> dt.date | None:
    """The calendar date of a timestamp, or None when none can be read.

    Reads ISO dates ("2023-05-08T13:56", also with slashes: "2023/05/08 (Mon) 13:56", as
    LongMemEval dates its sessions), day-month-year ("1:56 pm on 8 May, 2023") and
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
    return f"{MONTHS[index % 12].capitalize()} {_year(index // 12)}"


def _year(year: int) -> str:
    if not 1 <= year <= 9999:
        raise ValueError(f"year {year} out of range")
    return str(year)


def _count(words: str) -> int | None:
    """The number a count phrase says ("3", "three", "twenty-one", "a couple of")."""
    if words.isdigit():
        return int(words)
    return _COUNT.get(" ".join(words.lower().split()))


class _Tenses:
    """Where a text's past and future verbs and sentence ends are, found once per text.

    :meth:`of` reads the sentence around an expression (at most :data:`_REACH` characters on
    each side) by binary search in these positions, so a text with many expressions is still
    read in time linear in its length.
    """

    def __init__(self, text: str) -> None:
        self.ends = [m.start() for m in _SENTENCE_END.finditer(text)]
        self.future = [
            m.start() for m in _FUTURE.finditer(text) if not m["verb"] or m["verb"].lower() not in _NOT_FUTURE
        ]
        self.past = [m.start() for m in _PAST.finditer(text) if m[0].lower() not in _NOT_PAST]

    def of(self, match: re.Match[str]) -> int:
        """-1 when the sentence around ``match`` speaks of the past, 1 of the future, 0 unclear.

        A sentence with both past and future verbs is unclear; a phrase right after "is" or
        "are" ("the party is on Friday") is in the future.
        """
        start, end = match.start(), match.end()
        i = bisect.bisect_left(self.ends, start)
        low = max(self.ends[i - 1] + 1 if i else 0, start - _REACH)
        high = min(self.ends[i] if i < len(self.ends) else len(match.string), end + _REACH)
        future = _SCHEDULED.search(match.string, max(low, start - 12), start) is not None or _within(
            self.future, low, high
        )
        past = _within(self.past, low, high)
        return 0 if future == past else 1 if future else -1


def _within(positions: list[int], low: int, high: int) -> bool:
    """Whether a position in the sorted ``positions`` lies in ``[low, high)``."""
    i = bisect.bisect_left(positions, low)
    return i < len(positions) and positions[i] < high


def _shifted(day: dt.date, unit: str, count: int) -> str:
    """The time ``count`` units from ``day`` (negative: before it), as anchoring writes it."""
    unit = unit.lower().rstrip("s")
    if unit == "fortnight":
        unit, count = "week", 2 * count
    if unit == "day":
        return format_date(day + dt.timedelta(days=count))
    if unit == "week":
        return f"the week of {format_date(day + dt.timedelta(weeks=count))}"
    if unit == "weekend":  # "two weekends ago": the weekend before the day a week earlier
        side = "before" if count < 0 else "after"
        return f"the weekend {side} {format_date(day + dt.timedelta(weeks=count - (1 if count > 0 else -1)))}"
    if unit == "month":
        return _month(day, count)
    return _year(day.year + count)


def _resolve(match: re.Match[str], day: dt.date, tenses: Callable[[], _Tenses]) -> str | None:
    """The absolute date of one :data:`RELATIVE` match said on ``day`` (None: leave it alone).

    ``tenses`` gives the text's verb positions (read on first use: most texts never need them).
    """
    try:
        return _resolve_checked(match, day, tenses)
    except (OverflowError, ValueError):  # "9999 years ago": no such date
        return None


def _resolve_checked(match: re.Match[str], day: dt.date, tenses: Callable[[], _Tenses]) -> str | None:
    said = format_date(day)
    if match["day"]:
        word = " ".join(match["day"].lower().split()).removeprefix("the ")
        shift = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)
        if word.startswith("day "):
            shift = -2 if "before" in word else 2
        return format_date(day + dt.timedelta(days=shift))
    if match["count"]:
        count = _count(match["count"])
        if count is None:
            return None
        return _shifted(day, match["unit"], -count if match["dir"].lower() == "ago" else count)
    if match["in_count"]:
        count = _count(match["in_count"])
        if count is None or tenses().of(match) <= 0:
            return None
        return _shifted(day, match["in_unit"], count)
    if match["span"]:
        before = match["beyond"].lower().startswith("before")
        other = day + dt.timedelta(weeks=-1 if before else 1)
        return f"the {match['span'].lower()} {'before' if before else 'after'} {format_date(other)}"
    if match["on"]:
        tense = tenses().of(match)
        if tense == 0:
            return None
        name = WEEKDAYS[_WEEKDAY[match["on"][:3].lower()]].capitalize()
        return f"the {name} {'before' if tense < 0 else 'after'} {said}"
    rel, what = " ".join(match["rel"].lower().split()), match["what"].lower().rstrip(".")
    step = {"last": -1, "past": -1, "this past": -1, "this": 0, "next": 1, "coming": 1, "this coming": 1}[rel]
    if what == "month":
        return _month(day, step)
    if what == "year":
        return _year(day.year + step)
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

    @functools.cache
    def tenses() -> _Tenses:
        return _Tenses(text)

    def replace(match: re.Match[str]) -> str:
        resolved = _resolve(match, day, tenses)
        return f"{match[0]} ({resolved})" if resolved else match[0]

    return RELATIVE.sub(replace, text)
