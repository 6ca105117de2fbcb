"""Every completed turn selectable at once: a fast index over the turns a strategy has not derived yet.

A long history that arrives at once (a cold start over an existing chat store, thousands of
messages in one call) takes a strategy seconds to minutes to derive with MiniLM (about 35 ms a
turn on 2 CPU cores). Meanwhile the turns it has not reached are chosen from by
:class:`BacklogIndex`: the strategy's own fast twin when it names one
(:meth:`~ctxmgmt.strategies.base.Strategy.fast_twin`: DiscourseTree's forest, TopicThread's
threads over the static encoder's turn vectors; once it holds every turn it answers alone),
else KadaneDial (the DYCP span selection of
:class:`~ctxmgmt.strategies.kadanedial.KadaneDialStrategy`) over the shipped static encoder's
vectors and BM25, which indexes about 2,000 turns a second and needs no torch. So the first
answer over a long history already holds the earlier turns its question needs, chosen the way
the memory chooses them, and the context says it is partial (``context.details["partial"]``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, runs
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy, trim_to_budget

RECENT_TURNS = 2
"""Newest waiting turns always sent with the backlog's selection (continuity: "and then?"), for
a strategy that keeps recent turns itself; KadaneDial sends its own ``keep_last`` (0 by default)."""

INDEX_SECONDS = 2.0
"""Most seconds of work one call spends indexing waiting turns, oldest first (about 4,000 turns;
a fast twin about 500 LongMemEval turns): the calling thread's CPU time (:func:`time.thread_time`),
so a busy host, where the thread waits for a core or for the background worker, indexes as many
turns as a quiet one (TopicThread's twin over a 245-turn LongMemEval user: 1.2 s on a quiet
2-core machine, 1.5-1.9 s of wall time at load 2.4). The next calls index the rest. Turns not
indexed yet are chosen from only as the newest ``recent`` turns."""

INDEX_WALL_SECONDS = 4.0
"""Most wall-clock seconds one call spends indexing, however little of them the thread ran (a host
busier than twice its cores): keeps a first answer within issue 32's 5 s on a busy host."""

INDEX_STEP = 256
"""Turns indexed per step (one static-encoder batch) between clock checks."""

TWIN_STEP = 64
"""Turns a strategy's fast twin indexes per step between clock checks (DiscourseTree's: 0.1-0.4 s
of work, by the size of its forest, so a call keeps close to :data:`INDEX_SECONDS`)."""


class BacklogIndex:
    """A fast index choosing among the turns not derived yet: the strategy's fast twin, else KadaneDial.

    Holds every completed turn of the history from the first (so spans, z-scores and topic
    trees are those of the whole conversation) and selects among those from ``first`` on.
    Built by a conversation when a backlog appears and dropped when it is gone: it keeps one
    384-float vector per turn (a twin may keep more: DiscourseTree's keeps two, and its forest).

    Args:
        token_counter: The conversation strategy's counter (turn token counts agree with it).
        questions: The bundled MiniLM when the strategy embeds with it: it embeds the questions
            (one short text, ~7 ms), which scores the static turn vectors better than their own
            questions do (:class:`~ctxmgmt.strategies.kadanedial.KadaneDialTwin`). None: the
            static encoder for both.
        recent: Newest waiting turns always sent while the index holds only part of the history;
            :data:`RECENT_TURNS`. A twin that holds every turn answers alone instead
            (:meth:`holds_all`) and keeps the newest by its own parameters (DiscourseTree: its
            active path, ``recent_turns``): on MT-Bench+ dev, 2 more turns took the token ratio
            asked at once from 0.500 to 0.564 (everything derived first: 0.491).
        twin_of: The conversation's strategy: when it names a fast twin
            (:meth:`~ctxmgmt.strategies.base.Strategy.fast_twin`, given ``questions``), the twin
            chooses, so the waiting turns are chosen the way the strategy chooses. None, or no
            twin: KadaneDial over the static encoder.

    Attributes:
        strategy: The strategy that indexes and chooses (the twin, or KadaneDial).
        twin: Whether ``strategy`` is the conversation strategy's fast twin.
        label: Which index it is, in the blocks' reasons (``"fast index"``,
            ``"fast DiscourseTree"``).
    """

    def __init__(
        self,
        token_counter: TokenCounter,
        questions: Any = None,
        *,
        recent: int = RECENT_TURNS,
        twin_of: Strategy | None = None,
    ) -> None:
        self.recent = recent
        twin = None if twin_of is None else twin_of.fast_twin(questions)
        self.strategy: Strategy
        if twin is not None:
            self.strategy = twin
            self.label = f"fast {type(twin_of).__name__.removesuffix('Strategy')}"
            self.twin = True
        else:
            # KadaneDial's twin over a source that derives nothing: static turns, MiniLM questions
            stand_in = KadaneDialStrategy(embedder="static", token_counter=token_counter)
            self.strategy = stand_in.fast_twin(questions)
            self.label = "fast index"
            self.twin = False
        self._chain = ""  # chain hash of the newest indexed turn

    def update(self, past: Sequence[Turn], chains: Sequence[str], *, seconds: float | None) -> None:
        """Index the completed turns ``past`` for at most ``seconds`` (None = all of them).

        A conversation's call passes :data:`INDEX_SECONDS`, read at each call. ``seconds`` counts
        this thread's CPU time; the wall clock stops it too, at :data:`INDEX_WALL_SECONDS` or
        ``seconds`` if longer.

        ``chains`` are their chain hashes (:meth:`ctxmgmt.session.converted.ConvertedHistory.chains`): a
        history that no longer extends the indexed one (an edit or deletion anywhere) is indexed
        anew, so the index never holds text the history lost.
        """
        done = len(self.strategy.turns)
        if done and (done > len(chains) or chains[done - 1] != self._chain):
            self.strategy.reset()
        cpu, wall = _cpu(), _wall()
        limit = math.inf if seconds is None else seconds
        ceiling = max(limit, INDEX_WALL_SECONDS)
        step = TWIN_STEP if self.twin else INDEX_STEP
        while len(self.strategy.turns) < len(past):
            done = len(self.strategy.turns)
            self.strategy.add_many(past[done : done + step])
            self._chain = chains[len(self.strategy.turns) - 1]
            if _cpu() - cpu >= limit or _wall() - wall >= ceiling:
                break

    def holds_all(self, past: Sequence[Turn]) -> bool:
        """Whether this is a strategy's fast twin and it has indexed every turn of ``past``.

        Then it answers instead of the strategy (:func:`ctxmgmt.session.selection.compose_context`):
        its own structure over the whole history, swapped for the strategy's when that has
        derived everything. A twin answering with the strategy's partial structure scored above
        both on LoCoMo dev (DiscourseTree, evidence recall asked at once 0.740 against 0.718
        derived first): the answer depended on how far derivation had got.
        """
        return self.twin and len(self.strategy.turns) == len(past)

    def select(
        self,
        query: str,
        past: Sequence[Turn],
        first: int,
        budget: int | None,
        cost: Callable[[Turn], int],
    ) -> list[Block]:
        """Blocks of the turns ``first``.. of ``past`` to send for ``query``, within ``budget`` tokens.

        The index strategy's verbatim turns (its ``"turns"`` blocks: KadaneDial's spans, a
        twin's active path and recalled turns) over the indexed turns, cut to those from
        ``first`` on, plus the newest ``recent`` turns. Over ``budget`` span edges go first, the
        lowest-scoring first when the strategy scores turns (``details["scores"]``), else the
        oldest first; the newest turns last. Chronological runs, one block each. ``cost``
        counts a turn's tokens (the conversation counts each waiting turn once).
        """
        indexed = len(self.strategy.turns)
        recent = set(range(max(first, len(past) - self.recent), len(past)))
        chosen = set(recent)
        scores: list[float] = []
        reasons: dict[int, str] = {}  # a twin's turn -> its block's reason
        if query and indexed > first:
            context = self.strategy.select(query)
            for block in context.blocks:
                if block.kind == "turns":
                    reasons.update((i, block.reason) for i in block.turns if i >= first)
            chosen |= set(reasons)
            scores = list(context.details.get("scores", []))
        if budget is not None:
            tokens = {i: cost(past[i]) for i in chosen}
            if scores:  # turns not indexed yet (the newest) go last
                top = max(scores) + 1.0
                signal = np.array([scores[i] if i < len(scores) else top for i in range(len(past))])
            else:  # no scores: the oldest go first
                signal = np.arange(len(past), dtype=float)
            trim_to_budget(chosen, signal, recent, tokens, budget)  # type: ignore[arg-type]
        blocks = []
        for run in runs(sorted(chosen)):
            if set(run) <= recent:
                why = "newest turn"
            elif self.twin:  # the twin's own reason for the run's first turn it chose
                why = f"{next((reasons[i] for i in run if reasons.get(i)), 'chosen')} ({self.label})"
            else:
                why = f"a span relevant to the question ({self.label})"
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


_cpu = time.thread_time
"""The clock of a call's indexing work: this thread's CPU seconds (tests slow or speed it)."""
_wall = time.monotonic
"""The clock of :data:`INDEX_WALL_SECONDS`."""
