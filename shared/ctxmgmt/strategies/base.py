"""The :class:`Strategy` base: incremental ``add`` of turns, ``select`` of a context."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ctxmgmt.budget import turn_tokens
from ctxmgmt.components.tokens import CachedTokenCounter, TokenCounter, as_token_counter
from ctxmgmt.context import Context
from ctxmgmt.types import Turn


class Strategy(ABC):
    """A context-selection method over the completed turns of one conversation.

    ``add``/``add_many`` receive completed turns in order and update derived state
    incrementally; ``select`` chooses what to show for a query. Turns are re-indexed to
    their position in the strategy (0-based).
    """

    name: ClassVar[str] = "strategy"

    def __init__(self, *, token_counter: TokenCounter | Any = None) -> None:
        self.token_counter = CachedTokenCounter(as_token_counter(token_counter))
        self._turns: list[Turn] = []
        self._turn_tokens: list[int] = []

    @property
    def turns(self) -> tuple[Turn, ...]:
        """Turns added so far, in order."""
        return tuple(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def add(self, turn: Turn) -> None:
        """Add one completed turn."""
        self.add_many([turn])

    def add_many(self, turns: Sequence[Turn]) -> None:
        """Add completed turns in order (batched where the strategy can)."""
        start = len(self._turns)
        new = [Turn(start + i, t.messages) for i, t in enumerate(turns)]
        if not new:
            return
        self._on_add(new)
        self._turns.extend(new)
        self._turn_tokens.extend(turn_tokens(self.token_counter, t) for t in new)

    def reset(self) -> None:
        """Forget every turn (caches that are keyed by content may be kept)."""
        self._turns.clear()
        self._turn_tokens.clear()
        self._on_reset()

    def tokens_of(self, indices: Sequence[int]) -> int:
        """Tokens of the given turns."""
        return sum(self._turn_tokens[i] for i in indices)

    @property
    def total_tokens(self) -> int:
        """Tokens of every turn added."""
        return sum(self._turn_tokens)

    @abstractmethod
    def _on_add(self, turns: list[Turn]) -> None:
        """Update derived state for new turns (already re-indexed)."""

    @abstractmethod
    def _on_reset(self) -> None:
        """Drop derived state of the turns."""

    @abstractmethod
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Choose past turns (and/or derived blocks) for ``query`` within ``budget`` tokens."""
