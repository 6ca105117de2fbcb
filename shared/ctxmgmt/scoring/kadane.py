"""KadaneDial (DYCP, Algorithm 1): contiguous high-relevance spans from a relevance signal.

A pure function over a list of scores, independent of embeddings and messages.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ctxmgmt.messages.exceptions import ConfigurationError

TAU = 0.6
"""Gain shift in standard deviations of the score signal (DYCP 4.4)."""
THETA = 1.0
"""Stopping threshold on a span's summed gain (DYCP 4.4)."""
SHARPNESS = 3.0
"""Exponent applied to the clipped fused score before z-normalisation (KadaneDial's, tuned on LoCoMo dev)."""
NEIGHBOUR_WEIGHT = 0.4
"""Share of the mean of a turn's two neighbours' signal added to it (KadaneDial's, tuned on LoCoMo dev)."""
TUNED_TAU = 0.52
"""Gain shift of the fused, shaped signal (KadaneDial's, tuned on LoCoMo dev; the paper's: :data:`TAU`)."""


@dataclass(frozen=True)
class KadaneResult:
    """What :func:`kadane_dial` found.

    Attributes:
        z: z-normalised scores, one per turn.
        gains: ``z - tau`` per turn, before any span was taken.
        spans: Inclusive ``(start, end)`` turn indices in the order the passes found them.
        span_gains: Summed gain of each span (the pass's ``m*``), same order as ``spans``.
    """

    z: tuple[float, ...]
    gains: tuple[float, ...]
    spans: tuple[tuple[int, int], ...]
    span_gains: tuple[float, ...]

    @property
    def chronological(self) -> list[tuple[int, int]]:
        """Spans sorted by start index."""
        return sorted(self.spans)

    @property
    def selected(self) -> list[int]:
        """Indices of every turn inside a span, ascending."""
        return sorted(i for s, e in self.spans for i in range(s, e + 1))


def z_normalise(scores: Sequence[float] | np.ndarray) -> list[float]:
    """Population z-scores (Algorithm 1, L1-L3); all zeros when the scores are constant."""
    n = len(scores)
    if n == 0:
        return []
    values = np.asarray(scores, dtype=np.float64)
    mu = float(values.mean())
    sigma = float(values.std())
    if sigma <= 1e-12 * max(1.0, abs(mu)):
        return [0.0] * n
    return ((values - mu) / sigma).tolist()


def shape_signal(relevance: np.ndarray, *, sharpness: float, neighbour_weight: float) -> np.ndarray:
    """The signal KadaneDial reads: ``max(r, 0) ** sharpness`` plus the neighbour term.

    ``neighbour_weight`` times the mean of a turn's two neighbours' shaped values is added
    (the first and last turn count themselves as their missing neighbour). With
    ``sharpness=1`` and ``neighbour_weight=0`` the relevance is passed through unclipped.

    Example:
        >>> shape_signal(np.array([0.0, 1.0, 0.0]), sharpness=1.0, neighbour_weight=0.5).tolist()
        [0.25, 1.0, 0.25]
    """
    if sharpness == 1.0 and neighbour_weight == 0.0:
        return relevance
    shaped = np.maximum(relevance, 0.0) ** sharpness
    if neighbour_weight and len(shaped) > 1:
        padded = np.pad(shaped, 1, mode="edge")
        shaped = shaped + neighbour_weight * (padded[:-2] + padded[2:]) / 2
    return shaped


def best_span(gains: Sequence[float]) -> tuple[float, int, int]:
    """One Kadane pass (Algorithm 1, L7-L14): best ``(gain, start, end)`` over ``gains``.

    Ties keep the earliest end and, for that end, the shortest span (a running sum that is
    exactly 0 restarts). Entries of ``-inf`` (already taken) are never inside a span unless
    every entry is ``-inf``, in which case the gain is ``-inf``.
    """
    m = 0.0
    m_star = -math.inf
    i_temp = 0
    start, end = 0, 0
    for j, g in enumerate(gains):
        if m + g > g:
            m = m + g
        else:
            m = g
            i_temp = j
        if m > m_star:
            m_star = m
            start, end = i_temp, j
    return m_star, start, end


SMALL_SEGMENT = 128
"""Segments up to this many turns are scanned by the plain loop of :func:`best_span`, which
beats numpy's per-call overhead there (most segments a long history splits into are small)."""


def _best_span_of(gains: np.ndarray, lo: int, hi: int) -> tuple[float, int, int]:
    """:func:`best_span` over ``gains[lo : hi + 1]``, with indices relative to ``lo``."""
    if hi - lo < SMALL_SEGMENT:
        return best_span(gains[lo : hi + 1].tolist())
    return _best_span_vectorised(gains[lo : hi + 1])


def _best_span_vectorised(gains: np.ndarray) -> tuple[float, int, int]:
    """:func:`best_span` on a finite array, with prefix sums instead of a Python loop.

    Kadane's running start is always the latest prefix index holding the running minimum
    of the prefix sums (a running sum <= 0 restarts), and ``m > m*`` keeps the earliest end,
    so both tie rules carry over. Prefix sums round differently from a running sum, so
    values within ``1e-9`` (relative) of each other count as ties, and the chosen span's
    gain is summed exactly.
    """
    prefix = np.concatenate(([0.0], np.cumsum(gains)))
    tol = 1e-9 * (1.0 + float(np.abs(prefix).max()))
    low = np.minimum.accumulate(prefix[:-1])
    positions = np.arange(len(gains))
    start_at = np.maximum.accumulate(np.where(prefix[:-1] <= low + tol, positions, 0))
    ending = prefix[1:] - low
    end = int(np.argmax(ending >= ending.max() - tol))
    start = int(start_at[end])
    return math.fsum(gains[start : end + 1].tolist()), start, end


def kadane_dial(
    scores: Sequence[float] | np.ndarray, *, tau: float = TAU, theta: float = THETA
) -> KadaneResult:
    """Select spans of consecutive turns whose relevance stays high (DYCP Algorithm 1).

    The scores are z-normalised, shifted by ``tau`` into gains, and Kadane's
    maximum-subarray pass is repeated; each pass takes its best span and masks it. The loop
    runs while the previous pass's gain was at least ``theta``, so the first span is always
    taken and so is the span whose gain first falls below ``theta`` (the test comes after
    the span is added, L15-L17); it also ends when every turn is taken.

    Edge cases: no scores -> no span; one score or constant scores -> z is all 0, gains are
    all ``-tau``, and the single earliest turn is the one span (its gain ``-tau`` < theta ends
    the loop); all gains negative -> only the single best turn.

    Args:
        scores: Relevance of each past turn to the query, in chronological order.
        tau: Gain shift in standard deviations; 0.6 per DYCP 4.4.
        theta: Stop once a pass's best summed gain is below this; 1.0 per DYCP 4.4.

    Returns:
        The z-scores, gains and spans (inclusive, 0-based turn indices).

    Example:
        >>> kadane_dial([0.1, 0.9, 0.8, 0.1, 0.1, 0.7]).chronological
        [(1, 2), (5, 5)]
    """
    for value in (tau, theta):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(f"tau and theta must be numbers, got {value!r}")
    if not (math.isfinite(tau) and math.isfinite(theta)):
        raise ConfigurationError("tau and theta must be finite numbers")
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise ConfigurationError("scores must be a flat sequence of finite numbers")
    z = z_normalise(values)
    gains = np.asarray(z, dtype=np.float64) - tau
    spans: list[tuple[int, int]] = []
    span_gains: list[float] = []
    # A pass over the masked signal equals independent passes over its unmasked segments
    # (a -inf entry restarts the running sum), keeping the best with the earliest end; so
    # each pass only re-scans the segment its span split.
    # A heap of segments keyed by (-gain, end): the best gain, ties to the earliest end.
    segments: list[tuple[float, int, int, int, int]] = []  # (-gain, end, start, seg_lo, seg_hi)

    def push(lo: int, hi: int) -> None:
        g, s, e = _best_span_of(gains, lo, hi)
        heapq.heappush(segments, (-g, e + lo, s + lo, lo, hi))

    if len(gains):
        push(0, len(gains) - 1)
    total_gain = math.inf
    while total_gain >= theta and segments:
        neg_gain, end, start, lo, hi = heapq.heappop(segments)
        m_star = -neg_gain
        spans.append((start, end))
        span_gains.append(m_star)
        if lo <= start - 1:
            push(lo, start - 1)
        if end + 1 <= hi:
            push(end + 1, hi)
        total_gain = m_star
    return KadaneResult(tuple(z), tuple(gains.tolist()), tuple(spans), tuple(span_gains))


class Kept(NamedTuple):
    """What :func:`keep_best_within` left out: turns dropped, and turns sent as their user part alone."""

    dropped: list[int]
    """Turns neither whole nor in part, worst first."""
    user_only: list[int]
    """Turns sent as their user message(s) alone, ascending."""


def keep_best_within(
    chosen: set[int],
    scores: np.ndarray,
    protected: set[int],
    tokens: Sequence[int],
    budget: int,
    user_parts: Mapping[int, int] | None = None,
    also: Sequence[int] = (),
) -> Kept:
    """Keep the chosen turns best first while they fit in ``budget``; the rest are dropped.

    Protected turns are kept first, newest first, while they fit. Then the others, by
    descending score (ties to the earlier turn); a turn that does not fit is skipped and the
    next one tried. ``user_parts`` (turn -> tokens) names turns that may go as their user
    message(s) alone: those first take only that part, best first, and become whole in a second
    pass, best first, while the whole turn fits (LongMemEval dev at 4,000 tokens: a 600-token
    round is mostly a reply the question does not ask about). ``also``: turns not chosen, each
    offered as its user part alone (in ``user_parts``) after the chosen ones' first pass, in the
    order given. When every chosen turn fits whole and ``also`` is empty, every one is kept
    whole. ``chosen`` is updated in place to the turns kept whole.
    """
    parts = {} if user_parts is None else {i: n for i, n in user_parts.items() if i not in protected}
    kept: set[int] = set()
    part_only: set[int] = set()
    used = 0
    order = sorted(protected & chosen, reverse=True) + sorted(
        chosen - protected, key=lambda i: (-float(scores[i]), i)
    )
    extra = [i for i in also if i in parts and i not in chosen]
    for i in order + extra:
        cost = parts.get(i, tokens[i])
        if used + cost <= budget:
            (part_only if i in parts else kept).add(i)
            used += cost
    for i in order:
        if i in part_only and used - parts[i] + tokens[i] <= budget:
            part_only.discard(i)
            kept.add(i)
            used += tokens[i] - parts[i]
    dropped = [i for i in reversed(order) if i not in kept and i not in part_only]
    chosen.intersection_update(kept)
    return Kept(dropped, sorted(part_only))


def trim_to_budget(
    chosen: set[int], scores: np.ndarray, protected: set[int], tokens: Sequence[int], budget: int
) -> list[int]:
    """Drop span-edge turns, lowest score first (protected turns last), until within budget.

    An edge is a chosen turn with a neighbour not chosen; ties go to the earlier turn. When only
    protected edges are left, the earliest chosen turn goes. ``chosen`` is updated in place;
    returns the dropped turns in drop order. A heap of the unprotected edges keeps this
    O(k log k) for k chosen turns (a selection over 10,000 turns can drop thousands).
    """
    dropped: list[int] = []
    total = sum(tokens[i] for i in chosen)
    if total <= budget:
        return dropped
    heap: list[tuple[float, int]] = []
    queued: set[int] = set()

    def queue_if_edge(i: int) -> None:
        edge = i - 1 not in chosen or i + 1 not in chosen
        if edge and i in chosen and i not in protected and i not in queued:
            queued.add(i)
            heapq.heappush(heap, (float(scores[i]), i))

    for i in chosen:
        queue_if_edge(i)
    in_order: list[int] | None = None  # chosen turns by position, for the protected-only case
    first = 0
    while chosen and total > budget:
        while heap and heap[0][1] not in chosen:
            heapq.heappop(heap)
        if heap:
            victim = heapq.heappop(heap)[1]
        else:
            if in_order is None:
                in_order = sorted(chosen)
            while in_order[first] not in chosen:
                first += 1
            victim = in_order[first]
        chosen.discard(victim)
        total -= tokens[victim]
        dropped.append(victim)
        queue_if_edge(victim - 1)  # a turn stays an edge once it is one: each is queued once
        queue_if_edge(victim + 1)
    return dropped
