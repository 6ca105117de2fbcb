"""Turns by the static encoder, questions by another embedder: the embedder of a fast twin.

A strategy that embeds with the bundled MiniLM spends about 35 ms a turn (2 CPU cores); the
shipped static encoder (:mod:`ctxmgmt.components.static_embedder`) about 0.5 ms. Its vectors were
fitted to MiniLM's space, so a question embedded by MiniLM (one short text, ~7 ms) scores them,
and better than the static encoder's own question vector does. :class:`StaticTurns` pairs the
two: the fast index over turns not derived yet (:mod:`ctxmgmt.session.backlog`) and a strategy's
fast twin (:meth:`ctxmgmt.strategies.base.Strategy.fast_twin`) embed with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.embedding_calls import embed_query
from ctxmgmt.components.static_embedder import MAX_TOKENS, static_embedder

__all__ = [
    "STATIC_COSINE_MAP",
    "STATIC_PAIR_COSINE_MAP",
    "STATIC_TURNS_COSINE_MAP",
    "TWIN_TURN_TOKENS",
    "CosineMap",
    "StaticTurns",
    "map_cosines",
]

CosineMap = tuple[float, float]
"""(scale, shift) taking a cosine ``c`` to ``c * scale + shift``: another encoder's scale."""

TWIN_TURN_TOKENS = 128
"""Word pieces of a turn the static encoder pools in DiscourseTree's and TopicThread's fast twins
when they stand in for MiniLM. Its mean over a whole long turn (a short user message and a reply
of 1,770 characters, the median in an assistant chat) is mostly the reply's generic words; MiniLM
reads only the first 256 word pieces. Twins' evidence recall on LongMemEval dev at 4,000
tokens (DiscourseTree / TopicThread; top-k BM25 0.903): 512 (the encoder's default) 0.852 / 0.862,
254 0.880 / 0.831, 192 0.903 / 0.908, 160 0.900 / 0.936, 128 0.919 / 0.932, 96 0.897 / 0.924,
64 0.868 / 0.880. On LoCoMo and MT-Bench+ dev (short turns) they move by 0.012 at most
(docs/results.md)."""

STATIC_COSINE_MAP: CosineMap = (1.147, 0.042)
"""Takes the cosine of a MiniLM question and a turn's static-encoder vector to MiniLM's cosine of
the two: their means and standard deviations matched on LoCoMo dev (4 dialogues, 240
questions, every turn: static 0.156 +/- 0.094, MiniLM 0.221 +/- 0.108, correlation 0.76).
Scored on MiniLM's scale, the static vectors take thresholds tuned with MiniLM as MiniLM's do."""

STATIC_TURNS_COSINE_MAP: CosineMap = (1.043, 0.044)
""":data:`STATIC_COSINE_MAP` for turn vectors of the static encoder's ``"turns"`` projection
(:data:`~ctxmgmt.components.static_embedder.PROJECTIONS`; KadaneDial's fast twin): means and
standard deviations matched on LoCoMo dev, all 584 questions and every turn (static 0.241 +/-
0.111, MiniLM 0.295 +/- 0.116, correlation 0.81; the model's own projection, measured the same
way: 0.189 +/- 0.093, correlation 0.74)."""

STATIC_PAIR_COSINE_MAP: CosineMap = (1.084, -0.130)
"""Takes the cosine of two user messages' static-encoder vectors (first
:data:`TWIN_TURN_TOKENS` word pieces) to MiniLM's cosine of the two: means and standard
deviations matched over pairs of user messages within a conversation, the mean of the fits on
LoCoMo dev (static 0.359 +/- 0.128, MiniLM 0.244 +/- 0.138: 1.076, -0.142) and MT-Bench+ dev
(0.228 +/- 0.171, 0.132 +/- 0.186: 1.091, -0.117). The static encoder rates two messages more
alike than MiniLM does, so a twin's forest read with MiniLM's thresholds unmapped joins topics
that MiniLM's keeps apart. LongMemEval dev's pairs fit 0.853, -0.136; a fit over all three
splits (1.059, -0.143) took DiscourseTree's twin there from 0.934 to 0.905 (docs/results.md)."""


def map_cosines(cosines: np.ndarray, cosine_map: CosineMap | None) -> np.ndarray:
    """``cosines`` through ``cosine_map`` (float64); as they are when it is None."""
    if cosine_map is None:
        return cosines
    scale, shift = cosine_map
    return np.asarray(cosines, dtype=np.float64) * scale + shift


class StaticTurns:
    """An embedder whose documents (turns) go to the static encoder and queries to ``questions``.

    ``embed`` (turns, and a discourse tree's user messages when it places a turn) is the static
    encoder's; ``embed_query`` (the question a call asks) is ``questions``'s, embedded once per
    call however many readers ask (:func:`~ctxmgmt.components.embedding_calls.shared_queries`).

    Args:
        questions: The embedder of the questions, usually the bundled MiniLM (any Embedder).
        max_tokens: Word pieces of a turn the static encoder pools;
            :data:`~ctxmgmt.components.static_embedder.MAX_TOKENS` (512), the encoder's own.
        projection: The static encoder's map into MiniLM's space
            (:data:`~ctxmgmt.components.static_embedder.PROJECTIONS`); ``"utterances"``, its own.

    Attributes:
        turns: The static encoder (:func:`~ctxmgmt.components.static_embedder.static_embedder`).
        questions: ``questions``.
        name: ``"<static encoder>+<questions' name>"`` (``+questions`` when it has none).
    """

    def __init__(
        self, questions: Any, *, max_tokens: int = MAX_TOKENS, projection: str = "utterances"
    ) -> None:
        self.turns = static_embedder(max_tokens, projection)
        self.questions = questions
        self.name = f"{self.turns.name}+{getattr(questions, 'name', 'questions')}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The static encoder's vectors of ``texts``; shape (len(texts), 384)."""
        return self.turns.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """``text`` embedded by ``questions`` (its query path when it has one); shape (1, dim)."""
        return embed_query(self.questions, text)
