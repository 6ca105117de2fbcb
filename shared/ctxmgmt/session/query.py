"""Which turn is in progress and what the question is: the two rules every select path applies once.

A conversation's turns split into the completed past, which a strategy selects from, and the
turn in progress (the user's new message, or a tool call waiting for its result), which is
always sent verbatim (:func:`split_current`). The question to select for is the caller's
``query`` when given, else the newest user message that has text (:func:`infer_query`, built on
:func:`newest_query`, which the LlamaIndex memory block applies to its ``ChatMessage`` queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

from ctxmgmt.messages.types import Turn, clean_text


def split_current(turns: Sequence[Turn]) -> tuple[list[Turn], Turn | None]:
    """Split turns into (completed past turns, the turn in progress or None).

    The last turn is in progress unless it ends with a final assistant answer: it holds the
    user's new message, or a tool call waiting for (or just given) its result.
    """
    if turns and not turns[-1].is_complete:
        return list(turns[:-1]), turns[-1]
    return list(turns), None


def newest_query(texts: Iterable[str]) -> str:
    """The first non-empty text of ``texts`` (user messages' texts, newest first); "" if none."""
    return next((text for text in texts if text), "")


def infer_query(turns: Sequence[Turn], current: Turn | None, query: str | None) -> str:
    """The query to select for: ``query`` if given, else the newest user message ("" if none).

    A user message with media and no text (e.g. only an image) has no query text, so the
    newest user message that has text is used. A given ``query`` is cleaned like message text
    (:func:`~ctxmgmt.messages.types.clean_text`).
    """
    if query is not None and query.strip():
        return clean_text(query)
    newest_first = (turn.query for turn in reversed(turns))
    return newest_query(newest_first if current is None else chain((current.query,), newest_first))
