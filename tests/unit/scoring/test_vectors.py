"""Unit rows and row dot products (``ctxmgmt.scoring.vectors``)."""

from __future__ import annotations

import numpy as np

from ctxmgmt.components import embedder
from ctxmgmt.scoring.vectors import dot_rows, normalise


def test_normalise_rows() -> None:
    out = normalise(np.array([[3.0, 4.0], [0.0, 0.0], [-2.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]], rtol=1e-6)


def test_normalise_one_dimensional_and_lists() -> None:
    out = normalise([1.0, 1.0, 1.0, 1.0])
    assert out.shape == (1, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0], rtol=1e-6)


def test_normalise_random_rows_have_unit_norm() -> None:
    vectors = np.random.default_rng(0).normal(size=(20, 7)) * 100
    out = normalise(vectors)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), np.ones(20), rtol=1e-5)
    # Direction is kept.
    np.testing.assert_allclose(out * np.linalg.norm(vectors, axis=1, keepdims=True), vectors, rtol=1e-4)


def test_normalise_does_not_modify_its_input() -> None:
    vectors = np.array([[3.0, 4.0]], dtype=np.float32)
    normalise(vectors)
    np.testing.assert_array_equal(vectors, [[3.0, 4.0]])


def test_dot_rows_is_the_matrix_vector_product() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(50, 8)).astype(np.float32)
    vector = rng.normal(size=8).astype(np.float32)
    out = dot_rows(matrix, vector)
    assert out.shape == (50,)
    np.testing.assert_allclose(out, matrix @ vector, rtol=1e-5, atol=1e-6)


def test_dot_rows_of_unit_rows_are_cosines() -> None:
    matrix = normalise(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]]))
    out = dot_rows(matrix, normalise(np.array([1.0, 0.0]))[0])
    np.testing.assert_allclose(out, [1.0, np.sqrt(0.5), 0.0], atol=1e-6)


def test_dot_rows_of_no_rows_is_empty() -> None:
    assert dot_rows(np.zeros((0, 4)), np.ones(4)).shape == (0,)


def test_normalise_stays_importable_from_the_embedder_module() -> None:
    assert embedder.normalise is normalise
