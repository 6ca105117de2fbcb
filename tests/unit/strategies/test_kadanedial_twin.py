"""KadaneDialTwin: one KadaneDial selection over every turn, the derived ones scored by its source."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import KadaneDialStrategy, Message, group_turns
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.static_turns import StaticTurns
from ctxmgmt.scoring.kadane import TUNED_TAU
from ctxmgmt.scoring.vectors import dot_rows
from ctxmgmt.strategies.kadanedial import QUESTION_TAU_SHIFT, STATIC_COSINE_MAP, KadaneDialTwin, _borrowed
from tests.helpers import TOPICS

QUESTION = "car engine rattling exhaust mechanic"


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture
def turns():
    return group_turns([m for q, a in TOPICS * 2 for m in (Message("user", q), Message("assistant", a))])


def source(turns, derived: int, **params) -> KadaneDialStrategy:
    strategy = KadaneDialStrategy(embedder=HashingEmbedder(dim=384), token_counter=words, **params)
    strategy.add_many(turns[:derived])
    return strategy


def twin_of(strategy: KadaneDialStrategy, turns, questions=None) -> KadaneDialTwin:
    twin = strategy.fast_twin(questions)
    twin.add_many(turns)
    return twin


def test_twin_keeps_the_source_parameters_and_counter(turns) -> None:
    strategy = source(turns, 0, tau=0.7, keep_last=1)
    twin = strategy.fast_twin(HashingEmbedder(dim=384))
    assert twin.config == strategy.config and twin.token_counter is strategy.token_counter
    assert isinstance(twin.embedder, StaticTurns) and twin.tau_shift == QUESTION_TAU_SHIFT
    assert strategy.fast_twin().tau_shift == 0.0  # static questions: tau as given
    assert len(strategy) == 0 and len(twin) == 0


def test_everything_derived_the_twin_chooses_as_its_source(turns) -> None:
    strategy = source(turns, len(turns))
    twin = twin_of(strategy, turns, HashingEmbedder(dim=384))
    mine, theirs = twin.select(QUESTION), strategy.select(QUESTION)
    assert mine.turn_indices == theirs.turn_indices and mine.turn_indices
    assert mine.details["relevance"] == theirs.details["relevance"]
    assert mine.details["tau"] == strategy.tau


def test_nothing_derived_the_twin_is_kadanedial_over_mapped_static_cosines(turns) -> None:
    questions = HashingEmbedder(dim=384)
    twin = twin_of(source(turns, 0), turns, questions)
    plain = KadaneDialStrategy(
        embedder=StaticTurns(questions), token_counter=words, tau=TUNED_TAU + QUESTION_TAU_SHIFT
    )
    plain.add_many(turns)
    scale, shift = STATIC_COSINE_MAP
    plain.cosines = lambda vector: dot_rows(plain.matrix, vector).astype(np.float64) * scale + shift
    mine, theirs = twin.select(QUESTION), plain.select(QUESTION)
    assert mine.turn_indices == theirs.turn_indices
    assert mine.details["relevance"] == pytest.approx(theirs.details["relevance"])
    assert mine.details["tau"] == pytest.approx(TUNED_TAU + QUESTION_TAU_SHIFT)
    static = twin_of(source(turns, 0), turns)  # static questions: the plain cosines and tau
    assert static.cosine_map is None and static.select(QUESTION).details["tau"] == TUNED_TAU


def test_derived_turns_are_scored_by_the_source_the_rest_on_its_scale(turns) -> None:
    derived = 16
    strategy = source(turns, derived)
    twin = twin_of(strategy, turns, HashingEmbedder(dim=384))
    context = twin.select(QUESTION)
    relevance = np.array(context.details["relevance"])
    theirs = strategy.relevance(QUESTION)
    assert relevance[:derived] == pytest.approx(theirs)
    own = twin.relevance(QUESTION)
    assert relevance[derived:] == pytest.approx(_borrowed(theirs, own)[derived:])
    assert context.details["tau"] == pytest.approx(
        TUNED_TAU + QUESTION_TAU_SHIFT * (1 - derived / len(turns))
    )
    # the source derives one more turn: the twin scores anew
    strategy.add(turns[derived])
    again = twin.select(QUESTION).details["relevance"]
    assert again[derived] == pytest.approx(strategy.relevance(QUESTION)[derived])


def test_too_few_derived_turns_are_not_read(turns) -> None:
    twin = twin_of(source(turns, 15), turns, HashingEmbedder(dim=384))
    assert twin.select(QUESTION).details["relevance"] == pytest.approx(twin.relevance(QUESTION))


def test_borrowed_matches_mean_and_spread_of_the_source() -> None:
    own = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    source = np.array([10.0, 12.0, 14.0])
    out = _borrowed(source, own)
    assert out[:3] == pytest.approx(source)
    assert out[3:] == pytest.approx([16.0, 18.0, 20.0])  # the same line: slope 2, offset 10
    flat = _borrowed(np.array([1.0, 1.0]), np.array([0.5, 0.5, 0.9]))
    assert flat == pytest.approx([1.0, 1.0, 1.4])  # a constant head: shifted only
