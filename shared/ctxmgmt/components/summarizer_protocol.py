"""What a summarizer is: the :class:`Summarizer` protocol every memory's summariser follows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Summarizer(Protocol):
    """Turns one window of conversation into memory items.

    ``previous`` is the memory so far (one item per entry, oldest first); ``window_text`` is
    the window's turns, one rendered message per line (``[time] speaker: text``). Returns
    the window's new items (short, self-contained statements); may return ``[]``.
    """

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        """New memory items for ``window_text``, given the ``previous`` items."""
        ...
