"""One conversation as one object: what every adapter surface calls, once per framework call.

A :class:`Conversation` owns everything about one conversation: its strategy, the caller's
messages in core form (:class:`~ctxmgmt.session.converted.ConvertedHistory`), the sync of its
derived state with a store (:class:`~ctxmgmt.session.stored_state.StoredState`) and the lock that
orders them. Every adapter surface makes one call into it per framework call:
:meth:`~Conversation.index` (new messages), :meth:`~Conversation.select` (what to send for a
question within a budget), :meth:`~Conversation.clear` and :meth:`~Conversation.carry_over`.
:class:`ConversationPool` keeps an adapter's conversations by the framework's id
(:mod:`ctxmgmt.session.pool`).

The select path, top to bottom, each step once: the history is read
(:meth:`ConvertedHistory.read <ctxmgmt.session.converted.ConvertedHistory.read>`: conversion of
what changed, the turn in progress and the question, :mod:`ctxmgmt.session.query`), the derived
state catches up (:meth:`StoredState.catch_up <ctxmgmt.session.stored_state.StoredState.catch_up>`,
within :data:`INDEX_SECONDS`), the context is composed (:func:`ctxmgmt.session.selection.compose_context`)
and mapped back to the caller's objects (:meth:`ctxmgmt.session.codec.Codec.selection`).

Locking: a conversation's lock is held for the whole of each operation (conversion, derived
state, store writes and selection), so calls of one conversation are serialised and calls of
different conversations run in parallel.

Ownership: at any moment a conversation's derived state is changed by one owner, the call that
holds its lock or the background worker (:mod:`ctxmgmt.session.worker`) committing one step
under it. The worker computes a step (embeddings) outside the lock and commits only if nothing
changed meanwhile (the conversation's *generation*: :meth:`Conversation.clear`,
:meth:`~Conversation.carry_over` and :meth:`~Conversation.close` start a new one). A
conversation the pool evicts or discards is closed: the worker drops it and never writes for it
again. After ``os.fork`` the child gets a new worker and new locks.

Copies (``copy.deepcopy``, ``pickle``): a conversation is copied whole (converted history,
derived state, backlog) under its lock, with a lock of its own; its strategy's components and
its store are shared by a deep copy (:mod:`ctxmgmt.adapter.copying`).

Settings: :data:`INDEX_SECONDS`, :data:`BACKGROUND`, :data:`PREPARE_TURNS`, :data:`CATCH_UP_BATCH`,
:data:`FIRST_STEP` and :data:`LEAVE_TO_WORKER` are read here. The background worker's settings
(``WORKER_NICE``, ``FREEZE_AT_EXIT``, ``STOP_SECONDS``, ``REST_SHARE``) live in
:mod:`ctxmgmt.session.worker`; reading or setting them on this module reads or sets them there.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

import ctxmgmt.session.backlog as fast_index
from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.components.embedder import SentenceTransformerEmbedder, shared_queries
from ctxmgmt.components.threads import few_blas_threads
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.types import Turn
from ctxmgmt.session.backlog import RECENT_TURNS, BacklogIndex
from ctxmgmt.session.codec import Codec, Selection
from ctxmgmt.session.converted import ConvertedHistory, utc_today
from ctxmgmt.session.pool import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION, Pool
from ctxmgmt.session.selection import compose_context
from ctxmgmt.session.stored_state import StoredState
from ctxmgmt.session.worker import forward_worker_settings, renew_after_fork, worker
from ctxmgmt.store.base import StateStore
from ctxmgmt.strategies.base import Strategy

__all__ = [
    "BACKGROUND",
    "CATCH_UP_BATCH",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION",
    "FIRST_STEP",
    "INDEX_SECONDS",
    "LEAVE_TO_WORKER",
    "PREPARE_TURNS",
    "Codec",
    "Conversation",
    "ConversationPool",
    "Progress",
    "Selection",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""``progress(turns_done, turns_total)``: called while a long history is derived (cold start)."""

CATCH_UP_BATCH = 256
"""Most turns derived per step when a conversation catches up with a long history (one embedding
batch and, with a store, one store write each)."""

FIRST_STEP = 4
"""Turns derived by a call before its time limit starts (the first use of a model loads it), and
the size of its first timed step (:meth:`ctxmgmt.session.stored_state.StoredState.catch_up`): a
call overruns :data:`INDEX_SECONDS` by about one turn's work, or one step's where the cost per
turn jumps (ACM's entity tier starts once its budget fills: a step sized from the cheap first
turns ran spaCy over 230 turns, 3-5 s)."""

INDEX_SECONDS: float | None = 0.25
"""Seconds of derivation per call, by default (:class:`Conversation` ``index_seconds``; None = no limit).

A call that brings more new turns than it can derive in this time (a cold start over a long
history without stored state, thousands of messages sent at once) derives what fits, oldest
first, and leaves the rest as a backlog that the next calls go on deriving; meanwhile a fast
index chooses among the waiting turns (:class:`ctxmgmt.session.backlog.BacklogIndex`). The
first :data:`FIRST_STEP` turns of a call are not timed, so a backlog always shrinks. Read when
a conversation is created: set ``ctxmgmt.session.conversation.INDEX_SECONDS`` before the first call to
change it for a process."""

LEAVE_TO_WORKER = 64
"""A call that brings more new turns than this to a strategy with a fast twin
(:meth:`~ctxmgmt.strategies.base.Strategy.fast_twin`: KadaneDial, DiscourseTree, TopicThread)
derives none of them itself while the background worker is on: it only loads or rewinds stored
state, and the twin answers alone until every turn is derived, as it would after the call's
:data:`INDEX_SECONDS` of work. Deriving in the call would only delay that answer (LongMemEval dev,
one user's 250 turns: DiscourseTree's first answer 2.9 s, 1.9 s of it embedding its first 8 turns
with MiniLM). A chat's new turn or two is derived in the call as before."""

BACKGROUND = True
"""Whether a backlog is also derived between calls, by one daemon thread per process
(default of :attr:`Conversation.in_background`; read when a conversation is created)."""

PREPARE_TURNS = 8
"""Turns the background worker prepares (embeds) per step outside the conversation's lock, for a
strategy that prepares (:meth:`~ctxmgmt.strategies.base.Strategy.prepare`), one forward pass each
(MiniLM on one thread, LoCoMo turns: 37-39 ms of CPU a turn one by one, 51-55 ms in batches of 8),
so the process's exit waits for one turn's pass at most; a strategy that does not derives one
turn per step, under the lock, so a call never waits for more than one turn of the worker's work."""


class Conversation(Generic[T]):
    """One conversation: its strategy, its converted history, its stored state, its lock.

    Args:
        key: Store key of the conversation (see :meth:`ctxmgmt.session.pool.Pool.key`).
        strategy: The conversation's own strategy (never shared).
        codec: How the caller's messages map to the core.
        store: Where derived state persists; None = only in this process.
        index_seconds: Seconds of derivation per call before the rest is left for later calls;
            default :data:`INDEX_SECONDS` (0.25 s), or the strategy's ``derive_seconds`` when
            longer (SWin, ACM: 3 s, after their first ``derive_turns``, 1,000, untimed); None =
            derive everything in every call.

    Attributes:
        store: The store the conversation was created with (its stored state may work without
            it for a while after a failure).
        lock: Held for the whole of every operation.
        last_context: The context of the last selection (None before the first or after
            :meth:`clear`). The next selection is laid out after it (:mod:`ctxmgmt.session.layout`) and
            counts its stable prefix against it; kept per process, not stored.
        backlog: Completed turns the last call left to derive (see :data:`INDEX_SECONDS`).
        in_background: Whether the process's background worker derives a backlog between calls
            (default :data:`BACKGROUND`).
        closed: True once the pool let it go (:meth:`close`): the worker never steps it again.
    """

    def __init__(
        self,
        key: str,
        strategy: Strategy,
        codec: Codec[T],
        store: StateStore | None = None,
        *,
        index_seconds: float | None | Literal["default"] = "default",
    ) -> None:
        self.key = key
        # a cheap strategy's first derive_turns are derived however long they take (by default)
        self.untimed_turns = max(FIRST_STEP, strategy.derive_turns if index_seconds == "default" else 0)
        if index_seconds == "default":
            index_seconds = INDEX_SECONDS
            if index_seconds is not None:
                index_seconds = max(index_seconds, strategy.derive_seconds)
        self.index_seconds = index_seconds
        self.strategy = strategy
        self.codec = codec
        self.store = store
        self.lock = threading.RLock()
        self.history: ConvertedHistory[T] = ConvertedHistory(codec.to_core, codec.snapshot, clock=_utc_now)
        self.state = StoredState(key, strategy, store)
        self.last_context: Context | None = None
        self.backlog = 0
        self.in_background = BACKGROUND
        self.closed = False
        self._generation = 0  # a new one each clear, carry-over and close: stale worker steps are dropped
        self._pending: tuple[list[Turn], list[str]] | None = None  # the backlog's history and chains
        self._backlog_tokens: dict[str, int] = {}  # tokens of backlog turns, by fingerprint
        self._backlog_index: BacklogIndex | None = None  # the waiting turns, selectable at once
        renew_after_fork(self)

    # -- copies (copy.deepcopy, pickle): see ctxmgmt.adapter.copying ----------------------------------
    def _copied_state(self, memo: dict[int, Any]) -> dict[str, Any]:
        """Everything but the lock, deep-copied while holding it; components and store shared.

        Taken under the lock, the copy is consistent even while the background worker derives.
        """
        with self.lock:
            state = {k: v for k, v in self.__dict__.items() if k not in ("lock", "_backlog_index")}
            return deep_copy(state, memo, [*self.strategy.shared_components(), self.store])

    def __getstate__(self) -> dict[str, Any]:
        """The conversation as plain state: history, derived state, backlog; no lock."""
        return self._copied_state({})

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy: its own lock; a backlog it carries goes on in the background."""
        self.__dict__.update(state)
        self.lock = threading.RLock()
        self._backlog_index = None  # rebuilt by the next call that needs it
        renew_after_fork(self)
        waiting = self._pending is not None or self.strategy.pending_work()
        if waiting and self.in_background and not self.closed:
            worker().submit(self)

    def renew_locks(self) -> None:
        """A new lock (in a forked child: the parent's may have been held at the fork)."""
        self.lock = threading.RLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> Conversation[T]:
        """An independent conversation with the same state (see :meth:`__getstate__`)."""
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(self._copied_state(memo))
        return clone

    def index(
        self,
        originals: Sequence[T],
        *,
        progress: Progress | None = None,
        flushed: bool = False,
        check: bool = False,
    ) -> None:
        """Derive state for the completed turns of ``originals`` (the whole raw history).

        At most ``index_seconds`` of work (see :data:`INDEX_SECONDS`); the rest is left to the
        background worker and later calls.
        Only the messages after the last call's are converted: the content check of the earlier
        ones waits for the next :meth:`select`, which always checks (so an edit made in between
        is found before it can matter). A history that does not extend the last one (a message
        deleted or replaced) is compared whole, and the derived state rewinds to the change.
        ``flushed=True``: every turn is complete (a block's flushed messages). ``check=True``
        compares every message now (an erasure: the derived state and the store rewind at once).

        Raises:
            InvalidMessageError: a new message cannot be converted (nothing is indexed then).
        """
        with self.lock, few_blas_threads():
            reading = self.history.read(originals, flushed=flushed, check=check)
            self._catch_up(reading.past, reading.chains, progress)

    def select(
        self,
        originals: Sequence[T],
        *,
        query: str | None = None,
        budget: int | None = None,
        progress: Progress | None = None,
        flushed: bool = False,
    ) -> Selection[T]:
        """What to send from ``originals`` (the whole raw history) for a question.

        The history's system messages come first and the turn in progress last, verbatim; the
        strategy chooses among the completed turns within what is left of ``budget`` (tokens;
        None = no limit) for ``query`` (default: the newest user message). See
        :func:`ctxmgmt.session.selection.compose_context`. Turns not derived yet (a backlog left by
        :data:`INDEX_SECONDS`) are chosen from by a fast index
        (:class:`~ctxmgmt.session.backlog.BacklogIndex`) and the context says it is partial
        (``context.details["partial"]``).

        ``flushed=True`` is for messages a ``Memory`` flushed into a block: every turn is
        completed (none is in progress) and system messages are kept but never selected.
        Summary and entity blocks become the codec's memory messages (:meth:`Codec.originals`).

        Raises:
            BudgetExceededError: system messages plus the turn in progress exceed ``budget``.
            InvalidMessageError: a new or changed message cannot be converted.
        """
        with self.lock, few_blas_threads():  # small products: a second BLAS thread only waits
            reading = self.history.read(originals, query=query, flushed=flushed)
            self._catch_up(reading.past, reading.chains, progress)
            with shared_queries():  # the strategy and the fast index embed the question once
                context = compose_context(
                    self.strategy,
                    reading.system,
                    reading.past,
                    reading.current,
                    question=reading.question,
                    budget=budget,
                    pending_tokens=self._pending_tokens,
                    backlog=self._index_backlog(reading.past, reading.chains),
                    previous=self.last_context,
                )
            self.last_context = context
            return self.codec.selection(context, reading.system_originals, reading.turn_originals)

    def turn_in_progress(self, originals: Sequence[T]) -> list[T]:
        """The caller's messages of the turn in progress in ``originals`` (``[]`` when none)."""
        with self.lock:
            reading = self.history.read(originals)
            return [] if reading.current is None else list(reading.turn_originals[-1])

    def clear(self) -> None:
        """Forget the conversation's derived state, here and in the store."""
        worker().cancel(self)
        with self.lock:
            self._generation += 1
            self.history.clear()
            self.state.clear()
            self.last_context = None
            self._forget_backlog()

    def carry_over(self, originals: Sequence[T] | None = None) -> None:
        """Start a new conversation that remembers this one (SWin's ``new_session``).

        With ``originals`` (the whole history being closed), every turn of it is derived first,
        the last one included; without, the turns still waiting to be derived are. The strategy
        then keeps its derived memory but no turns; the stored state is replaced by the
        carried-over state when the next turn is written. Background work for the closed
        history is cancelled first: it never re-adds its turns.
        """
        worker().cancel(self)
        with self.lock:
            self._generation += 1
            if originals is not None:
                reading = self.history.read(originals, flushed=True)
                self._catch_up(reading.past, reading.chains, None, deadline=False)
            elif self._pending is not None:
                self._derive(*self._pending, None, None)
            self.strategy.finish_pending()  # its turns are about to go
            self._forget_backlog()
            self.strategy.new_session()
            self.state.detach_history()
            self.history.clear()
            self.last_context = None

    def close(self) -> None:
        """Let the conversation go (the pool evicted or discarded it): no background work for it again.

        Its state stays in the store; a call that already holds it finishes. A later call on the
        same id gets a new conversation, loaded from the store.
        """
        self.closed = True  # checked before every commit of the worker: no lock needed
        worker().cancel(self)

    def _forget_backlog(self) -> None:
        self.backlog = 0
        self._pending = None
        self._backlog_tokens.clear()
        self._backlog_index = None

    def _catch_up(
        self, past: Sequence[Turn], chains: list[str], progress: Progress | None, *, deadline: bool = True
    ) -> None:
        """Bring the stored state towards ``past`` (chain hashes ``chains``) within ``index_seconds``.

        All of it without ``deadline``. A backlog left behind is handed to the background worker
        when ``in_background``; while the worker has one in hand, a call derives nothing (it only
        loads or rewinds) and answers.
        """
        background = self.in_background and not self.closed
        # a call within a time limit leaves slow follow-up work (ACM's entities) to the worker
        self.strategy.defer_work = deadline and self.index_seconds is not None and background
        if deadline and self.backlog and self.in_background and worker().holds(self):  # only answer
            self._derive(past, chains, progress, 0.0, first_step=0)
        elif deadline and background and self._twin_answers(past):  # the worker derives all of it
            self._derive(past, chains, progress, 0.0, first_step=0)
        else:
            seconds = self.index_seconds if deadline else None
            self._derive(past, chains, progress, seconds, first_step=self.untimed_turns)
        self._pending = (list(past), chains) if self.backlog else None
        if (self.backlog or self.strategy.pending_work()) and background:
            worker().submit(self)

    def _twin_answers(self, past: Sequence[Turn]) -> bool:
        """Whether ``past`` brings more than :data:`LEAVE_TO_WORKER` new turns to a strategy with a twin."""
        has_twin = type(self.strategy).fast_twin is not Strategy.fast_twin
        new = len(past) - len(self.strategy)
        return has_twin and self.index_seconds is not None and new > LEAVE_TO_WORKER

    def _index_backlog(self, past: Sequence[Turn], chains: list[str]) -> BacklogIndex | None:
        """The fast index of ``past`` while a backlog is left (built then, dropped once it is gone)."""
        if not self.backlog:
            self._backlog_index = None
            return None
        if self._backlog_index is None:  # MiniLM embeds the questions when the strategy uses it
            embedder = getattr(self.strategy, "embedder", None)
            bundled = isinstance(embedder, SentenceTransformerEmbedder) and embedder.model_path is None
            recent = getattr(self.strategy.config, "keep_last", RECENT_TURNS)  # KadaneDial: its own
            self._backlog_index = BacklogIndex(  # the strategy's fast twin when it names one
                self.strategy.token_counter,
                embedder if bundled else None,
                recent=recent,
                twin_of=self.strategy,
            )
        self._backlog_index.update(past, chains, seconds=fast_index.INDEX_SECONDS)  # read at each call
        return self._backlog_index

    def _derive(
        self,
        past: Sequence[Turn],
        chains: list[str],
        progress: Progress | None,
        seconds: float | None,
        *,
        first_step: int = FIRST_STEP,
        reload_on_conflict: bool = False,
    ) -> None:
        """Derive ``past`` for about ``seconds`` in steps; what is left is the backlog.

        :meth:`ctxmgmt.session.stored_state.StoredState.catch_up`, steps of :data:`CATCH_UP_BATCH`
        (``reload_on_conflict``: a lost compare-and-set only reloads, as the worker commits).
        """
        done = self.state.catch_up(
            past,
            chains,
            seconds=seconds,
            first_step=first_step,
            batch=CATCH_UP_BATCH,
            clock=_monotonic,
            progress=progress,
            reload_on_conflict=reload_on_conflict,
        )
        backlog = len(past) - done
        if backlog and not self.backlog:
            logger.warning(
                "session %r: %d turns left to derive; later calls and the background go on (%d of %d done)",
                self.key,
                backlog,
                done,
                len(past),
            )
        self.backlog = backlog
        if not backlog:
            self._backlog_tokens.clear()
            self._backlog_index = None

    def derive_backlog_step(self, stopping: Callable[[], bool] | None = None) -> bool:
        """Derive the next few turns of the backlog; True while a backlog is left.

        What the background worker runs between calls: the turns are prepared (embedded) outside
        the lock, one forward pass each, then committed under it (:data:`PREPARE_TURNS`; one
        turn, all under the lock, for a strategy that does not prepare), unless the conversation
        was cleared, carried over or closed meanwhile. Returns at once (True) when a call holds
        the conversation. When ``stopping()`` turns True between two turns (the process exits),
        the step ends there and commits nothing: what earlier steps derived is already stored.
        The commit adds only the turns prepared: when another process wrote the conversation
        meanwhile (a forked parent and child sharing a store), it reloads the stored state and
        the next step prepares the turns after it, so the lock is never held for a forward pass.
        """
        if not self.lock.acquire(timeout=0.01):
            return True
        try:
            if self.closed:
                return False
            if self._pending is None:
                return self._finish_pending_step(stopping)
            past, _ = self._pending
            generation, done = self._generation, len(self.state.chains)
            prepares = type(self.strategy).prepare is not Strategy.prepare
            batch = past[done : done + (PREPARE_TURNS if prepares else 1)]
        finally:
            self.lock.release()
        if prepares:  # the slow part, outside the lock; one turn a pass (as fast per turn as 8)
            for turn in batch:
                if stopping is not None and stopping():
                    return True
                self.strategy.prepare([turn])
        with self.lock:
            if self.closed or generation != self._generation or self._pending is None:
                return False
            past, chains = self._pending
            self._derive(past, chains, None, 0.0, first_step=max(1, len(batch)), reload_on_conflict=True)
            if not self.backlog:
                self._pending = None
            return self.backlog > 0 or self.strategy.pending_work() > 0

    def _finish_pending_step(self, stopping: Callable[[], bool] | None) -> bool:
        """The strategy's deferred work for :data:`PREPARE_TURNS` turns; True while some is left.

        Called holding the lock, which it releases while the slow part runs
        (:meth:`~ctxmgmt.strategies.base.Strategy.pending_job`) and takes again to commit.
        """
        if not self.strategy.pending_work():
            return False
        generation = self._generation
        job = self.strategy.pending_job(PREPARE_TURNS)
        if job is not None:
            self.lock.release()
            try:
                if stopping is not None and stopping():
                    return True
                job()
            finally:
                self.lock.acquire()
            if self.closed or generation != self._generation:
                return False
        self.strategy.finish_pending(PREPARE_TURNS)
        return self.strategy.pending_work() > 0

    def wait_derived(self, timeout: float | None = None) -> bool:
        """Wait until the backlog and any deferred work are done; False on ``timeout`` (seconds)."""
        end = None if timeout is None else time.monotonic() + timeout
        waiting = self.backlog or self.strategy.pending_work()
        if waiting and self.in_background and not self.closed and not worker().holds(self):
            worker().submit(self)  # e.g. a forked child's conversation
        while self.backlog or self.strategy.pending_work():
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(0.01)
        return True

    def _pending_tokens(self, turn: Turn) -> int:
        """Tokens of a turn of the backlog, counted once while it waits."""
        tokens = self._backlog_tokens.get(turn.fingerprint)
        if tokens is None:
            tokens = self._backlog_tokens[turn.fingerprint] = turn_tokens(self.strategy.token_counter, turn)
        return tokens


_monotonic = time.monotonic
"""The clock that bounds derivation per call (:data:`INDEX_SECONDS`); replaced in tests."""


_utc_now = utc_today
"""The clock that stamps messages without a time of their own when first seen; replaced in tests."""


class ConversationPool(Pool[Conversation[T], T]):
    """The :class:`~ctxmgmt.session.pool.Pool` of :class:`Conversation` objects an adapter keeps.

    Args and behaviour: :class:`~ctxmgmt.session.pool.Pool` (``factory``, ``codec``, ``surface``,
    ``name``, ``store``, ``owns_store``, ``max_conversations``).
    """

    def open(self, key: str, strategy: Strategy, store: StateStore | None) -> Conversation[T]:
        """A new :class:`Conversation` under ``key`` with the pool's codec."""
        return Conversation(key, strategy, self.codec, store)


forward_worker_settings(sys.modules[__name__])  # conversation.WORKER_NICE = 0 sets the worker's
