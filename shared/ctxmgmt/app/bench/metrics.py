"""Evaluation metrics (DESIGN.md, evaluation protocol)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence


def evidence_recall(
    evidence: Iterable[int],
    shown: Iterable[int],
    user_only: Mapping[int, int] | None = None,
    evidence_messages: Sequence[Sequence[int]] = (),
) -> float | None:
    """Share of gold evidence turns present verbatim; None when there is no evidence.

    A turn in ``shown`` is present whole. A turn shown as its user message(s) alone (``user_only``:
    turn -> messages shown, :attr:`ctxmgmt.messages.context.Context.user_only_turns`) counts only
    when every gold message of it is among those: ``evidence_messages`` gives, per evidence turn,
    the positions of its gold messages (empty: the whole turn is gold, so only the whole turn counts).
    """
    evidence = list(evidence)
    positions = list(evidence_messages) or [()] * len(evidence)
    gold = dict(zip(evidence, positions, strict=True))
    if not gold:
        return None
    whole = set(shown)
    parts = user_only or {}

    def present(turn: int, messages: Sequence[int]) -> bool:
        if turn in whole:
            return True
        return turn in parts and bool(messages) and max(messages) < parts[turn]

    return sum(present(t, m) for t, m in gold.items()) / len(gold)


def session_recall(sessions: Iterable[Iterable[int]], shown: Iterable[int]) -> float | None:
    """Share of gold evidence sessions (each as its turn indices) with a turn present verbatim.

    ``shown``: turns present whole or in part (a user message shown alone is a message of its
    session, verbatim).

    None when there are no gold sessions.
    """
    gold = [set(s) for s in sessions]
    if not gold:
        return None
    seen = set(shown)
    return sum(1 for s in gold if s & seen) / len(gold)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def answer_contained(answer: str, context_text: str) -> bool | None:
    """Whether the gold answer string appears in the context (case/space-insensitive)."""
    if not answer.strip():
        return None
    return _norm(answer) in _norm(context_text)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; nan for no values."""
    if not values:
        return math.nan
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def mean(values: Iterable[float | None]) -> float:
    """Mean of the non-None values (nan when there are none)."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else math.nan
