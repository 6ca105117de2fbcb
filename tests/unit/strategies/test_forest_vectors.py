"""ForestVectors: one batch per add, staged vectors, the query cache, restored vectors."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import Message, Turn
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.forest_vectors import QUERY_CACHE, ForestVectors


def turn(i: int, user: str) -> Turn:
    return Turn(i, (Message("user", user), Message("assistant", "ok")))


def test_take_embeds_turns_and_their_queries_in_one_batch():
    embedder, vectors = HashingEmbedder(), ForestVectors()
    assert vectors.dimension() is None
    turns = [turn(0, "Rome in May"), turn(1, "hotels")]
    vectors.take(embedder, turns)
    assert embedder.calls == [4]  # two turns and two user messages
    assert set(vectors.contents) == {t.fingerprint for t in turns} and list(vectors.queries) == [
        "Rome in May",
        "hotels",
    ]
    assert vectors.dimension() == 256
    vectors.take(embedder, turns)
    assert embedder.calls == [4]  # all cached


def test_staged_vectors_are_used_once_then_dropped():
    embedder, vectors = HashingEmbedder(), ForestVectors()
    vectors.stage(embedder, [turn(0, "Rome")])
    assert embedder.calls == [2] and not vectors.contents
    vectors.take(embedder, [turn(0, "Rome")])
    assert embedder.calls == [2] and len(vectors.contents) == 1
    vectors.stage(embedder, [turn(1, "Paris")])
    vectors.drop_staged()
    vectors.take(embedder, [turn(1, "Paris")])
    assert embedder.calls == [2, 2, 2]  # embedded again: the staged ones were dropped


def test_the_query_cache_keeps_the_newest_used():
    embedder, vectors = HashingEmbedder(), ForestVectors()
    first = vectors.query(embedder, "q0")
    assert np.allclose(first, embedder.embed(["q0"])[0])
    for i in range(1, QUERY_CACHE + 1):
        vectors.query(embedder, f"q{i}")
        if i == QUERY_CACHE // 2:
            vectors.query(embedder, "q0")  # used again: kept
    assert len(vectors.queries) == QUERY_CACHE and "q0" in vectors.queries and "q1" not in vectors.queries
    calls = len(embedder.calls)
    assert vectors.query(embedder, "q0") is vectors.queries["q0"] and len(embedder.calls) == calls


def test_restore_checks_and_caches_the_saved_vectors():
    embedder, vectors = HashingEmbedder(dim=4), ForestVectors()
    turns = [turn(0, "a"), turn(1, "b")]
    rows = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    contents, queries = vectors.restore(embedder, {"embeddings": rows}, turns)
    assert [v.tolist() for v in queries] == rows  # saved before query vectors were kept: the turns'
    assert vectors.contents[turns[1].fingerprint].tolist() == rows[1] and embedder.calls == []
    other = {"embeddings": rows, "query_embeddings": [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]}
    assert vectors.restore(embedder, other, turns)[1][0].tolist() == [0.0, 0.0, 1.0, 0.0]
    with pytest.raises(CorruptStateError):
        ForestVectors().restore(embedder, {"embeddings": rows[:1]}, turns)
    with pytest.raises(CorruptStateError):
        ForestVectors().restore(
            embedder, {"embeddings": [[1.0, 0.0], [0.0, 1.0]]}, turns
        )  # dimension 2, not 4


def test_asked_tells_a_question_vector_from_a_turns_own():
    embedder, vectors = HashingEmbedder(), ForestVectors()
    vectors.query(embedder, "Rome in May")  # asked before the turn arrives
    assert vectors.asked("Rome in May") and not vectors.asked("hotels")
    vectors.take(embedder, [turn(0, "Rome in May"), turn(1, "hotels")])
    assert vectors.asked("Rome in May")  # its cached question vector places the turn
    assert not vectors.asked("hotels")  # embedded with the turns
    for i in range(QUERY_CACHE + 1):  # the question's vector is dropped from the cache
        vectors.query(embedder, f"question {i}")
    assert "Rome in May" not in vectors.queries and not vectors.asked("Rome in May")
