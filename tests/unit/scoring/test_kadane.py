"""KadaneDial (DYCP Algorithm 1) against an independent brute-force reference."""

from __future__ import annotations

import math
import statistics
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmgmt import ConfigurationError, KadaneResult, kadane, kadane_dial
from ctxmgmt.scoring.kadane import TAU, THETA, best_span, keep_best_within, trim_to_budget, z_normalise

# ---------------------------------------------------------------------------------------
# Independent reference implementation
# ---------------------------------------------------------------------------------------


def ref_z(scores: list[float]) -> list[float]:
    """Population z-scores; all zeros for fewer than two or constant scores."""
    if not scores:
        return []
    mu = statistics.fmean(scores)
    sigma = statistics.pstdev(scores)
    if sigma == 0.0:
        return [0.0] * len(scores)
    return [(s - mu) / sigma for s in scores]


def ref_best(gains: list[float], taken: set[int]) -> tuple[float, int, int] | None:
    """Best contiguous range avoiding ``taken``, by enumeration.

    Ties: earliest end, then (for that end) the shortest range. ``None`` when every index
    is taken.
    """
    best: tuple[float, int, int] | None = None
    n = len(gains)
    for i in range(n):
        total = 0.0
        for j in range(i, n):
            if j in taken:
                break
            total += gains[j]  # left to right: exact for small integer gains
            if (
                best is None
                or total > best[0]
                or (total == best[0] and (j < best[2] or (j == best[2] and i > best[1])))
            ):
                best = (total, i, j)
    return best


def ref_kadane_dial(
    scores: list[float], tau: float, theta: float
) -> tuple[list[tuple[int, int]], list[float]]:
    """Algorithm 1 by brute force: repeat the best-range pass while the last gain >= theta."""
    gains = [z - tau for z in ref_z(scores)]
    taken: set[int] = set()
    spans: list[tuple[int, int]] = []
    span_gains: list[float] = []
    previous = math.inf
    while previous >= theta and len(taken) < len(gains):
        found = ref_best(gains, taken)
        assert found is not None
        gain, i, j = found
        spans.append((i, j))
        span_gains.append(gain)
        taken.update(range(i, j + 1))
        previous = gain
    return spans, span_gains


def test_reference_on_docstring_example() -> None:
    spans, _ = ref_kadane_dial([0.1, 0.9, 0.8, 0.1, 0.1, 0.7], TAU, THETA)
    assert sorted(spans) == [(1, 2), (5, 5)]


# ---------------------------------------------------------------------------------------
# Random continuous signals (ties have probability zero)
# ---------------------------------------------------------------------------------------


def _signal(seed: int, n: int, kind: str) -> list[float]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, n).tolist()
    if kind == "normal":
        return rng.normal(0.0, 3.0, n).tolist()
    # "topics": piecewise-constant relevance (like cosine scores of topic blocks) plus noise,
    # so the best spans are several turns long.
    levels = rng.uniform(0.0, 1.0, max(1, n // 4 + 1))
    block = rng.integers(1, 6)
    base = [levels[min(len(levels) - 1, k // block)] for k in range(n)]
    return (np.asarray(base) + rng.normal(0.0, 0.05, n)).tolist()


signals = st.builds(
    _signal,
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 40),
    kind=st.sampled_from(["uniform", "normal", "topics"]),
)
taus = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
thetas = st.floats(min_value=-3.0, max_value=4.0, allow_nan=False)


@settings(database=None, max_examples=300, deadline=None)
@given(scores=signals, tau=taus, theta=thetas)
def test_matches_brute_force(scores: list[float], tau: float, theta: float) -> None:
    result = kadane_dial(scores, tau=tau, theta=theta)
    spans, span_gains = ref_kadane_dial(scores, tau, theta)
    assert list(result.spans) == spans
    assert list(result.span_gains) == pytest.approx(span_gains, rel=1e-9, abs=1e-9)
    assert list(result.z) == pytest.approx(ref_z(scores), rel=1e-9, abs=1e-9)
    assert list(result.gains) == pytest.approx([z - tau for z in ref_z(scores)], rel=1e-9, abs=1e-9)


@settings(database=None, max_examples=150, deadline=None)
@given(scores=signals, tau=taus, theta=thetas)
def test_vectorised_passes_match_brute_force(scores: list[float], tau: float, theta: float) -> None:
    """Every segment through the numpy pass (normally only segments over SMALL_SEGMENT turns)."""
    with mock.patch.object(kadane, "SMALL_SEGMENT", -1):
        result = kadane_dial(scores, tau=tau, theta=theta)
    spans, span_gains = ref_kadane_dial(scores, tau, theta)
    assert list(result.spans) == spans
    assert list(result.span_gains) == pytest.approx(span_gains, rel=1e-9, abs=1e-9)


@settings(database=None, max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(100, 400),
    kind=st.sampled_from(["uniform", "normal", "topics"]),
    theta=st.floats(min_value=0.0, max_value=4.0),
)
def test_long_signals_mix_both_passes_and_match_brute_force(
    seed: int, n: int, kind: str, theta: float
) -> None:
    scores = _signal(seed, n, kind)
    result = kadane_dial(np.asarray(scores), theta=theta)
    spans, _ = ref_kadane_dial(scores, TAU, theta)
    assert list(result.spans) == spans


@settings(database=None, max_examples=200, deadline=None)
@given(scores=signals, tau=taus, theta=thetas)
def test_span_structure(scores: list[float], tau: float, theta: float) -> None:
    result = kadane_dial(scores, tau=tau, theta=theta)
    n = len(scores)
    covered = [i for s, e in result.spans for i in range(s, e + 1)]
    # Within range and well formed.
    assert all(0 <= s <= e < n for s, e in result.spans)
    # Disjoint: every selected index appears exactly once.
    assert len(covered) == len(set(covered))
    assert result.selected == sorted(covered)
    assert result.chronological == sorted(result.spans)
    assert len(result.span_gains) == len(result.spans)
    # The first span is always taken when there is a turn.
    assert (len(result.spans) >= 1) == (n >= 1)
    # Loop rule: every span but the last had gain >= theta; the loop ended because the last
    # gain fell below theta or every turn was taken.
    assert all(g >= theta for g in result.span_gains[:-1])
    if result.spans:
        assert result.span_gains[-1] < theta or len(covered) == n
    # Passes find spans in non-increasing order of gain (each pass has fewer candidates).
    assert all(a >= b - 1e-12 for a, b in zip(result.span_gains, result.span_gains[1:], strict=False))


@settings(database=None, max_examples=100, deadline=None)
@given(
    scores=signals,
    scale=st.floats(min_value=0.01, max_value=100.0),
    shift=st.floats(min_value=-10.0, max_value=10.0),
)
def test_invariant_to_positive_affine_rescaling(scores: list[float], scale: float, shift: float) -> None:
    base = kadane_dial(scores)
    moved = kadane_dial([s * scale + shift for s in scores])
    assert moved.spans == base.spans
    assert list(moved.span_gains) == pytest.approx(list(base.span_gains), rel=1e-6, abs=1e-6)


# ---------------------------------------------------------------------------------------
# One Kadane pass and the documented tie rules
# ---------------------------------------------------------------------------------------


@settings(database=None, max_examples=250, deadline=None)
@given(
    gains=st.lists(
        st.one_of(st.integers(-3, 3).map(float), st.just(-math.inf)),
        min_size=0,
        max_size=14,
    )
)
def test_best_span_matches_brute_force_with_exact_ties(gains: list[float]) -> None:
    """Small integer gains make exact ties frequent and sums exact: tie rules must hold."""
    taken = {i for i, g in enumerate(gains) if g == -math.inf}
    expected = ref_best(gains, taken)
    got = best_span(gains)
    if expected is None:
        assert got[0] == -math.inf
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("gains", "expected"),
    [
        ([1.0, -1.0, 1.0], (1.0, 0, 0)),  # (0,0), (0,2), (2,2) tie: earliest end
        ([1.0, 0.0], (1.0, 0, 0)),  # (0,0) and (0,1) tie: earliest end
        ([0.0, 1.0], (1.0, 1, 1)),  # (0,1) and (1,1) tie, same end: shortest
        ([2.0, -2.0, 3.0], (3.0, 2, 2)),  # (0,2) and (2,2) tie, same end: shortest
        ([-1.0, -1.0, -1.0], (-1.0, 0, 0)),  # all equal negatives: earliest turn
        ([0.0, 0.0, 0.0], (0.0, 0, 0)),  # a running sum of exactly 0 restarts
        ([-math.inf, 2.0, -math.inf, 2.0], (2.0, 1, 1)),  # taken entries are never inside
        ([-math.inf, -math.inf], (-math.inf, 0, 0)),  # everything taken
        ([], (-math.inf, 0, 0)),
    ],
)
def test_best_span_tie_rules(gains: list[float], expected: tuple[float, int, int]) -> None:
    got = best_span(gains)
    assert got[0] == expected[0]
    if expected[0] != -math.inf:
        assert got[1:] == expected[1:]


def test_kadane_dial_ties_take_the_earliest_span_first() -> None:
    # Both 1s have bit-identical gains; (1,1) comes first, then (3,3) (theta=0 keeps going),
    # then the single best of the remaining equal turns is the earliest, (0,0).
    result = kadane_dial([0.0, 1.0, 0.0, 1.0, 0.0], tau=TAU, theta=0.0)
    assert result.spans == ((1, 1), (3, 3), (0, 0))
    assert result.span_gains[0] == result.span_gains[1]
    # Default theta stops after the first span (gain ~0.62 < 1).
    assert kadane_dial([0.0, 1.0, 0.0, 1.0, 0.0]).spans == ((1, 1),)


def test_constant_scores_with_low_theta_take_turns_in_order() -> None:
    result = kadane_dial([0.5] * 4, tau=0.0, theta=-10.0)
    assert result.spans == ((0, 0), (1, 1), (2, 2), (3, 3))
    assert result.span_gains == (0.0, 0.0, 0.0, 0.0)


# ---------------------------------------------------------------------------------------
# Documented edge cases
# ---------------------------------------------------------------------------------------


def test_no_scores() -> None:
    result = kadane_dial([])
    assert result == KadaneResult((), (), (), ())
    assert result.chronological == []
    assert result.selected == []


def test_one_score() -> None:
    result = kadane_dial([0.42])
    assert result.z == (0.0,)
    assert result.gains == (-TAU,)
    assert result.spans == ((0, 0),)
    assert result.span_gains == (-TAU,)
    assert result.selected == [0]


@pytest.mark.parametrize("value", [0.0, 0.3, -2.5, 1e6])
@pytest.mark.parametrize("n", [2, 5, 17])
def test_constant_scores(value: float, n: int) -> None:
    result = kadane_dial([value] * n)
    assert result.z == (0.0,) * n
    assert result.gains == (-TAU,) * n
    # The single earliest turn; its gain -tau < theta ends the loop.
    assert result.spans == ((0, 0),)
    assert result.span_gains == (-TAU,)


def test_constant_scores_with_float_noise_are_constant() -> None:
    # 0.1 * 3 style rounding must not blow up into huge z-scores.
    scores = [0.1 + 0.2, 0.3, 0.30000000000000004, 0.3]
    result = kadane_dial(scores)
    assert result.z == (0.0,) * 4
    assert result.spans == ((0, 0),)


@settings(database=None, max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40))
def test_all_negative_gains_select_only_the_best_turn(seed: int, n: int) -> None:
    scores = np.random.default_rng(seed).uniform(0.0, 1.0, n).tolist()
    tau = math.sqrt(n - 1) + 0.1  # population z-scores never exceed sqrt(n - 1)
    result = kadane_dial(scores, tau=tau)
    assert all(g < 0 for g in result.gains)
    best = int(np.argmax(scores))
    assert result.spans == ((best, best),)
    assert result.span_gains[0] == pytest.approx(max(result.gains))


def test_docstring_example() -> None:
    result = kadane_dial([0.1, 0.9, 0.8, 0.1, 0.1, 0.7])
    assert result.chronological == [(1, 2), (5, 5)]
    assert result.spans == ((1, 2), (5, 5))  # the pass order
    assert result.span_gains[0] >= THETA > result.span_gains[1]
    assert result.selected == [1, 2, 5]


def test_defaults_follow_the_paper() -> None:
    assert TAU == 0.6
    assert THETA == 1.0


def test_accepts_numpy_input() -> None:
    scores = np.array([0.1, 0.9, 0.8, 0.1, 0.1, 0.7])
    assert kadane_dial(scores).chronological == [(1, 2), (5, 5)]


# ---------------------------------------------------------------------------------------
# z_normalise
# ---------------------------------------------------------------------------------------


@settings(database=None, max_examples=200, deadline=None)
@given(scores=signals)
def test_z_normalise_has_mean_zero_and_std_one(scores: list[float]) -> None:
    z = z_normalise(scores)
    assert len(z) == len(scores)
    if len(scores) >= 2 and statistics.pstdev(scores) > 0:
        assert statistics.fmean(z) == pytest.approx(0.0, abs=1e-9)
        assert statistics.pstdev(z) == pytest.approx(1.0, rel=1e-9)
        # Order preserving.
        order = np.argsort(scores, kind="stable")
        assert np.all(np.diff(np.asarray(z)[order]) >= 0)


def test_z_normalise_edge_cases() -> None:
    assert z_normalise([]) == []
    assert z_normalise([3.0]) == [0.0]
    assert z_normalise([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]
    assert z_normalise([0.0, 2.0]) == [-1.0, 1.0]


# ---------------------------------------------------------------------------------------
# Invalid input
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_invalid_tau(bad: float) -> None:
    with pytest.raises(ConfigurationError):
        kadane_dial([0.1, 0.2], tau=bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_invalid_theta(bad: float) -> None:
    with pytest.raises(ConfigurationError):
        kadane_dial([0.1, 0.2], theta=bad)


@pytest.mark.parametrize(
    "scores", [[math.nan], [0.1, math.nan, 0.3], [0.1, math.inf], [-math.inf, 0.2], [[0.1, 0.2]]]
)
def test_non_finite_scores(scores: list[float]) -> None:
    with pytest.raises(ConfigurationError):
        kadane_dial(scores)


def test_configuration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        kadane_dial([math.nan])


def _trim_reference(chosen, scores, protected, tokens, budget):
    """The plain definition trim_to_budget implements with a heap (recomputes the edges per drop)."""
    dropped = []
    total = sum(tokens[i] for i in chosen)
    while chosen and total > budget:
        edges = [i for i in chosen if i - 1 not in chosen or i + 1 not in chosen]
        pool = [i for i in edges if i not in protected] or sorted(chosen)[:1]
        victim = min(pool, key=lambda i: (scores[i], i))
        chosen.discard(victim)
        total -= tokens[victim]
        dropped.append(victim)
    return dropped


def test_trim_to_budget_drops_exactly_what_the_definition_drops():
    import random

    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(0, 40)
        scores = np.array([rng.choice([0.1, 0.2, 0.5, rng.random()]) for _ in range(n)])  # with ties
        chosen = {i for i in range(n) if rng.random() < 0.6}
        protected = {i for i in chosen if rng.random() < 0.3}
        tokens = [rng.randint(1, 20) for _ in range(n)]
        budget = rng.randint(0, 200)
        expected, actual = set(chosen), set(chosen)
        assert trim_to_budget(actual, scores, protected, tokens, budget) == _trim_reference(
            expected, scores, protected, tokens, budget
        )
        assert actual == expected


# -- keep_best_within with user parts (a long turn sent as its user message alone) -------------


def test_user_parts_go_first_and_become_whole_best_first() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.1])
    tokens = [500, 500, 500, 50]
    chosen = {0, 1, 2, 3}
    kept = keep_best_within(chosen, scores, set(), tokens, 700, {0: 40, 1: 40, 2: 40})
    # parts 0, 1, 2 (120) and turn 3 (50) first; then turn 0 whole (+460) fits, 1 does not
    assert chosen == {0, 3}
    assert kept.user_only == [1, 2]
    assert kept.dropped == []


def test_user_parts_change_nothing_when_every_chosen_turn_fits() -> None:
    chosen = {0, 1}
    kept = keep_best_within(chosen, np.array([0.5, 0.4]), set(), [300, 300], 600, {0: 20, 1: 20})
    assert chosen == {0, 1} and kept == ([], [])


def test_protected_turns_are_never_cut_to_their_user_part() -> None:
    chosen = {0, 1}
    kept = keep_best_within(chosen, np.array([0.9, 0.1]), {1}, [300, 300], 340, {0: 20, 1: 20})
    assert chosen == {1} and kept.user_only == [0]


def test_also_offers_unchosen_turns_as_user_parts_after_the_chosen_ones() -> None:
    chosen = {0}
    scores = np.array([0.9, 0.5, 0.4, 0.3])
    kept = keep_best_within(
        chosen, scores, set(), [300, 300, 300, 300], 350, {0: 30, 1: 30, 2: 30}, also=[2, 1, 3]
    )
    # part 0, then parts 2 and 1 (turn 3 has no user part: never offered); turn 0 whole does not fit
    assert chosen == set() and kept.user_only == [0, 1, 2] and kept.dropped == []
    chosen = {0}
    kept = keep_best_within(
        chosen, scores, set(), [300, 300, 300, 300], 400, {0: 30, 1: 30, 2: 30}, also=[2, 1]
    )
    assert chosen == {0} and kept.user_only == [1, 2]  # 300 + 30 + 30 <= 400
