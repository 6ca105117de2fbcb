"""RowStack: vectors appended one by one, read as the matrix np.vstack would build."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.scoring.rows import RowStack


def test_matrix_equals_vstack_through_growth_and_clear():
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(5).astype(np.float32) for _ in range(70)]
    stack = RowStack()
    assert stack.matrix().shape == (0, 0) and len(stack) == 0
    seen = []
    for k in range(0, 70, 7):
        earlier = stack.matrix()
        stack.extend(rows[k : k + 7])
        assert earlier.shape[0] == k  # a matrix read before an append keeps its rows
        np.testing.assert_array_equal(stack.matrix(), np.vstack(rows[: k + 7]))
        seen.append(stack.matrix())
    np.testing.assert_array_equal(seen[0], np.vstack(rows[:7]))
    stack.clear()
    assert len(stack) == 0 and stack.matrix().shape == (0, 0)


def test_dtype_and_dimension_checks():
    stack = RowStack(np.float64)
    stack.extend([np.ones(3, dtype=np.float32)])
    assert stack.matrix().dtype == np.float64
    with pytest.raises(ValueError):
        stack.extend([np.ones(4)])
