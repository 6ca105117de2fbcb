"""One conversation as one object, and the pool of them an adapter keeps.

A :class:`Conversation` owns everything about one conversation: its strategy, the caller's
messages in core form (:class:`~ctxmgmt.session.converted.ConvertedHistory`), the sync of its derived
state with a store (:class:`~ctxmgmt.session.stored_state.StoredState`) and the lock that orders them.
Every adapter surface makes one call into it per framework call: :meth:`~Conversation.index`
(new messages), :meth:`~Conversation.select` (what to send for a question within a budget),
:meth:`~Conversation.clear` and :meth:`~Conversation.carry_over`.

A :class:`ConversationPool` maps the framework's own identity of a conversation (a LangGraph
``thread_id``, a chat history's ``session_id``, a LlamaIndex ``chat_store_key`` or ``Memory``
``session_id``) to its :class:`Conversation`. The object that many conversations share (a
middleware, a memory block) holds configuration and a pool; each conversation's state lives in
its own object and flows down, never back up.

Locking: a conversation's lock is held for the whole of each operation (conversion, derived
state, store writes and selection), so calls of one conversation are serialised and calls of
different conversations run in parallel. The pool's lock only guards the mapping.

Ownership: at any moment a conversation's derived state is changed by one owner, the call that
holds its lock or the background worker committing one step under it. The worker computes a
step (embeddings) outside the lock and commits only if nothing changed meanwhile (the
conversation's *generation*: :meth:`Conversation.clear`, :meth:`~Conversation.carry_over` and
:meth:`~Conversation.close` start a new one). A conversation the pool evicts or discards is
closed: the worker drops it and never writes for it again. After ``os.fork`` the child gets a
new worker and new locks (:func:`_after_fork_in_child`).

Copies (``copy.deepcopy``, ``pickle``): a conversation is copied whole (converted history,
derived state, backlog) under its lock, with a lock of its own; its strategy's components and
its store are shared by a deep copy (:mod:`ctxmgmt.adapter.copying`).
"""

from __future__ import annotations

import atexit
import datetime as dt
import gc
import logging
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.components.embedder import SentenceTransformerEmbedder, shared_queries
from ctxmgmt.components.threads import background_threads
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.session.backlog import RECENT_TURNS, BacklogIndex
from ctxmgmt.session.converted import ConvertedHistory
from ctxmgmt.session.selection import compose_context, split_current
from ctxmgmt.session.stored_state import StoredState
from ctxmgmt.store.base import StateStore
from ctxmgmt.store.keys import compose_key
from ctxmgmt.strategies.base import Strategy

T = TypeVar("T")

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""``progress(turns_done, turns_total)``: called while a long history is derived (cold start)."""

CATCH_UP_BATCH = 256
"""Most turns derived per step when a conversation catches up with a long history (one embedding
batch and, with a store, one store write each)."""

FIRST_STEP = 4
"""Turns derived by a call before its time limit starts (the first use of a model loads it), and
the size of its first timed step; later steps are sized from the measured rate to fit the time
left, and at most double the step before, so a call overruns :data:`INDEX_SECONDS` by about one
turn's work, or one step's where the cost per turn jumps (ACM's entity tier starts once its
budget fills: a step sized from the cheap first turns ran spaCy over 230 turns, 3-5 s)."""

INDEX_SECONDS: float | None = 0.25
"""Seconds of derivation per call, by default (:class:`Conversation` ``index_seconds``; None = no limit).

A call that brings more new turns than it can derive in this time (a cold start over a long
history without stored state, thousands of messages sent at once) derives what fits, oldest
first, and leaves the rest as a backlog that the next calls go on deriving; meanwhile a fast
index chooses among the waiting turns (:class:`ctxmgmt.session.backlog.BacklogIndex`). The
first :data:`FIRST_STEP` turns of a call are not timed, so a backlog always shrinks. Read when
a conversation is created: set ``ctxmgmt.session.conversation.INDEX_SECONDS`` before the first call to
change it for a process."""

BACKGROUND = True
"""Whether a backlog is also derived between calls, by one daemon thread per process
(default of :attr:`Conversation.in_background`; read when a conversation is created)."""

PREPARE_TURNS = 8
"""Turns the background worker prepares (embeds) per step outside the conversation's lock, for a
strategy that prepares (:meth:`~ctxmgmt.strategies.base.Strategy.prepare`), one forward pass each
(MiniLM on one thread, LoCoMo turns: 37-39 ms of CPU a turn one by one, 51-55 ms in batches of 8),
so the process's exit waits for one turn's pass at most; a strategy that does not derives one
turn per step, under the lock, so a call never waits for more than one turn of the worker's work."""

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

DEFAULT_MAX_SESSIONS = 1000
"""Live conversations a pool keeps in memory (the rest are reloaded from the store on demand)."""

DEFAULT_SESSION = "default"
"""Conversation id used when the framework gives none (e.g. an agent run without a ``thread_id``)."""


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How one framework's message type maps to the core, defined once per adapter.

    Attributes:
        to_core: Framework message -> :class:`~ctxmgmt.messages.types.Message` (raises
            ``InvalidMessageError`` for an unusable message).
        snapshot: A cheap, comparable snapshot of every field ``to_core`` reads, so that an
            in-place edit of any of them is seen (:class:`~ctxmgmt.session.converted.ConvertedHistory`);
            None compares messages by identity only.
        memory_message: A framed memory message (a core ``Message`` of a summary or entity
            block, :meth:`ctxmgmt.messages.context.Block.as_messages`) -> the framework's message.
    """

    to_core: Callable[[T], Message]
    snapshot: Callable[[T], Any] | None
    memory_message: Callable[[Message], T]

    def by_identity(self) -> Codec[T]:
        """This codec comparing messages by identity only (for histories never edited in place)."""
        return replace(self, snapshot=None)

    def text_block(self, block: Block) -> list[T]:
        """A summary or entity block as the framework's messages (one framed memory message)."""
        return [self.memory_message(m) for m in block.as_messages()]


@dataclass(frozen=True)
class Selection(Generic[T]):
    """What :meth:`Conversation.select` chose.

    Attributes:
        messages: The caller's own message objects (and new memory messages for summary and
            entity blocks), in the order they are sent.
        context: The core :class:`~ctxmgmt.messages.context.Context`: blocks, provenance, tokens, reasons.
    """

    messages: list[T]
    context: Context


class Conversation(Generic[T]):
    """One conversation: its strategy, its converted history, its stored state, its lock.

    Args:
        key: Store key of the conversation (see :meth:`ConversationPool.key`).
        strategy: The conversation's own strategy (never shared).
        codec: How the caller's messages map to the core.
        store: Where derived state persists; None = only in this process.
        index_seconds: Seconds of derivation per call before the rest is left for later calls;
            default :data:`INDEX_SECONDS` (0.25 s), or the strategy's ``derive_seconds`` when
            longer (SWin, ACM: 3 s); None = derive everything in every call.

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
        _LIVE.add(self)

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
        _LIVE.add(self)
        if self._pending is not None and self.in_background and not self.closed:
            _WORKER.submit(self)

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
        with self.lock:
            turns = self.history.update(originals, check=check).turns
            self._catch_up(list(turns) if flushed else split_current(turns)[0], progress)

    def select(
        self,
        originals: Sequence[T],
        *,
        query: str | None = None,
        budget: int | None = None,
        progress: Progress | None = None,
        flushed: bool = False,
        text_block: Callable[[Block], list[T]] | None = None,
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
        ``text_block`` replaces the codec's rendering of summary and entity blocks.

        Raises:
            BudgetExceededError: system messages plus the turn in progress exceed ``budget``.
            InvalidMessageError: a new or changed message cannot be converted.
        """
        with self.lock:
            history = self.history.update(originals)
            if flushed:
                system: Sequence[Message] = ()
                past, current = list(history.turns), None
            else:
                system = history.system
                past, current = split_current(history.turns)
            self._catch_up(past, progress)
            with shared_queries():  # the strategy and the fast index embed the question once
                context = compose_context(
                    self.strategy,
                    system,
                    past,
                    current,
                    query=query,
                    budget=budget,
                    pending_tokens=self._pending_tokens,
                    backlog=self._index_backlog(past),
                    previous=self.last_context,
                )
            self.last_context = context
            messages = history.select_originals(context, text_block or self.codec.text_block)
            return Selection(messages, context)

    def turn_in_progress(self, originals: Sequence[T]) -> list[T]:
        """The caller's messages of the turn in progress in ``originals`` (``[]`` when none)."""
        with self.lock:
            history = self.history.update(originals)
            _, current = split_current(history.turns)
            return [] if current is None else list(history.turn_originals[-1])

    def clear(self) -> None:
        """Forget the conversation's derived state, here and in the store."""
        _WORKER.cancel(self)
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
        _WORKER.cancel(self)
        with self.lock:
            self._generation += 1
            if originals is not None:
                self._catch_up(list(self.history.update(originals).turns), None, deadline=False)
            elif self._pending is not None:
                self._derive(*self._pending, None, None)
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
        _WORKER.cancel(self)

    def _forget_backlog(self) -> None:
        self.backlog = 0
        self._pending = None
        self._backlog_tokens.clear()
        self._backlog_index = None

    def _catch_up(self, past: Sequence[Turn], progress: Progress | None, *, deadline: bool = True) -> None:
        """Bring the stored state towards ``past`` within ``index_seconds`` (all of it without ``deadline``).

        A backlog left behind is handed to the background worker when ``in_background``; while
        the worker has one in hand, a call derives nothing (it only loads or rewinds) and answers.
        """
        chains = self.history.chains(len(past))
        if deadline and self.backlog and self.in_background and _WORKER.holds(self):  # only answer
            self._derive(past, chains, progress, 0.0, first_step=0)
        else:
            self._derive(past, chains, progress, self.index_seconds if deadline else None)
        self._pending = (list(past), chains) if self.backlog else None
        if self.backlog and self.in_background and not self.closed:
            _WORKER.submit(self)

    def _index_backlog(self, past: Sequence[Turn]) -> BacklogIndex | None:
        """The fast index of ``past`` while a backlog is left (built then, dropped once it is gone)."""
        if not self.backlog:
            self._backlog_index = None
            return None
        if self._backlog_index is None:  # MiniLM embeds the questions when the strategy uses it
            embedder = getattr(self.strategy, "embedder", None)
            bundled = isinstance(embedder, SentenceTransformerEmbedder) and embedder.model_path is None
            recent = getattr(self.strategy.config, "keep_last", RECENT_TURNS)  # KadaneDial: its own
            self._backlog_index = BacklogIndex(
                self.strategy.token_counter, embedder if bundled else None, recent=recent
            )
        self._backlog_index.update(past, self.history.chains(len(past)))
        return self._backlog_index

    def _derive(
        self,
        past: Sequence[Turn],
        chains: list[str],
        progress: Progress | None,
        seconds: float | None,
        *,
        first_step: int = FIRST_STEP,
    ) -> None:
        """Derive ``past`` in steps of at most :data:`CATCH_UP_BATCH` turns, for about ``seconds``.

        Loading and rewinding compare the whole of ``past``; new turns are then derived in
        steps (one embedding batch and one store write each) until all are derived or
        ``seconds`` (None = no limit) have passed after the first ``first_step`` turns (0 with
        ``seconds=0``: load or rewind only). ``progress`` is called after each step with
        ``(turns done, turns total)``.
        """
        state = self.state
        state.sync(past, chains, limit=0)  # load or rewind only
        done = len(state.chains)
        step = CATCH_UP_BATCH if seconds is None else first_step
        start: float | None = None  # the first step (which may load models) is not timed
        timed = 0
        while done < len(past) and step > 0:
            state.sync(past, chains, limit=step)
            done, last = len(state.chains), done
            if progress is not None:
                progress(done, len(past))
            if done == last:  # nothing could be added: never loop on it
                break
            if seconds is None:
                continue
            if start is None:
                if seconds <= 0:  # the untimed first step only
                    break
                start = _monotonic()
                continue
            timed += done - last
            spent = _monotonic() - start
            if spent >= seconds:
                break
            step = min(  # a strategy's cost per turn can jump (ACM's first collapses): at most doubled
                2 * (done - last),
                max(1, min(CATCH_UP_BATCH, int((seconds - spent) * timed / spent)))
                if spent > 0
                else CATCH_UP_BATCH,
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
        """
        if not self.lock.acquire(timeout=0.01):
            return True
        try:
            if self.closed or self._pending is None:
                return False
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
            self._derive(past, chains, None, 0.0, first_step=max(1, len(batch)))
            if not self.backlog:
                self._pending = None
            return self.backlog > 0

    def wait_derived(self, timeout: float | None = None) -> bool:
        """Wait until the backlog is derived (by calls or the background); False on ``timeout`` (seconds)."""
        end = None if timeout is None else time.monotonic() + timeout
        if self.backlog and self.in_background and not self.closed and not _WORKER.holds(self):
            _WORKER.submit(self)  # e.g. a forked child's conversation
        while self.backlog:
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


class _BacklogWorker:
    """One daemon thread per process that derives conversations' backlogs between their calls.

    Started by the first backlog and ended after :data:`_IDLE_SECONDS` with nothing to do. A
    conversation is stepped in turn with the others (:meth:`Conversation.derive_backlog_step`);
    after each step the thread rests :data:`REST_SHARE` of the step's time. A step that raises
    hands the conversation's backlog back to its calls (``in_background`` turns False).
    :meth:`stop` runs when the interpreter starts to exit (before it joins threads), so the
    thread is never in native code while the interpreter finalises.
    """

    def __init__(self) -> None:
        self._queue: deque[Conversation[Any]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._current: Conversation[Any] | None = None

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Finish the turn under way and stop (at interpreter exit: :func:`_stop_worker`)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _is_stopping(self) -> bool:
        return self._stopping

    def holds(self, conversation: Conversation[Any]) -> bool:
        """Whether ``conversation``'s backlog is queued or being stepped by this worker."""
        with self._cond:
            return self._current is conversation or any(c is conversation for c in self._queue)

    def submit(self, conversation: Conversation[Any]) -> None:
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

    def cancel(self, conversation: Conversation[Any]) -> None:
        """Drop ``conversation`` from the queue (a step under way commits nothing: its generation is old)."""
        with self._cond:
            self._queue = deque(c for c in self._queue if c is not conversation)

    def _run(self) -> None:
        _lower_priority(WORKER_NICE)
        while True:
            with self._cond:
                if not self._queue and not self._stopping:
                    self._cond.wait(_IDLE_SECONDS)
                if not self._queue or self._stopping:
                    self._thread = None
                    return
                conversation = self._current = self._queue.popleft()
            started = time.monotonic()
            try:
                with background_threads():  # one core at most: calls run beside it
                    more = conversation.derive_backlog_step(self._is_stopping)
            except Exception as exc:  # noqa: BLE001 - the next call derives (and reports) it itself
                logger.warning("background derivation of session %r failed: %s", conversation.key, exc)
                conversation.in_background = False  # its calls derive the backlog again
                more = False
            with self._cond:
                self._current = None
                if more and not conversation.closed and not self._stopping:
                    self._queue.append(conversation)
                del conversation  # an evicted conversation is not kept alive by the worker
                # rest, unless asked to stop
                self._cond.wait(min(REST_SHARE * (time.monotonic() - started), 1.0))


def _lower_priority(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (Linux: per thread); elsewhere nothing."""
    if nice <= 0 or not sys.platform.startswith("linux") or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as exc:  # a sandbox may refuse it: the worker only runs at the process's priority
        logger.debug("could not lower the background worker's priority: %s", exc)


_IDLE_SECONDS = 5.0
_WORKER = _BacklogWorker()
_LIVE: weakref.WeakSet[Conversation[Any]] = weakref.WeakSet()
"""Every conversation of the process (a forked child gives each a new lock)."""
_POOLS: weakref.WeakSet[ConversationPool[Any]] = weakref.WeakSet()


def _stop_worker() -> None:
    """Stop the process's background worker (the one of a forked child too)."""
    _WORKER.stop()


def _after_fork_in_child() -> None:
    """A forked child (gunicorn, multiprocessing) gets a new worker and new locks.

    A lock the parent's worker or another thread held at the fork would stay held for ever in
    the child, and the parent's worker thread does not exist there. Conversations with a
    backlog are handed to the child's worker (started by the next call or :meth:`Conversation.wait_derived`).
    """
    global _WORKER
    _WORKER = _BacklogWorker()
    for pool in list(_POOLS):
        pool._lock = threading.Lock()
    for conversation in list(_LIVE):
        conversation.lock = threading.RLock()


def _freeze_at_exit() -> None:
    """Leave the objects alive now out of the interpreter's final collections (:data:`FREEZE_AT_EXIT`)."""
    if FREEZE_AT_EXIT:
        gc.freeze()


atexit.register(_freeze_at_exit)  # after threads are joined; before the atexit callbacks registered earlier
if hasattr(threading, "_register_atexit"):  # runs before the interpreter joins threads and finalises
    threading._register_atexit(_stop_worker)
else:  # pragma: no cover - CPython has it since 3.9
    atexit.register(_stop_worker)
os.register_at_fork(after_in_child=_after_fork_in_child)


def _monotonic() -> float:
    """The clock that bounds derivation per call (:data:`INDEX_SECONDS`); replaced in tests."""
    return time.monotonic()


def _utc_now() -> dt.date:
    """The day a message without a time of its own was first seen (UTC).

    A day, not a moment: it is all that relative dates need ("yesterday"), and a summary item
    that shows it costs a few tokens, not a full timestamp's.
    """
    return dt.datetime.now(dt.UTC).date()


class ConversationPool(Generic[T]):
    """Live conversations by the framework's id, at most ``max_conversations`` of them.

    The least recently used conversation is dropped first; it is loaded again from the store
    (or rebuilt from the history) when it returns.

    Args:
        factory: Builds a new, empty strategy (one per conversation).
        codec: How the adapter's messages map to the core.
        surface: Which kind of adapter the pool serves (``"middleware"``, ``"classic"``,
            ``"memory"``, ``"block"``, ...): part of every store key, so two surfaces that
            share a store and an id never share derived state.
        name: The adapter instance's name (a block's or a middleware's), part of every store
            key when given; None = none.
        store: Where derived state persists; None = in this process only (unless
            :meth:`get` is given one).
        max_conversations: Live conversations kept in memory; 1000.

    Raises:
        ConfigurationError: ``max_conversations`` is not a positive int.
    """

    def __init__(
        self,
        factory: Callable[[], Strategy],
        codec: Codec[T],
        *,
        surface: str,
        name: str | None = None,
        store: StateStore | None = None,
        max_conversations: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if (
            isinstance(max_conversations, bool)
            or not isinstance(max_conversations, int)
            or max_conversations < 1
        ):
            raise ConfigurationError(f"max_sessions must be an int >= 1, got {max_conversations!r}")
        self.factory = factory
        self.codec = codec
        self.surface = surface
        self.name = name
        self.store = store
        self.max_conversations = max_conversations
        self._conversations: OrderedDict[str, Conversation[T]] = OrderedDict()
        self._lock = threading.Lock()
        _POOLS.add(self)

    def __len__(self) -> int:
        return len(self._conversations)

    def __getstate__(self) -> dict[str, Any]:
        """The pool's configuration and live conversations (each copied whole); no lock."""
        with self._lock:
            state = {k: v for k, v in self.__dict__.items() if k != "_lock"}
            state["_conversations"] = OrderedDict(self._conversations)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> ConversationPool[T]:
        """A pool of copies of the live conversations; the store is shared, not copied."""
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(deep_copy(self.__getstate__(), memo, [self.store]))
        return clone

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._conversations

    def key(self, strategy: Strategy, conversation_id: str) -> str:
        """Store key of a conversation: ``strategy:surface[:name]:id``, each part escaped.

        :func:`~ctxmgmt.store.keys.compose_key`: one-to-one, and byte-identical to the plain
        join for parts without ``%`` or ``:``.
        """
        named = () if self.name is None else (self.name,)
        return compose_key(strategy.name, self.surface, *named, conversation_id)

    def get(self, conversation_id: str | None, *, store: StateStore | None = None) -> Conversation[T]:
        """The live conversation ``conversation_id`` (None = :data:`DEFAULT_SESSION`), created or reloaded.

        ``store`` is used when the pool has none of its own (a middleware without ``store=``
        takes the agent's store, passed per call).
        """
        conversation_id = DEFAULT_SESSION if conversation_id is None else str(conversation_id)
        store = self.store if self.store is not None else store
        with self._lock:
            conversation = self._conversations.get(conversation_id)
            if conversation is None or conversation.store is not store:
                if conversation is not None:
                    conversation.close()
                strategy = self.factory()
                conversation = Conversation(self.key(strategy, conversation_id), strategy, self.codec, store)
                self._conversations[conversation_id] = conversation
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)[1].close()
            else:
                self._conversations.move_to_end(conversation_id)
            return conversation

    def conversations(self) -> list[Conversation[T]]:
        """The live conversations, least recently used first."""
        with self._lock:
            return list(self._conversations.values())

    def drop(self, condition: Callable[[Conversation[T]], bool]) -> None:
        """Drop the live conversations that meet ``condition`` (their stored state stays)."""
        with self._lock:
            for conversation_id, conversation in list(self._conversations.items()):
                if condition(conversation):
                    del self._conversations[conversation_id]

    def most_recent(self) -> Conversation[T] | None:
        """The conversation used last (None before any)."""
        with self._lock:
            return next(reversed(self._conversations.values()), None)

    def discard(self, conversation_id: str | None) -> None:
        """Drop the live conversation and close it (its stored state stays)."""
        with self._lock:
            conversation = self._conversations.pop(
                DEFAULT_SESSION if conversation_id is None else str(conversation_id), None
            )
        if conversation is not None:
            conversation.close()

    @property
    def llm_calls(self) -> int:
        """LLM calls the live conversations' strategies made on their own behalf."""
        return sum(c.strategy.llm_calls for c in self.conversations())
