"""Vectors appended one by one and read as one stacked matrix, without stacking them again."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class RowStack:
    """Rows of one dimension in a buffer whose capacity doubles; :meth:`matrix` is a view.

    ``np.vstack`` of every turn vector after each added turn copies the whole history
    (15 MB at 10,000 turns of 384 floats); appending here costs one row copy (amortised), so
    reading the matrix after a turn no longer grows with the history.

    Args:
        dtype: Element type of the matrix (float32 by default).
    """

    def __init__(self, dtype: type[np.floating] = np.float32) -> None:
        self.dtype = dtype
        self._buffer = np.zeros((0, 0), dtype=dtype)
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def extend(self, rows: Iterable[np.ndarray]) -> None:
        """Append ``rows`` (1-d vectors of the dimension of the rows already held)."""
        for row in rows:
            row = np.asarray(row, dtype=self.dtype).reshape(-1)
            if self._rows == len(self._buffer):
                grown = np.zeros((max(16, 2 * self._rows), row.shape[0]), dtype=self.dtype)
                if self._rows:
                    grown[: self._rows] = self._buffer[: self._rows]
                self._buffer = grown
            self._buffer[self._rows] = row  # raises on another dimension, like vstack
            self._rows += 1

    def matrix(self) -> np.ndarray:
        """The rows as an array of shape (rows, dim); (0, 0) when empty. A view: do not write to it."""
        return self._buffer[: self._rows] if self._rows else np.zeros((0, 0), dtype=self.dtype)

    def clear(self) -> None:
        """Drop every row (the buffer is released)."""
        self._buffer = np.zeros((0, 0), dtype=self.dtype)
        self._rows = 0
