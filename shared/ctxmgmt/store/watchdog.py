"""Deadlines for blocking database calls: one watchdog thread per process breaks calls that overrun.

A database driver waiting for a server that does not answer (a PostgreSQL frozen by
``SIGSTOP``, a host gone without a TCP reset) blocks its thread until the operating system
gives up, which can take hours. :func:`watch` arms a deadline around such a call: when it
passes, the watchdog thread runs the call's *breaker* (for PostgreSQL: shut the connection's
socket down, so the blocked read returns at once with an error; for SQLite:
``Connection.interrupt()``), and the call fails with the driver's own error instead of hanging.

The breaker runs under the same lock that disarms the deadline, so it never touches a
connection after its call has finished (and the connection has gone back to a pool).
The watchdog thread is started on first use and re-created in a forked child.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


class _Watchdog:
    """A heap of armed deadlines and the daemon thread that fires them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.armed: set[int] = set()
        self.ids = itertools.count()
        self.thread: threading.Thread | None = None

    def arm(self, seconds: float, breaker: Callable[[], None]) -> int:
        due = time.monotonic() + seconds
        with self.lock:
            ident = next(self.ids)
            # The watchdog sleeps until the earliest entry (disarmed ones stay in the heap until
            # then), so it is woken only for a deadline earlier than that: rarely, with one figure.
            earliest = not self.heap or due < self.heap[0][0]
            heapq.heappush(self.heap, (due, ident, breaker))
            self.armed.add(ident)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="ctxmgmt-deadline", daemon=True)
                self.thread.start()
            elif earliest:
                self.wake.notify()
            return ident

    def disarm(self, ident: int) -> None:
        with self.lock:
            self.armed.discard(ident)  # its heap entry is skipped when it comes up

    def _run(self) -> None:
        with self.lock:
            while True:
                if not self.heap:
                    self.wake.wait()
                    continue
                due = self.heap[0][0] - time.monotonic()
                if due > 0:
                    self.wake.wait(due)
                    continue
                _, ident, breaker = heapq.heappop(self.heap)
                if ident not in self.armed:
                    continue  # its call ended in time
                self.armed.discard(ident)
                try:
                    breaker()  # under the lock: the call cannot finish (disarm) meanwhile
                except Exception as exc:  # noqa: BLE001 - a breaker must never kill the watchdog
                    logger.debug("deadline breaker failed: %s", exc)


_watchdog = _Watchdog()


def _forget_watchdog() -> None:
    """In a forked child the parent's watchdog thread does not exist: start afresh."""
    global _watchdog
    _watchdog = _Watchdog()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watchdog)


@contextmanager
def watch(seconds: float | None, breaker: Callable[[], None]) -> Iterator[None]:
    """Run the ``with`` body under a deadline: after ``seconds``, ``breaker()`` runs once (None: none)."""
    if seconds is None:
        yield
        return
    dog = _watchdog
    ident = dog.arm(seconds, breaker)
    try:
        yield
    finally:
        dog.disarm(ident)


def shut_down_socket(fd: int, family: int) -> None:
    """Shut down the socket behind descriptor ``fd`` (both directions), leaving ``fd`` open.

    The descriptor stays owned by its driver (libpq closes it); a read blocked on it returns
    end-of-file at once, so the driver reports a lost connection instead of waiting.
    ``family`` is the socket's address family (``socket.AF_UNIX``, ``AF_INET``, ``AF_INET6``).
    """
    sock = socket.socket(family, socket.SOCK_STREAM, 0, os.dup(fd))
    try:
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.close()
