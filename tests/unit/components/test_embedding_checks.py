"""The checks every vector passes: checked_vectors (new embeddings) and restored_vectors (saved ones)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ctxmgmt import ComponentError, ConfigurationError
from ctxmgmt.components.callable_embedder import CallableEmbedder
from ctxmgmt.components.embedding_checks import UNIT_TOLERANCE, checked_vectors, restored_vectors
from ctxmgmt.messages.exceptions import CorruptStateError


# -- checked_vectors --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("vectors", "count", "message"),
    [
        ([[0.1, float("nan")]], 1, "NaN or infinite values"),
        ([[0.1, 0.2], [float("inf"), 0.0]], 2, "1 of 2"),
        ([[1e300, 0.0]], 1, "NaN or infinite values (in float32)"),  # finite float64, inf as float32
        ([[0.1, 0.2]], 2, "shape (1, 2) for 2 text(s)"),
        ([[[0.1]]], 1, "shape (1, 1, 1)"),
        (np.zeros((1, 0)), 1, "dim >= 1"),
        ([0.1, 0.2], 2, "shape (2,)"),
        ([["a", "b"]], 1, "expected real numbers"),
        ([[1 + 2j, 0]], 1, "expected real numbers"),
        ([[True, False]], 1, "expected real numbers"),
        ([[0.1, 0.2], [0.3]], 2, "not an array of vectors"),
        (None, 1, "expected real numbers"),
    ],
)
def test_bad_vectors_raise_a_component_error_naming_the_embedder(
    vectors: Any, count: int, message: str
) -> None:
    with pytest.raises(ComponentError, match="'my-embedder'") as error:
        checked_vectors(vectors, count, embedder=CallableEmbedder(lambda t: t, name="my-embedder"))
    assert message in str(error.value)
    assert not isinstance(error.value, ConfigurationError)  # a component fault, not a usage mistake


def test_good_vectors_come_back_as_unit_float32_rows() -> None:
    out = checked_vectors([[3, 4], [0, 0]], 2, embedder=object(), dim=2)
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert checked_vectors(np.array([1.0, 0.0]), 1, embedder=object()).shape == (1, 2)  # one flat vector


def test_another_dimension_than_the_vectors_in_use_is_refused() -> None:
    with pytest.raises(
        ComponentError, match="returned 3-dimensional vectors; the vectors already in use have 2"
    ):
        checked_vectors([[1.0, 0.0, 0.0]], 1, embedder=object(), dim=2)


def test_restored_vectors_come_back_as_float32_arrays_unchanged() -> None:
    saved = [[0.6, 0.8], [0.0, 0.0], [1.0, 0.0]]
    out = restored_vectors(saved, 3, dim=2)
    assert [v.dtype for v in out] == [np.float32] * 3
    np.testing.assert_array_equal(np.vstack(out), np.asarray(saved, dtype=np.float32))  # nothing rescaled


def test_restored_vectors_take_the_first_dimension_when_none_is_given() -> None:
    assert [v.shape for v in restored_vectors([[1.0, 0.0, 0.0]], 1)] == [(3,)]
    with pytest.raises(CorruptStateError, match=r"\[1\] has 2 dimensions, not 3"):
        restored_vectors([[1.0, 0.0, 0.0], [1.0, 0.0]], 2)


def test_a_norm_within_the_tolerance_is_accepted() -> None:
    nearly = [1.0 + UNIT_TOLERANCE / 2, 0.0]
    assert len(restored_vectors([nearly], 1)) == 1
    with pytest.raises(CorruptStateError, match="has norm 1.002; embeddings have norm 1"):
        restored_vectors([[1.0 + 2 * UNIT_TOLERANCE, 0.0]], 1)


@pytest.mark.parametrize(
    ("values", "count", "dim", "message"),
    [
        ("not a list", 1, None, "are not a list"),
        (b"bytes", 1, None, "are not a list"),
        ({"a": 1}, 1, None, "are not a list"),
        ([[1.0, 0.0]], 2, None, "1 saved vectors for 2"),
        ([["a", "b"]], 1, None, "is not numeric"),
        ([[[1.0, 0.0]]], 1, None, "has shape (1, 2), not (dim,)"),
        ([[]], 1, None, "has shape (0,), not (dim,)"),
        ([[1.0, 0.0]], 1, 3, "has 2 dimensions, not 3"),
        ([[float("nan"), 1.0]], 1, None, "holds NaN or infinite values"),
        ([[float("inf"), 0.0]], 1, None, "holds NaN or infinite values"),
        ([[3.0, 4.0]], 1, None, "has norm 5; embeddings have norm 1"),
    ],
)
def test_bad_saved_vectors_are_a_corrupt_state(
    values: Any, count: int, dim: int | None, message: str
) -> None:
    with pytest.raises(CorruptStateError) as error:
        restored_vectors(values, count, dim=dim)
    assert message in str(error.value)


def test_messages_name_what_was_restored() -> None:
    with pytest.raises(CorruptStateError, match="saved node vectors \\[0\\] holds NaN"):
        restored_vectors([[float("nan")]], 1, what="node vectors")
