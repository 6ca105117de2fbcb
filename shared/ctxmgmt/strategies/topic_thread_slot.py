"""Slot: one topic thread of TopicThread's memory, as plain data, and the checks of a restored one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.state import plain_fields


@dataclass
class Slot:
    """One topic thread: its compressed state and bookkeeping (plain data).

    Attributes:
        id: Serial number of the slot (never reused).
        items: The compressed state, as ``[text, source turn]`` pairs in the order written.
        turns: Turns the thread covers, ascending.
        vector_sum: Sum of the covered turns' embeddings (the slot embedding is its direction:
            mean pooling, C-DIC's psi).
        last_retrieved: Turn at which the slot was last retrieved or revised.
        created: Turn that opened the slot.
        revisions: Times the slot was revised.
    """

    id: int
    items: list[list[Any]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    vector_sum: list[float] = field(default_factory=list)
    last_retrieved: int = 0
    created: int = 0
    revisions: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (a copy)."""
        return plain_fields(self)

    @property
    def state(self) -> list[str]:
        """The compressed state's texts."""
        return [str(text) for text, _ in self.items]


def check_slot(slot: Slot, dim: int | None, turns: int) -> None:
    """A restored slot's vector sum is finite and of the embeddings' dimension; its turns exist.

    Raises:
        CorruptStateError: it is not.
    """
    try:
        total = np.asarray(slot.vector_sum, dtype=np.float64)
        members = [int(t) for t in slot.turns]
    except (TypeError, ValueError, OverflowError) as exc:
        raise CorruptStateError(f"saved slot {slot.id!r:.20} is malformed: {exc}") from None
    if total.ndim != 1 or (dim is not None and total.shape[0] != dim) or not np.isfinite(total).all():
        raise CorruptStateError(f"saved slot {slot.id!r:.20}: vector sum {total.shape} or not finite")
    if not all(isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) for item in slot.items):
        raise CorruptStateError(f"saved slot {slot.id!r:.20}: items are not [text, turn] pairs")
    if not members or any(not 0 <= t < turns for t in members):
        raise CorruptStateError(f"saved slot {slot.id!r:.20} covers turns outside 0..{turns - 1}")
