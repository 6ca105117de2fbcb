"""Every completed turn selectable at once: a fast index over the turns a strategy has not derived yet.

A long history that arrives at once (a cold start over an existing chat store, thousands of
messages in one call) takes a strategy seconds to minutes to derive with MiniLM (about 35 ms a
turn on 2 CPU cores). Meanwhile the turns it has not reached are chosen from by
:class:`BacklogIndex`: KadaneDial (the DYCP span selection of
:class:`~ctxmgmt.strategies.kadanedial.KadaneDialStrategy`) over the shipped static encoder's
vectors and BM25, which indexes about 2,000 turns a second and needs no torch. So the first
answer over a long history already holds the earlier turns its question needs, and the context
says it is partial (``context.details["partial"]``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, runs
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy, trim_to_budget

RECENT_TURNS = 2
"""Newest waiting turns always sent with the backlog's selection (continuity: "and then?"), for
a strategy that keeps recent turns itself; KadaneDial sends its own ``keep_last`` (0 by default)."""

INDEX_SECONDS = 2.0
"""Most seconds one call spends indexing waiting turns, oldest first (about 4,000 turns); the
next calls index the rest. Turns not indexed yet are chosen from only as the newest
``recent`` turns."""

INDEX_STEP = 256
"""Turns indexed per step (one static-encoder batch) between clock checks."""

QUESTION_TAU = 0.42
"""KadaneDial's gain shift when questions are embedded by MiniLM. LoCoMo dev, every turn waiting:
evidence recall 0.913 at 12.6% of the history's tokens (0.46: 0.909 at 11.8%; static questions
and the default 0.52: 0.905 at 13.2%); MiniLM over every turn, derived first: 0.921 at 11.9%."""


class BacklogIndex:
    """KadaneDial over the static encoder and BM25, choosing among the turns not derived yet.

    Holds every completed turn of the history from the first (so spans and z-scores are those
    of the whole conversation) and selects among those from ``first`` on. Built by a
    conversation when a backlog appears and dropped when it is gone: it keeps one 384-float
    vector per turn.

    Args:
        token_counter: The conversation strategy's counter (turn token counts agree with it).
        questions: The bundled MiniLM when the strategy embeds with it: it embeds the questions
            (one short text, ~7 ms), which scores the static turn vectors better than their own
            questions do (:data:`QUESTION_TAU`). None: the static encoder for both.
        recent: Newest waiting turns always sent; :data:`RECENT_TURNS`.
    """

    def __init__(
        self, token_counter: TokenCounter, questions: Any = None, *, recent: int = RECENT_TURNS
    ) -> None:
        self.recent = recent
        if questions is None:
            self.strategy = KadaneDialStrategy(embedder="static", token_counter=token_counter)
        else:
            self.strategy = KadaneDialStrategy(
                embedder=_StaticTurns(questions), token_counter=token_counter, tau=QUESTION_TAU
            )
        self._chain = ""  # chain hash of the newest indexed turn

    def update(
        self, past: Sequence[Turn], chains: Sequence[str], *, seconds: float | None = INDEX_SECONDS
    ) -> None:
        """Index the completed turns ``past`` (for at most ``seconds``; None = all of them).

        ``chains`` are their chain hashes (:meth:`ctxmgmt.session.converted.ConvertedHistory.chains`): a
        history that no longer extends the indexed one (an edit or deletion anywhere) is indexed
        anew, so the index never holds text the history lost.
        """
        done = len(self.strategy.turns)
        if done and (done > len(chains) or chains[done - 1] != self._chain):
            self.strategy.reset()
        start = time.monotonic()
        while len(self.strategy.turns) < len(past):
            done = len(self.strategy.turns)
            self.strategy.add_many(past[done : done + INDEX_STEP])
            self._chain = chains[len(self.strategy.turns) - 1]
            if seconds is not None and time.monotonic() - start >= seconds:
                break

    def select(
        self,
        query: str,
        past: Sequence[Turn],
        first: int,
        budget: int | None,
        cost: Callable[[Turn], int],
    ) -> list[Block]:
        """Blocks of the turns ``first``.. of ``past`` to send for ``query``, within ``budget`` tokens.

        KadaneDial's spans over the indexed turns, cut to those from ``first`` on, plus the
        newest ``recent`` turns; over ``budget`` the lowest-scoring span edges go first (the
        newest turns last). Chronological runs, one block each. ``cost`` counts a turn's tokens
        (the conversation counts each waiting turn once).
        """
        indexed = len(self.strategy.turns)
        recent = set(range(max(first, len(past) - self.recent), len(past)))
        chosen = set(recent)
        scores: list[float] = []
        if query and indexed > first:
            context = self.strategy.select(query)
            chosen |= {i for block in context.blocks for i in block.turns if i >= first}
            scores = list(context.details.get("scores", []))
        if budget is not None:
            tokens = {i: cost(past[i]) for i in chosen}
            top = max(scores, default=0.0) + 1.0  # turns not indexed yet (the newest) go last
            signal = np.array([scores[i] if i < len(scores) else top for i in range(len(past))])
            trim_to_budget(chosen, signal, recent, tokens, budget)  # type: ignore[arg-type]
        blocks = []
        for run in runs(sorted(chosen)):
            why = "newest turn" if set(run) <= recent else "a span relevant to the question (fast index)"
            blocks.append(
                Block(
                    "turns",
                    turns=tuple(run),
                    messages=tuple(m for i in run for m in past[i].messages),
                    tokens=sum(cost(past[i]) for i in run),
                    reason=f"not derived yet: {why}",
                )
            )
        return blocks


class _StaticTurns:
    """Turns embedded by the static encoder, questions by ``questions``.

    The static encoder's vectors were fitted to MiniLM's space, so MiniLM questions score them.
    """

    def __init__(self, questions: Any) -> None:
        from ctxmgmt.components.static_embedder import static_embedder

        self.turns = static_embedder()
        self.questions = questions
        self.name = f"{self.turns.name}+{getattr(questions, 'name', 'questions')}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.turns.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """``text`` by ``questions``: embedded once per call with the strategy's (:func:`shared_queries`)."""
        from ctxmgmt.components.embedder import embed_query

        return embed_query(self.questions, text)
