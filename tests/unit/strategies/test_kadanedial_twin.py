"""KadaneDialTwin: KadaneDial over static turn vectors, the same however far its source has derived."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import KadaneDialStrategy, Message, group_turns
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.static_turns import STATIC_TURNS_COSINE_MAP, StaticTurns
from ctxmgmt.scoring.kadane import TUNED_TAU
from ctxmgmt.scoring.vectors import dot_rows
from ctxmgmt.strategies.kadanedial import QUESTION_TAU_SHIFT, KadaneDialTwin
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
    assert twin.embedder.turns.projection == "turns"  # the projection fitted on turns
    assert strategy.fast_twin().tau_shift == 0.0  # static questions: tau as given
    assert len(strategy) == 0 and len(twin) == 0


@pytest.mark.parametrize("derived", [0, 1, 16, 24])  # 24: every turn
def test_the_twin_chooses_the_same_however_far_its_source_has_derived(turns, derived) -> None:
    questions = HashingEmbedder(dim=384)
    waiting = twin_of(source(turns, 0), turns, questions).select(QUESTION)
    strategy = source(turns, 0)
    twin = twin_of(strategy, turns, questions)
    strategy.add_many(turns[:derived])
    mine = twin.select(QUESTION)
    assert mine.turn_indices == waiting.turn_indices and mine.turn_indices
    assert mine.details["relevance"] == pytest.approx(waiting.details["relevance"])
    assert mine.details["tau"] == waiting.details["tau"]


def test_the_twin_is_kadanedial_over_mapped_static_cosines(turns) -> None:
    questions = HashingEmbedder(dim=384)
    twin = twin_of(source(turns, 0), turns, questions)
    plain = KadaneDialStrategy(
        embedder=StaticTurns(questions, projection="turns"),
        token_counter=words,
        tau=TUNED_TAU + QUESTION_TAU_SHIFT,
    )
    plain.add_many(turns)
    scale, shift = STATIC_TURNS_COSINE_MAP
    plain.cosines = lambda vector: dot_rows(plain.matrix, vector).astype(np.float64) * scale + shift
    mine, theirs = twin.select(QUESTION), plain.select(QUESTION)
    assert mine.turn_indices == theirs.turn_indices
    assert mine.details["relevance"] == pytest.approx(theirs.details["relevance"])
    assert mine.details["tau"] == pytest.approx(TUNED_TAU + QUESTION_TAU_SHIFT)
    static = twin_of(source(turns, 0), turns)  # static questions: the plain cosines and tau
    assert static.cosine_map is None and static.select(QUESTION).details["tau"] == TUNED_TAU
