"""Relevance of past turns to a query: dense cosine fused with a max-scaled BM25 score.

One function, shared by the strategies that rank turns (KadaneDial's turn scores,
TopicThread's verbatim-turn ranking), so both fuse the two signals the same way.
"""

from __future__ import annotations

import numpy as np

from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.vectors import dot_rows

LEXICAL_WEIGHT = 0.3
"""Weight of the max-scaled BM25 score added to the cosine score (KadaneDial's, tuned on LoCoMo dev)."""


def best_above_mean(scores: np.ndarray, count: int) -> list[int]:
    """The (at most) ``count`` best turns by ``scores`` that score above the mean, best first.

    Ties go to the earlier turn. The mean keeps a short or flat history from offering turns
    unrelated to the query (a long turn's user message offered with what a budget leaves:
    :data:`ctxmgmt.scoring.vector_text.USER_PART_RANKS`).
    """
    if not len(scores):
        return []
    floor = float(scores.mean())
    return [int(i) for i in np.argsort(-scores, kind="stable")[:count] if scores[i] > floor]


def fused_relevance(
    matrix: np.ndarray,
    query_vector: np.ndarray,
    index: BM25Index,
    query: str,
    *,
    lexical_weight: float,
    cosines: np.ndarray | None = None,
) -> np.ndarray:
    """``r_i = cos(query, turn_i) + lexical_weight * bm25_i / max(bm25)``, as float64.

    Args:
        matrix: Unit-norm turn embeddings, one row per turn (the dot product is the cosine;
            it is taken in the arrays' own dtype).
        query_vector: The unit-norm query embedding.
        index: BM25 index whose document ``i`` is turn ``i``.
        query: The query text (for BM25).
        lexical_weight: Weight of the BM25 score scaled to [0, 1] by its maximum; 0 (or no
            turn sharing a word with the query) leaves the cosine alone.
        cosines: ``dot_rows(matrix, query_vector)`` when the caller has it already (None:
            computed here).

    Example:
        >>> index = BM25Index()
        >>> for text in ("my cat sleeps", "the weather"):
        ...     index.add(text)
        >>> matrix = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> fused_relevance(matrix, np.array([0.6, 0.8]), index, "cat", lexical_weight=0.5).tolist()
        [1.1, 0.8]
    """
    dense = dot_rows(matrix, query_vector) if cosines is None else cosines
    if lexical_weight:
        lexical = index.scores(query)
        top = lexical.max()
        if top > 0:
            dense = dense + lexical_weight * lexical / top
    return np.asarray(dense, dtype=np.float64)
