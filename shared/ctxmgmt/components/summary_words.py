"""The word measures summaries are scored and deduplicated by.

Content words, numbers, word-set overlap (Jaccard), names/numbers/dates (specifics) and a
memory item's salience; the summarisers and the memories that keep their items share them.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Set as AbstractSet

from ctxmgmt.scoring.lexical import tokenize

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
"""Where a sentence ends: after ``.``, ``!`` or ``?`` and white space, before the next text."""
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d[\d.,:/\-]*")
_ASCII_LETTERS = frozenset(string.ascii_letters)
_DATE_WORDS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday today yesterday tomorrow week weekend month year""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-case, stemmed words of ``text`` without stop words (the dedup vocabulary)."""
    return set(tokenize(text))


def numbers(text: str) -> set[str]:
    """The numbers written in ``text`` (digit runs), e.g. ``{"3", "2023"}``."""
    return set(re.findall(r"\d+", text))


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Jaccard similarity of two word sets (0 when either is empty)."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)  # the union's size, without building it


def specific_terms(text: str) -> list[str]:
    """The names, numbers and dates of ``text``, in order (repeats kept).

    Words that are capitalised but do not start a sentence (names, places), words containing
    a digit, and month, weekday and relative-date words.
    """
    terms: list[str] = []
    for sentence in SENTENCE_END.split(text):
        words = _WORD.findall(sentence)
        for position, word in enumerate(words):
            # a _WORD holds a digit exactly when it starts with one (its letters are ASCII)
            if word[0] not in _ASCII_LETTERS or word.lower() in _DATE_WORDS:
                terms.append(word.rstrip(".,:/-"))
            elif position > 0 and word[0].isupper() and word not in ("I", "I'm", "I've", "I'd", "I'll"):
                terms.append(word)
    return terms


@functools.lru_cache(maxsize=4096)
def specifics(text: str) -> int:
    """How many names, numbers and dates ``text`` holds (:func:`specific_terms`).

    Kept for the 4,096 texts asked last: SWin scores every memory item on every select.
    """
    return len(specific_terms(text))


def salience(text: str, reinforcements: int = 0) -> float:
    """Salience of a memory item in [0, 1): ``1 - exp(-(specifics + reinforcements) / 3)``.

    An item with three names/numbers/dates scores 0.63; each time a later window repeats it
    (a reinforcement) counts like one more.
    """
    return 1.0 - math.exp(-(specifics(text) + max(0, reinforcements)) / 3.0)
