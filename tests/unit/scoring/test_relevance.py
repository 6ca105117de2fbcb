"""Dense cosine fused with max-scaled BM25 (``ctxmgmt.scoring.relevance``)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import best_above_mean, fused_relevance
from ctxmgmt.scoring.vectors import normalise

TEXTS = ["my cat sleeps all day", "the weather in Lisbon", "cat food and cat toys"]


def index_of(texts: list[str]) -> BM25Index:
    index = BM25Index()
    for text in texts:
        index.add(text)
    return index


@pytest.fixture
def matrix() -> np.ndarray:
    return normalise(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]))


def test_without_lexical_weight_it_is_the_cosine(matrix) -> None:
    query = normalise(np.array([1.0, 1.0, 0.0]))[0]
    out = fused_relevance(matrix, query, index_of(TEXTS), "cat", lexical_weight=0.0)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, matrix @ query, rtol=1e-6)


def test_the_best_lexical_match_gets_the_whole_weight(matrix) -> None:
    query = normalise(np.array([0.0, 0.0, 1.0]))[0]
    index = index_of(TEXTS)
    out = fused_relevance(matrix, query, index, "cat", lexical_weight=0.5)
    lexical = index.scores("cat")
    np.testing.assert_allclose(out, matrix @ query + 0.5 * lexical / lexical.max(), rtol=1e-6)
    assert out[1] == pytest.approx(float(matrix[1] @ query))  # no shared word: cosine alone
    assert out[2] - float(matrix[2] @ query) == pytest.approx(0.5)  # "cat" twice: the maximum


def test_a_query_sharing_no_word_leaves_the_cosine(matrix) -> None:
    query = normalise(np.array([0.0, 1.0, 0.0]))[0]
    out = fused_relevance(matrix, query, index_of(TEXTS), "zebra", lexical_weight=2.0)
    np.testing.assert_allclose(out, matrix @ query, rtol=1e-6)


def test_given_cosines_are_used_instead_of_the_matrix(matrix) -> None:
    query = normalise(np.array([1.0, 0.0, 0.0]))[0]
    cosines = np.array([0.1, 0.2, 0.3])
    out = fused_relevance(matrix, query, index_of(TEXTS), "weather", lexical_weight=0.0, cosines=cosines)
    np.testing.assert_allclose(out, cosines)


def test_best_above_mean_is_the_best_few_above_the_mean_best_first_ties_to_the_earlier():
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.0, 0.2])  # mean 0.433
    assert best_above_mean(scores, 10) == [1, 3, 2]
    assert best_above_mean(scores, 2) == [1, 3]
    assert best_above_mean(np.full(4, 0.5), 3) == []  # a flat history offers nothing
    assert best_above_mean(np.zeros(0), 3) == []
