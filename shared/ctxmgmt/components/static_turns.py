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
from ctxmgmt.components.static_embedder import static_embedder

__all__ = ["StaticTurns"]


class StaticTurns:
    """An embedder whose documents (turns) go to the static encoder and queries to ``questions``.

    ``embed`` (turns, and a discourse tree's user messages when it places a turn) is the static
    encoder's; ``embed_query`` (the question a call asks) is ``questions``'s, embedded once per
    call however many readers ask (:func:`~ctxmgmt.components.embedding_calls.shared_queries`).

    Args:
        questions: The embedder of the questions, usually the bundled MiniLM (any Embedder).

    Attributes:
        turns: The static encoder (:func:`~ctxmgmt.components.static_embedder.static_embedder`).
        questions: ``questions``.
        name: ``"<static encoder>+<questions' name>"`` (``+questions`` when it has none).
    """

    def __init__(self, questions: Any) -> None:
        self.turns = static_embedder()
        self.questions = questions
        self.name = f"{self.turns.name}+{getattr(questions, 'name', 'questions')}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The static encoder's vectors of ``texts``; shape (len(texts), 384)."""
        return self.turns.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """``text`` embedded by ``questions`` (its query path when it has one); shape (1, dim)."""
        return embed_query(self.questions, text)
