"""StaticTurns: turns by the shipped static encoder, questions by another embedder."""

from __future__ import annotations

import numpy as np

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.components.static_embedder import static_embedder
from ctxmgmt.components.static_turns import (
    STATIC_COSINE_MAP,
    STATIC_PAIR_COSINE_MAP,
    STATIC_TURNS_COSINE_MAP,
    StaticTurns,
    map_cosines,
)


def test_turns_go_to_the_static_encoder_and_questions_to_their_own_embedder() -> None:
    questions = HashingEmbedder(dim=384)
    embedder = StaticTurns(questions)
    assert isinstance(embedder, Embedder)
    assert embedder.turns is static_embedder() and embedder.questions is questions
    vectors = embedder.embed(["car exhaust", "garden tomatoes"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert np.allclose(vectors, static_embedder().embed(["car exhaust", "garden tomatoes"]))
    assert questions.calls == []  # turns never reach the question embedder
    query = embedder.embed_query("car exhaust")
    assert query.shape == (1, 384) and questions.calls == [1]
    assert np.allclose(query, questions.embed(["car exhaust"]))


def test_its_name_joins_both_names() -> None:
    named = HashingEmbedder(dim=384)
    named.name = "minilm"
    assert StaticTurns(named).name == f"{static_embedder().name}+minilm"
    assert StaticTurns(object()).name.endswith("+questions")  # unnamed


def test_max_tokens_pools_only_the_start_of_a_turn() -> None:
    questions = HashingEmbedder(dim=384)
    start, rest = "car exhaust", " and the garden tomatoes ripened late this summer"
    pieces = len(static_embedder().model.token_ids(start))
    short = StaticTurns(questions, max_tokens=pieces)
    assert short.turns is static_embedder(pieces) and short.turns is not static_embedder()
    assert StaticTurns(questions).turns is static_embedder()
    assert np.allclose(short.embed([start + rest]), short.embed([start]))
    assert not np.allclose(StaticTurns(questions).embed([start + rest]), static_embedder().embed([start]))
    assert short.name == f"{static_embedder().name}/{pieces}+questions"


def test_the_projection_is_the_static_encoders_and_named() -> None:
    questions = HashingEmbedder(dim=384)
    turns = StaticTurns(questions, projection="turns")
    assert turns.turns is static_embedder(projection="turns") and turns.name.endswith("+questions")
    assert "+turns@" in turns.name and "+turns@" not in StaticTurns(questions).name
    shipped = static_embedder(projection="turns")
    assert np.allclose(turns.embed(["car exhaust"]), shipped.embed(["car exhaust"]))


def test_map_cosines_puts_them_on_another_scale_or_leaves_them() -> None:
    cosines = np.array([0.0, 0.5, 1.0], dtype=np.float32)
    assert map_cosines(cosines, None) is cosines
    mapped = map_cosines(cosines, (2.0, -0.5))
    assert mapped.dtype == np.float64 and np.allclose(mapped, [-0.5, 0.5, 1.5])


def test_static_cosines_read_on_minilms_scale() -> None:
    # the static encoder rates two messages more alike than MiniLM, a question and a turn less
    pair_scale, pair_shift = STATIC_PAIR_COSINE_MAP
    question_scale, question_shift = STATIC_COSINE_MAP
    assert pair_scale > 0 and pair_shift < 0 and question_scale > 0 and question_shift > 0
    assert STATIC_TURNS_COSINE_MAP[0] > 0 and STATIC_TURNS_COSINE_MAP[1] > 0
