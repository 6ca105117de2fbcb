"""What an embedder is (the :class:`Embedder` protocol), how errors name one, the dimension it declares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ctxmgmt.components._coerce import component_name


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised vectors (one row per text)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in one batch; returns a float32 array of shape (len(texts), dim)."""
        ...


def embedder_name(embedder: Any) -> str:
    """How errors name ``embedder``: its ``name`` attribute if it has one, else its class name."""
    return component_name(embedder)


def embedder_dimension(embedder: Any) -> int | None:
    """The dimension ``embedder`` declares for its vectors (its ``dimension``), without embedding.

    Restored vectors are checked against it
    (:func:`~ctxmgmt.components.embedding_checks.restored_vectors`), so a stored state whose
    vectors all have another dimension is rebuilt instead of failing every query. None when the
    embedder declares none (the check is then left to the first new embedding).
    """
    try:
        dimension = getattr(embedder, "dimension", None)
    except Exception:  # noqa: BLE001 - a declared dimension that cannot be read is no declaration
        return None
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        return None
    return dimension
