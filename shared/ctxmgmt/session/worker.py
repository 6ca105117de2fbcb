"""The process's background worker: one daemon thread that derives conversations' backlogs between calls.

A call that cannot derive every new turn within its time (:data:`ctxmgmt.session.conversation.INDEX_SECONDS`)
leaves a backlog and hands its conversation to :data:`WORKER` (:func:`worker`), which steps each
queued conversation in turn (:meth:`ctxmgmt.session.conversation.Conversation.derive_backlog_step`).

The process hooks live here too, registered once at import:

* at interpreter exit the worker finishes the turn under way and stops (:data:`STOP_SECONDS`),
  before the interpreter joins threads; then the objects alive are frozen out of the final
  garbage collections (:data:`FREEZE_AT_EXIT`);
* after ``os.fork`` the child gets a new worker, and every registered object (conversations,
  pools: :func:`renew_after_fork`) new locks.

The settings below are read from this module (``ctxmgmt.session.worker.WORKER_NICE = 0``);
setting them on :mod:`ctxmgmt.session.conversation`, where they were defined before, still works.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
import threading
import time
import types
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ctxmgmt.components.threads import background_threads, few_blas_threads

logger = logging.getLogger(__name__)

STOP_SECONDS = 30.0
"""Most seconds the interpreter's exit waits for the background worker to finish the turn under
way (it stops between turns; a thread still in native code while the interpreter finalises can
crash the process)."""

FREEZE_AT_EXIT = True
"""Whether the interpreter's exit leaves the objects alive at that point out of its final garbage
collections (``gc.freeze()`` in an ``atexit`` callback, after the process's threads are joined).

With torch, transformers and spaCy loaded, a process holds about a million objects, and the
collections that interpreter finalisation runs over them take most of its exit: 4.3-5.1 s
against 0.53-0.55 s frozen (imports only, load average 12 on 2 cores; 1.7-1.9 s quiet).
Objects are still freed by reference counting; only reference cycles alive at exit are not
collected, whose finalisers CPython does not promise to run at exit anyway. Set it to False
before the process exits to keep the interpreter's own collections."""

WORKER_NICE = 5
"""How much the background worker's thread raises its nice value (Linux, where a thread has its
own): on a busy host the scheduler then serves the process's calls before its background
derivation (0 = the process's own priority). KadaneDial, 300 turns, 40 gets during background
work at load average 14-18 on 2 cores: p50 111-116 -> 70-88 ms, p95 174-198 -> 111-112 ms. The
price, on a busy host only: the backlog is derived more slowly, and an exit waits longer for the
turn under way. Read when the worker thread starts."""

REST_SHARE = 0.5
"""After each step the background worker rests this share of the step's time, so calls (which
do not derive while the worker has a backlog in hand) always find the machine part free."""

IDLE_SECONDS = 5.0
"""Seconds the worker thread waits with nothing queued before it ends (the next backlog starts a new one)."""

FORWARDED = {
    **{name: name for name in ("STOP_SECONDS", "FREEZE_AT_EXIT", "WORKER_NICE", "REST_SHARE")},
    "_WORKER": "WORKER",  # the names these had in ctxmgmt.session.conversation before they moved here
    "_freeze_at_exit": "freeze_at_exit",
    "_lower_priority": "lower_priority",
}
"""Names :mod:`ctxmgmt.session.conversation` reads and sets here (:func:`forward_worker_settings`)."""


class Steppable(Protocol):
    """What the worker needs of a conversation (:class:`ctxmgmt.session.conversation.Conversation`)."""

    key: str
    closed: bool
    in_background: bool

    def derive_backlog_step(self, stopping: Callable[[], bool] | None = None) -> bool:
        """Derive the next few turns of the backlog; True while a backlog is left."""
        ...


class Renewable(Protocol):
    """An object whose locks a forked child replaces (:func:`renew_after_fork`)."""

    def renew_locks(self) -> None:
        """Replace every lock the object holds with a new, free one."""
        ...


class BacklogWorker:
    """One daemon thread per process that derives conversations' backlogs between their calls.

    Started by the first backlog and ended after :data:`IDLE_SECONDS` with nothing to do. A
    conversation is stepped in turn with the others (``derive_backlog_step``); after each step
    the thread rests :data:`REST_SHARE` of the step's time. A step that raises hands the
    conversation's backlog back to its calls (``in_background`` turns False). :meth:`stop`
    runs when the interpreter starts to exit (before it joins threads), so the thread is never
    in native code while the interpreter finalises.
    """

    def __init__(self) -> None:
        self._queue: deque[Steppable] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._current: Steppable | None = None

    def stop(self, timeout: float | None = None) -> None:
        """Finish the turn under way and stop; waits at most ``timeout`` s (default :data:`STOP_SECONDS`)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_SECONDS if timeout is None else timeout)

    def _is_stopping(self) -> bool:
        return self._stopping

    def holds(self, conversation: Steppable) -> bool:
        """Whether ``conversation``'s backlog is queued or being stepped by this worker."""
        with self._cond:
            return self._current is conversation or any(c is conversation for c in self._queue)

    def submit(self, conversation: Steppable) -> None:
        """Derive ``conversation``'s backlog in the background (once queued, it stays until done)."""
        with self._cond:
            if self._stopping:
                return
            if self._current is not conversation and not any(c is conversation for c in self._queue):
                self._queue.append(conversation)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxmgmt-backlog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, conversation: Steppable) -> None:
        """Drop ``conversation`` from the queue (a step under way commits nothing: its generation is old)."""
        with self._cond:
            self._queue = deque(c for c in self._queue if c is not conversation)

    def _run(self) -> None:
        lower_priority(WORKER_NICE)
        while True:
            with self._cond:
                if not self._queue and not self._stopping:
                    self._cond.wait(IDLE_SECONDS)
                if not self._queue or self._stopping:
                    self._thread = None
                    return
                conversation: Steppable | None = self._queue.popleft()
                self._current = conversation
            assert conversation is not None
            started = time.monotonic()
            try:
                with background_threads(), few_blas_threads():  # one core at most: calls run beside it
                    more = conversation.derive_backlog_step(self._is_stopping)
            except Exception as exc:  # noqa: BLE001 - the next call derives (and reports) it itself
                logger.warning("background derivation of session %r failed: %s", conversation.key, exc)
                conversation.in_background = False  # its calls derive the backlog again
                more = False
            with self._cond:
                self._current = None
                if more and not conversation.closed and not self._stopping:
                    self._queue.append(conversation)
                conversation = None  # an evicted conversation is not kept alive by the worker
                if not self._stopping:  # rest, unless asked to stop (stop() may have notified already)
                    self._cond.wait(min(REST_SHARE * (time.monotonic() - started), 1.0))


def lower_priority(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (Linux: per thread); elsewhere nothing."""
    if nice <= 0 or not sys.platform.startswith("linux") or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as exc:  # a sandbox may refuse it: the worker only runs at the process's priority
        logger.debug("could not lower the background worker's priority: %s", exc)


WORKER = BacklogWorker()
"""The process's worker (a forked child replaces it: read it through :func:`worker`)."""

_RENEWED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every object whose locks a forked child replaces (conversations, pools)."""


def worker() -> BacklogWorker:
    """The process's background worker (a new one in a forked child)."""
    return WORKER


def renew_after_fork(owner: Renewable) -> None:
    """Give ``owner`` new locks in a forked child (held weakly: registering never keeps it alive)."""
    _RENEWED.add(owner)


def stop_worker() -> None:
    """Stop the process's background worker (the one of a forked child too)."""
    WORKER.stop()


def after_fork_in_child() -> None:
    """A forked child (gunicorn, multiprocessing) gets a new worker and new locks.

    A lock the parent's worker or another thread held at the fork would stay held for ever in
    the child, and the parent's worker thread does not exist there. Conversations with a
    backlog are handed to the child's worker (started by the next call or
    :meth:`ctxmgmt.session.conversation.Conversation.wait_derived`).
    """
    global WORKER
    WORKER = BacklogWorker()
    for owner in list(_RENEWED):
        owner.renew_locks()


def freeze_at_exit() -> None:
    """Leave the objects alive now out of the interpreter's final collections (:data:`FREEZE_AT_EXIT`)."""
    if FREEZE_AT_EXIT:
        gc.freeze()


atexit.register(freeze_at_exit)  # after threads are joined; before the atexit callbacks registered earlier
if hasattr(threading, "_register_atexit"):  # runs before the interpreter joins threads and finalises
    threading._register_atexit(stop_worker)
else:  # pragma: no cover - CPython has it since 3.9
    atexit.register(stop_worker)
os.register_at_fork(after_in_child=after_fork_in_child)


def _forwarded(name: str) -> property:
    """A property that reads and sets this module's ``name``."""

    def read(module: types.ModuleType) -> Any:
        return globals()[name]

    def write(module: types.ModuleType, value: Any) -> None:
        globals()[name] = value

    return property(read, write, doc=f"``ctxmgmt.session.worker.{name}``")


class _Forwarding(types.ModuleType):
    """A module whose names in :data:`FORWARDED` are properties over this module's settings."""


for _old, _new in FORWARDED.items():
    setattr(_Forwarding, _old, _forwarded(_new))


def forward_worker_settings(module: types.ModuleType) -> None:
    """Make ``module`` read and set this module's settings (:data:`FORWARDED`) under their old names.

    ``ctxmgmt.session.conversation.WORKER_NICE = 0`` (where the settings were defined before
    they moved here) then sets :data:`WORKER_NICE`, where the worker reads it.
    """
    module.__class__ = _Forwarding
