"""Vector helpers every embedder shares: unit rows, and row dot products without BLAS threads.

Also importable from :mod:`ctxmgmt.components.embedder`.
"""

from __future__ import annotations

import numpy as np


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def dot_rows(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` (one dot product per row) without waking BLAS threads.

    numpy's ``@`` hands a matrix-vector product of a few hundred rows to OpenBLAS's thread
    pool, whose threads keep spinning after it returns and take the CPU from the next
    torch forward pass: on 2 cores a query embedding went from 10 ms to 35 ms after one
    such product. ``einsum`` runs the same product single-threaded (2 ms for 10,000 rows).
    """
    return np.einsum("ij,j->i", matrix, vector)
