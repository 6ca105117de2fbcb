"""The checks every vector passes: new embeddings and saved ones, before anything uses them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.embedder_protocol import embedder_name
from ctxmgmt.messages.exceptions import ComponentError, CorruptStateError
from ctxmgmt.scoring.vectors import normalise


def checked_vectors(vectors: Any, count: int, *, embedder: Any, dim: int | None = None) -> np.ndarray:
    """What ``embedder`` returned for ``count`` texts, checked, as unit-norm float32 rows.

    Every embedding reaches a strategy through this check, before anything is cached, so a
    faulty embedder is reported as such and never leaves a bad vector behind.

    Args:
        vectors: The embedder's output: an array-like of shape (count, dim); a flat vector
            counts as one row when ``count`` is 1.
        count: How many texts were embedded.
        embedder: The embedder (named in the error).
        dim: The dimension the vectors must have (that of the vectors already in use);
            None accepts any dimension >= 1.

    Returns:
        float32 array of shape (count, dim), rows scaled to unit L2 norm (zero rows stay zero).

    Raises:
        ComponentError: not a numeric array, not ``count`` rows of one dimension >= 1, another
            dimension than ``dim``, or a NaN or infinite value (also after the float32 cast).
    """
    where = f"embedder {embedder_name(embedder)!r}"
    try:
        array = np.asarray(vectors)
    except (TypeError, ValueError) as exc:  # ragged rows, unconvertible objects
        raise ComponentError(f"{where} returned something that is not an array of vectors: {exc}") from exc
    if array.dtype.kind not in "iuf":
        raise ComponentError(f"{where} returned {array.dtype} values; expected real numbers")
    if array.ndim == 1 and count == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] != count or array.shape[1] < 1:
        raise ComponentError(
            f"{where} returned an array of shape {array.shape} for {count} text(s); "
            f"expected ({count}, dim) with dim >= 1"
        )
    if dim is not None and array.shape[1] != dim:
        raise ComponentError(
            f"{where} returned {array.shape[1]}-dimensional vectors; the vectors already in use have {dim}"
        )
    with np.errstate(over="ignore"):
        array = array.astype(np.float32)
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array).all(axis=1)).sum())
        raise ComponentError(
            f"{where} returned NaN or infinite values (in float32) for {bad} of {count} text(s)"
        )
    return normalise(array)


UNIT_TOLERANCE = 1e-3
"""How far from 1 the L2 norm of a restored vector may be (float32 rounding is ~1e-7)."""


def restored_vectors(
    values: Any, count: int, *, dim: int | None = None, what: str = "vectors"
) -> list[np.ndarray]:
    """Saved vectors, checked as new embeddings are before anything uses them.

    The checks of :func:`checked_vectors` plus what it guarantees of its output: ``count``
    one-dimensional numeric vectors of one dimension (``dim`` if given: that of the vectors
    already in use), finite, each of unit L2 norm or all zero (within :data:`UNIT_TOLERANCE`).
    Nothing is rescaled, so a restored state selects exactly as the state that was saved.

    Args:
        values: The saved vectors (arrays or lists of numbers).
        count: How many there must be (one per restored turn, node, ...).
        dim: The dimension they must have; None: that of the first one.
        what: How messages name them.

    Returns:
        The vectors as float32 arrays.

    Raises:
        CorruptStateError: any check fails (the caller's state is then rebuilt).
    """
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise CorruptStateError(f"saved {what} are not a list")
    if len(values) != count:
        raise CorruptStateError(f"{len(values)} saved {what} for {count}")
    out: list[np.ndarray] = []
    for i, value in enumerate(values):
        try:
            vector = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptStateError(f"saved {what} [{i}] is not numeric: {exc}") from None
        if vector.ndim != 1 or vector.shape[0] < 1:
            raise CorruptStateError(f"saved {what} [{i}] has shape {vector.shape}, not (dim,)")
        if dim is None:
            dim = int(vector.shape[0])
        if vector.shape[0] != dim:
            raise CorruptStateError(f"saved {what} [{i}] has {vector.shape[0]} dimensions, not {dim}")
        if not np.isfinite(vector).all():
            raise CorruptStateError(f"saved {what} [{i}] holds NaN or infinite values")
        norm = float(np.linalg.norm(vector.astype(np.float64)))
        if norm != 0.0 and abs(norm - 1.0) > UNIT_TOLERANCE:
            raise CorruptStateError(f"saved {what} [{i}] has norm {norm:.4g}; embeddings have norm 1")
        out.append(vector)
    return out
