"""Picks: what a TopicThread selection takes within its token budget, and what it leaves out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ctxmgmt.messages.context import Block
from ctxmgmt.strategies.topic_thread_slot import Slot

RETRIEVED = "thread"
"""How a turn's reason names the retrieved thread it was taken from."""
FILL = "fill, thread"
"""How a turn's reason names the other thread it was taken from to fill the budget."""


@dataclass
class Picks:
    """The turns and summaries a selection has taken, the tokens left and what did not fit.

    :meth:`~ctxmgmt.strategies.topic_thread.TopicThreadStrategy.select` takes, in this order,
    the newest turns (:meth:`take_recent`), the retrieved threads' summaries
    (:meth:`take_summaries`), their most relevant turns and then, to fill the budget, the
    other threads' (:meth:`take_thread_turns`). No message is cut: a turn with ``user_part``
    goes in as its user message(s) first and gets its reply back by :meth:`restore_replies`;
    any other turn that does not fit whole is left out.

    Attributes:
        remaining: Tokens left of the budget (None: no budget).
        turns: Turns shown verbatim and whole.
        reasons: Why each turn taken for its relevance is shown.
        filled: Turns of threads that were not retrieved, taken to fill the budget.
        dropped: What the budget left out, in words.
        user_part: Turn -> tokens of its user message(s) when it may go without its reply
            (:meth:`~ctxmgmt.strategies.base.Strategy.long_user_part`), else None; None: never.
        user_only: Turns shown as their user message(s) alone -> those tokens.
    """

    remaining: int | None
    turns: set[int] = field(default_factory=set)
    reasons: dict[int, str] = field(default_factory=dict)
    filled: list[int] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    user_part: Callable[[int], int | None] | None = None
    user_only: dict[int, int] = field(default_factory=dict)

    def fits(self, cost: int) -> bool:
        """Whether ``cost`` tokens fit in what is left."""
        return self.remaining is None or cost <= self.remaining

    def spend(self, cost: int) -> None:
        """Take ``cost`` tokens from what is left."""
        self.remaining = None if self.remaining is None else self.remaining - cost

    def take_recent(self, recent: Sequence[int], costs: Sequence[int]) -> None:
        """Take the turns ``recent``, newest first, each if it fits (``costs``: tokens per turn)."""
        for i in reversed(recent):
            if self.fits(costs[i]):
                self.turns.add(i)
                self.spend(costs[i])
            else:
                self.dropped.append(f"recent turn {i}")

    def take_summaries(
        self, summaries: Sequence[tuple[Slot, Block]], room: int | None
    ) -> list[tuple[Slot, Block]]:
        """The summaries taken, in the order given, each if it fits the budget and ``room``.

        Args:
            summaries: Each thread with its summary block, best thread first.
            room: Most tokens all summaries together may take (None: no limit).
        """
        share = Picks(room)
        taken: list[tuple[Slot, Block]] = []
        for slot, block in summaries:
            if self.fits(block.tokens) and share.fits(block.tokens):
                taken.append((slot, block))
                self.spend(block.tokens)
                share.spend(block.tokens)
            else:
                self.dropped.append(f"summary of thread {slot.id} ({block.tokens} tokens)")
        return taken

    def take_thread_turns(
        self,
        slots: Sequence[Slot],
        relevance: np.ndarray,
        costs: Sequence[int],
        *,
        per_thread: int,
        label: str = RETRIEVED,
        floor: float = -np.inf,
    ) -> None:
        """Take the most relevant turns of ``slots`` that fit, most relevant first.

        Args:
            slots: The threads whose turns are candidates.
            relevance: Relevance of every turn to the query.
            costs: Tokens of every turn.
            per_thread: Most candidates per thread (its most relevant turns not yet taken).
            label: How the reason names the thread: :data:`RETRIEVED` (a retrieved thread)
                or :data:`FILL` (any other label): its turns are ``filled`` and what does not
                fit is not reported as dropped.
            floor: Only turns more relevant than this are candidates.
        """
        candidates: list[tuple[float, int, int]] = []
        for slot in slots:
            ranked = sorted(slot.turns, key=lambda i: (-relevance[i], i))
            best = [
                i for i in ranked if i not in self.turns and i not in self.user_only and relevance[i] > floor
            ]
            candidates.extend((float(relevance[i]), i, slot.id) for i in best[:per_thread])
        for score, i, slot_id in sorted(candidates, key=lambda c: (-c[0], c[1])):
            if i in self.turns or i in self.user_only:
                continue
            part = None if self.user_part is None else self.user_part(i)
            if self.fits(costs[i] if part is None else part):
                if part is None:
                    self.turns.add(i)
                else:
                    self.user_only[i] = part
                self.reasons[i] = f"{label} {slot_id} (relevance {score:.2f})"
                self.spend(costs[i] if part is None else part)
                if label != RETRIEVED:
                    self.filled.append(i)
            elif label == RETRIEVED:
                self.dropped.append(f"turn {i} of thread {slot_id}")

    def restore_replies(self, relevance: np.ndarray, costs: Sequence[int]) -> None:
        """Turns taken as their user message alone get their reply back, most relevant first, if it fits."""
        for i in sorted(self.user_only, key=lambda i: (-relevance[i], i)):
            extra = costs[i] - self.user_only[i]
            if self.fits(extra):
                del self.user_only[i]
                self.turns.add(i)
                self.spend(extra)
