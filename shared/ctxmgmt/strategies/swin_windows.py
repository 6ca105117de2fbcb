"""SWinWindows: a session's turns cut into overlapping windows, each summarised once into the memory."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.swin_memory import MemoryItem, RetentionConfig, Score, SWinMemory
from ctxmgmt.strategies.swin_worker import SummaryWorker

Summarize = Callable[[list[str], str, int], tuple[list[str], bool]]
"""``(memory texts, window text, window serial) -> (the window's items, whether a fallback made them)``."""

_Job = tuple[int, int, int, int, int]
"""(generation, session, window serial, first turn, last turn) of a window handed to the summarizer."""


class WindowConfig(RetentionConfig, Protocol):
    """The parameters the windows read (``SWinConfig`` has them; see its fields for the defaults)."""

    @property
    def window(self) -> int:
        """Turns per window."""

    @property
    def overlap(self) -> int:
        """Turns shared by consecutive windows (smaller than ``window``)."""

    @property
    def background(self) -> bool:
        """Whether windows are summarised in the worker thread."""


class SWinWindows:
    """A session's windows, each summarised once, as soon as its last turn is added, into ``memory``.

    Window ``k`` of a session covers turns ``k*s .. k*s + window - 1`` with stride
    ``s = window - overlap``; its summary is conditioned on the memory so far,
    ``M_k = f(M_{k-1}, W_k)`` (SWin 3.3, algorithms 1-3). With ``background`` the windows are
    summarised in one worker thread, in order (:class:`SummaryWorker`), so :meth:`add` returns
    at once; :meth:`flush` waits for them. Thread-safe: :attr:`lock` guards the memory and the
    window positions (a strategy holds it too to read them together); windows summarised
    for a memory that :meth:`reset` replaced since are dropped.

    Args:
        config: The window and retention parameters (read at each call).
        memory: The running memory the windows' items are merged into.

    Attributes:
        memory: The running memory (replaced by :meth:`reset`, kept by :meth:`next_session`).
        lock: Re-entrant lock around every read and change of the memory and the positions.
        session: Current session number (0 first).
        next_start: First turn of the next window, in this session.
        covered: Last turn of this session covered by a merged window (-1: none).
    """

    def __init__(self, config: WindowConfig, memory: SWinMemory) -> None:
        self.config = config
        self.memory = memory
        self.lock = threading.RLock()
        self.session = 0
        self.next_start = 0
        self.covered = -1
        self._generation = 0  # a new one each reset: windows summarised before it are dropped
        self._worker = SummaryWorker()

    @property
    def stride(self) -> int:
        """Turns between the starts of consecutive windows: ``window - overlap``."""
        return self.config.window - self.config.overlap

    def add(self, turns: Sequence[Turn], summarize: Summarize) -> None:
        """Summarise each window that ``turns`` (the session's turns so far, new ones included) completes."""
        window = self.config.window
        while self.next_start + window <= len(turns):
            start = self.next_start
            self._schedule(turns[start : start + window], start, summarize)
            self.next_start += self.stride

    def summarize_tail(self, turns: Sequence[Turn], summarize: Summarize) -> None:
        """Summarise the turns no merged window covers yet as one last, shorter window, and wait.

        ``turns`` are the session's turns; nothing happens when every one is covered already.
        """
        self.flush()
        n = len(turns)
        if n and self.covered < n - 1:
            start = min(self.next_start, self.covered + 1)
            self._schedule(turns[start:], start, summarize, wait=True)

    def next_session(self) -> None:
        """Start the next session: windows restart at its turn 0 and the memory stays."""
        with self.lock:
            self.session += 1
            self.next_start = 0
            self.covered = -1

    def reset(self, memory: SWinMemory) -> None:
        """Start over from session 0 with ``memory``, dropping the windows still in flight."""
        with self.lock:
            self._generation += 1
            self._worker.forget_pending()
            self.memory = memory
            self.session = 0
            self.next_start = 0
            self.covered = -1

    def snapshot(self, turns: int, recent_turns: int) -> tuple[list[MemoryItem], dict[int, Score], list[int]]:
        """(the memory's items in showing order, their scores by ``id``, the turns shown verbatim).

        Read together under the lock. ``turns``: how many the session has. The verbatim turns
        (the open window) start at the next window's first turn, or earlier at the first turn
        no merged window covers (its window is still being summarised) or at the newest
        ``recent_turns``.
        """
        with self.lock:
            items = self.memory.chronological()
            scores = {id(i): self.memory.score(i) for i in items}
            first = min(self.next_start, self.covered + 1, max(0, turns - recent_turns))
        first = max(0, min(first, turns))
        return items, scores, list(range(first, turns))

    def state(self) -> dict[str, Any]:
        """The stored state: the memory's items and logs, the session and the window positions."""
        memory = self.memory
        return {
            "items": [i.to_dict() for i in memory.items],
            "windows": [dict(w) for w in memory.log],
            "forgotten": memory.forgotten.map(dict),
            "session": self.session,
            "serial": memory.serial,
            "last_serial": memory.last_serial,
            "next_start": self.next_start,
            "covered": self.covered,
        }

    def restore(self, state: dict[str, Any], turns: int) -> None:
        """Restore :meth:`state` output, the session having ``turns`` turns, without summarising.

        Raises:
            CorruptStateError: an item or window covers turns that do not exist.
        """
        self.memory.restore(state, turns)
        self.session = int(state["session"])
        self.next_start = int(state["next_start"])
        self.covered = int(state["covered"])

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every window handed to the background worker is merged."""
        self._worker.flush(timeout)

    def close(self) -> None:
        """Finish pending windows and stop the background worker (it restarts when needed)."""
        self._worker.close()

    def _schedule(
        self, turns: Sequence[Turn], start: int, summarize: Summarize, *, wait: bool = False
    ) -> None:
        """Summarise ``turns`` (the first is turn ``start``): in the worker, or now when ``wait``."""
        with self.lock:
            serial = self.memory.new_serial()
            job = (self._generation, self.session, serial, start, start + len(turns) - 1)
        text = "\n".join(t.dated_text for t in turns)  # first-seen stamps anchor relative dates
        if self.config.background and not wait:
            self._worker.submit(functools.partial(self._summarize, job, text, summarize))
        else:
            self._summarize(job, text, summarize)

    def _summarize(self, job: _Job, text: str, summarize: Summarize) -> None:
        """Summarise one window's ``text`` outside the lock, then merge its items (unless reset since)."""
        generation, session, serial, start, end = job
        with self.lock:
            if generation != self._generation:
                return
            previous = [item.text for item in self.memory.items]
        new, fallback = summarize(previous, text, serial)
        with self.lock:
            if generation != self._generation:
                return
            self.memory.merge(new, session, serial, start, end, fallback=fallback)
            if session == self.session:
                self.covered = max(self.covered, end)

    def __getstate__(self) -> dict[str, Any]:
        """The windows with every window in flight merged, without the lock and the worker thread."""
        self.flush()
        return {k: v for k, v in self.__dict__.items() if k not in {"lock", "_worker"}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a copy: its own lock; its worker thread starts with its next window."""
        self.__dict__.update(state)
        self.lock = threading.RLock()
        self._worker = SummaryWorker()
