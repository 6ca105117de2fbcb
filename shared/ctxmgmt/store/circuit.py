"""A circuit breaker around a state store: an outage costs one failed call, not every call.

:class:`CircuitStore` passes every call to the store it wraps until one fails for a reason that
is not the data's (the server is down, the disk is gone: a :class:`StoreError` that is neither a
lost compare-and-set nor a corrupt record, or any other exception from the backend). The circuit
then *opens*: every call fails at once with :class:`StoreUnavailableError` (a
:class:`StoreError`, so a session works in process for that call, see
:mod:`ctxmgmt.session.stored_state`) while a background thread retries the store with exponential
backoff (a store's ``ping()`` if it has one; then its ``reconnect()`` if it has one, as
:class:`~ctxmgmt.store.PostgresStore` does to replace pools still waiting out their own
reconnection backoff; then a timed load of an unused key, through the pools calls use). A call
made while the circuit is open wakes the retrying thread (at most every ``first_retry``
seconds), so a store that is back is noticed at the next call, not after the backoff. When a
retry succeeds, deletions asked for during the outage are replayed and the circuit *closes*: the
next call uses the store again, and a session that worked without it catches up by writing what
the store misses.

Every call has a *deadline* (:data:`DEADLINE`): it runs on a thread of the store pool
(:func:`ctxmgmt.adapter.offload.store_pool`) and the caller waits at most that long. A call that
overruns is abandoned (the caller gets :class:`StoreTimeoutError` and works without the store)
and opens the circuit, so a store that stops answering (a PostgreSQL frozen or unreachable
mid-call) costs one call one deadline, and the calls after it nothing. The circuit also opens
on *slowness*: :data:`SLOW_CALLS` calls in a row that each take longer than :data:`SLOW_CALL`
(every one of them answered) open it as an error would, and it closes only when a probe
answers faster than that and every abandoned call has ended (so a late write of an abandoned
call can never land after a deletion replayed on closing).

A store that cannot even be created (a PostgreSQL server down when the application starts)
is created by the same background thread: ``CircuitStore(factory=lambda: PostgresStore(dsn))``
starts open instead of raising, so a memory can start while its store is down.

:func:`ctxmgmt.store.open_store` wraps every store it opens from a URL or DSN, and every
framework store, in one of these.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxmgmt.adapter.offload import run_blocking_stored, store_pool
from ctxmgmt.messages.exceptions import ConfigurationError, CtxMgmtError
from ctxmgmt.store.base import (
    AsyncStateStore,
    CorruptRecordError,
    StaleStateError,
    StateStore,
    StoredSession,
    StoreError,
    TurnEntry,
    aclose_store,
)

logger = logging.getLogger(__name__)

FIRST_RETRY = 0.25
"""Seconds before the first background retry after a failure."""

MAX_RETRY = 1.0
"""Longest wait between background retries, in seconds (the delay doubles up to it)."""

DEADLINE = 5.0
"""Seconds a caller waits for one store call before abandoning it (the circuit then opens).

A store call normally takes milliseconds (a SQLite or PostgreSQL transaction on one session);
5 s is the bound libpq is given for a new connection here too
(:data:`ctxmgmt.store.postgres_pools.CONNECT_TIMEOUT`), and the backends' own limits end a little
before it (:data:`ctxmgmt.store.postgres_pools.STATEMENT_TIMEOUT`, :data:`ctxmgmt.store.sqlite.BUSY_TIMEOUT`),
so a stuck call usually fails with the backend's error rather than being abandoned."""

SLOW_CALL = 1.0
"""Seconds above which an answered store call counts as slow (a hundred times a usual call)."""

SLOW_CALLS = 3
"""Slow calls in a row that open the circuit: a store answering every call in seconds is
treated as unavailable, so conversations answer in process instead of waiting seconds each."""

PROBE_KEY = "\x00ctxmgmt:circuit-probe"
"""The session key a retry loads (never written): any answer, even None, means the store is back."""


class StoreUnavailableError(StoreError):
    """The store failed recently and is being retried in the background; the call skipped it."""


class StoreTimeoutError(StoreUnavailableError):
    """A store call did not answer within its deadline: it was abandoned and the circuit opened."""


class StoreSlowError(StoreUnavailableError):
    """The store answered, but :data:`SLOW_CALLS` calls in a row each took over :data:`SLOW_CALL`."""


class CircuitStore(AsyncStateStore):
    """A :class:`~ctxmgmt.store.base.StateStore` that stops calling a failing store at once.

    Args:
        inner: The store to wrap.
        factory: Instead of ``inner``: creates the store. Called once here; if it raises
            :class:`StoreError`, the circuit starts open and the background thread keeps
            calling it (with backoff) until it succeeds. Other errors (a
            :class:`~ctxmgmt.messages.exceptions.ConfigurationError`) are raised here.
        first_retry: Seconds before the first retry after a failure; :data:`FIRST_RETRY`.
        max_retry: Longest wait between retries, in seconds; :data:`MAX_RETRY`.
        deadline: Seconds a caller waits for one call (:data:`DEADLINE`, 5); a call that
            overruns is abandoned with :class:`StoreTimeoutError` and opens the circuit.
            None: calls run on the caller's thread without a limit.
        slow_call: Seconds above which an answered call counts as slow (:data:`SLOW_CALL`, 1).
        slow_calls: Slow calls in a row that open the circuit (:data:`SLOW_CALLS`, 3); 0 never.

    Raises:
        ConfigurationError: neither or both of ``inner`` and ``factory``, or a limit that is
            not a positive number.

    Example:
        >>> from ctxmgmt.store import SQLiteStore
        >>> store = CircuitStore(SQLiteStore(":memory:"))
        >>> store.load("nobody") is None, store.available
        (None, True)
    """

    def __init__(
        self,
        inner: StateStore | None = None,
        *,
        factory: Callable[[], StateStore] | None = None,
        first_retry: float = FIRST_RETRY,
        max_retry: float = MAX_RETRY,
        deadline: float | None = DEADLINE,
        slow_call: float = SLOW_CALL,
        slow_calls: int = SLOW_CALLS,
    ) -> None:
        if (inner is None) == (factory is None):
            raise ConfigurationError("CircuitStore takes a store or a factory (one of them)")
        self.first_retry, self.max_retry = float(first_retry), float(max_retry)
        for name, value in (("deadline", deadline), ("slow_call", slow_call)):
            if value is not None and not 0 < float(value) < float("inf"):
                raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(slow_calls, bool) or not isinstance(slow_calls, int) or slow_calls < 0:
            raise ConfigurationError(f"slow_calls must be a non-negative integer, got {slow_calls!r}")
        self.deadline = None if deadline is None else float(deadline)
        self.slow_call, self.slow_calls = float(slow_call), slow_calls
        self._slow_streak = 0
        self._slow_trip = False
        self._abandoned: set[concurrent.futures.Future[Any]] = set()
        self._factory = factory
        self._inner: StateStore | None = inner
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._attempted = 0.0
        self._retrier: threading.Thread | None = None
        self._failure: str | None = None
        self._since = 0.0
        self._pending_deletes: list[str] = []
        if inner is None:
            assert factory is not None
            try:
                self._inner = factory()
            except StoreError as exc:
                self._trip(exc)

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy is a new circuit (closed, no retry thread) on a copy of the store or its factory."""
        settings: dict[str, Any] = {
            "first_retry": self.first_retry,
            "max_retry": self.max_retry,
            "deadline": self.deadline,
            "slow_call": self.slow_call,
            "slow_calls": self.slow_calls,
        }
        if self._factory is not None:
            return (functools.partial(CircuitStore, factory=self._factory, **settings), ())
        return (functools.partial(CircuitStore, self._inner, **settings), ())

    def __repr__(self) -> str:
        state = "closed" if self.available else "open"
        return f"CircuitStore({self._inner!r}, {state})"

    @property
    def inner(self) -> StateStore | None:
        """The wrapped store (None while a store made by ``factory`` could not be created yet)."""
        return self._inner

    @property
    def available(self) -> bool:
        """True while calls go to the store (the circuit is closed)."""
        return self._failure is None and self._inner is not None

    # -- the circuit ---------------------------------------------------------------------------
    def _trip(self, exc: BaseException) -> None:
        """Open the circuit (if closed) and start retrying in the background."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._failure is None:
                self._since = time.monotonic()
                logger.warning(
                    "state store %r failed (%s: %s); calls skip it until it answers again",
                    self._inner,
                    type(exc).__name__,
                    exc,
                )
            self._failure = f"{type(exc).__name__}: {exc}"
            self._slow_trip = isinstance(exc, StoreSlowError)
            if self._retrier is None or not self._retrier.is_alive():
                self._retrier = threading.Thread(target=self._retry, name="ctxmgmt-store-retry", daemon=True)
                self._retrier.start()

    def _retry(self) -> None:
        """Background: call the store with backoff until it answers, then close the circuit."""
        delay = self.first_retry
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            self._attempted = time.monotonic()
            try:
                inner = self._inner
                if inner is None:
                    assert self._factory is not None
                    inner = self._factory()
                    with self._lock:
                        if self._stop.is_set():
                            inner.close()
                            return
                        self._inner = inner
                with self._lock:
                    busy = sum(not future.done() for future in self._abandoned)
                if busy:  # a late write of theirs could land after what closing replays
                    raise StoreTimeoutError(f"{busy} abandoned call(s) still running")
                ping = getattr(inner, "ping", None)
                if callable(ping):
                    ping()  # asks the server itself, not a pool waiting out its own backoff
                reconnect = getattr(inner, "reconnect", None)
                if callable(reconnect):
                    reconnect()
                began = time.monotonic()
                inner.load(PROBE_KEY)  # a real call, through the pools calls will use
                took = time.monotonic() - began
                if self._slow_trip and took > self.slow_call:
                    raise StoreSlowError(f"a probe took {took:.2f} s")
                with self._lock:
                    pending, self._pending_deletes = self._pending_deletes, []
                for key in pending:
                    try:
                        inner.delete(key)
                    except Exception:
                        with self._lock:
                            self._pending_deletes[:0] = pending[pending.index(key) :]
                        raise
            except Exception as exc:  # noqa: BLE001 - any failure: try again later
                logger.debug("state store still unavailable: %s", exc)
                with self._lock:
                    self._failure = f"{type(exc).__name__}: {exc}"
                delay = min(delay * 2, self.max_retry)
                continue
            with self._lock:
                self._failure = None
                self._retrier = None
                # half open: after slowness, one more slow call opens the circuit again
                self._slow_streak = max(0, self.slow_calls - 1) if self._slow_trip else 0
            logger.warning(
                "state store %r answers again after %.1f s", self._inner, time.monotonic() - self._since
            )
            return

    def _store(self) -> StateStore:
        """The wrapped store, or :class:`StoreUnavailableError` at once while the circuit is open."""
        inner, failure = self._inner, self._failure
        if failure is None and inner is not None:
            return inner
        if self._stop.is_set():
            raise StoreError("the state store is closed")
        now = time.monotonic()
        if now - self._attempted >= self.first_retry:
            self._wake.set()  # retry now (in the background): the store may be back
        waited = now - self._since
        raise StoreUnavailableError(
            f"state store unavailable for {waited:.1f} s, retried in the background ({failure})"
        )

    def _bounded(self, inner: StateStore, method: str, args: Any, kwargs: Any) -> Any:
        """``inner.method(...)`` on the store pool within the deadline, else :class:`StoreTimeoutError`."""
        call = functools.partial(contextvars.copy_context().run, getattr(inner, method), *args, **kwargs)
        future = store_pool().submit(call)
        try:
            return future.result(timeout=self.deadline)
        except concurrent.futures.TimeoutError:
            if not future.cancel():  # running: it ends when the backend gives up or answers
                with self._lock:
                    self._abandoned = {f for f in self._abandoned if not f.done()}
                    self._abandoned.add(future)
            raise StoreTimeoutError(
                f"state store {inner!r} did not answer {method}() within {self.deadline:g} s"
            ) from None

    def _timed(self, seconds: float) -> None:
        """Count an answered call; :data:`SLOW_CALLS` slow ones in a row open the circuit."""
        if seconds <= self.slow_call or self.slow_calls == 0:
            self._slow_streak = 0
            return
        self._slow_streak += 1
        if self._slow_streak >= self.slow_calls:
            self._slow_streak = 0
            self._trip(
                StoreSlowError(
                    f"{self.slow_calls} calls in a row took over {self.slow_call:g} s "
                    f"(the last {seconds:.2f} s)"
                )
            )

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        inner = self._store()
        began = time.monotonic()
        try:
            if self.deadline is None:
                result = getattr(inner, method)(*args, **kwargs)
            else:
                result = self._bounded(inner, method, args, kwargs)
        except (StaleStateError, CorruptRecordError):
            raise  # the store answered: the data is what is wrong
        except StoreError as exc:
            self._trip(exc)
            raise
        except CtxMgmtError:
            raise
        except Exception as exc:  # a backend's own error (a framework store's driver, an OSError)
            self._trip(exc)
            raise StoreError(f"state store failed: {type(exc).__name__}: {exc}") from exc
        self._timed(time.monotonic() - began)
        return result

    # -- StateStore ----------------------------------------------------------------------------
    def load(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """:meth:`StateStore.load` of the wrapped store; fails at once while it is unavailable."""
        return self._call("load", key, turns=turns)  # type: ignore[no-any-return]

    def append(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """:meth:`StateStore.append` of the wrapped store; fails at once while it is unavailable."""
        return self._call(  # type: ignore[no-any-return]
            "append", key, entries, expected_version=expected_version, strategy=strategy, config=config
        )

    def truncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """:meth:`StateStore.truncate` of the wrapped store; fails at once while it is unavailable."""
        return self._call("truncate", key, turns, expected_version=expected_version)  # type: ignore[no-any-return]

    def delete(self, key: str) -> None:
        """Remove the session; while the store is unavailable, it is removed when the store returns.

        Deletions are what erasure relies on, so one asked for during an outage is kept and
        replayed (before any other call reaches the store again) instead of being dropped.
        """
        try:
            self._call("delete", key)
        except StoreError as exc:
            if isinstance(exc, StaleStateError | CorruptRecordError) or self._stop.is_set():
                raise
            with self._lock:
                if key not in self._pending_deletes:
                    self._pending_deletes.append(key)
            if self._failure is None:  # the delete itself failed without opening the circuit
                raise
            logger.warning("state store unavailable: session %r is deleted when it answers again", key)

    def close(self) -> None:
        """Stop retrying and close the wrapped store."""
        inner = self._stop_retrying()
        if inner is not None:
            inner.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code: the wrapped store closed by its ``aclose`` when it has one."""
        inner = await run_blocking_stored(self._stop_retrying)
        if inner is not None:
            await aclose_store(inner)

    def _stop_retrying(self) -> StateStore | None:
        """End the retry thread (waiting up to 5 s for it); the wrapped store, if there is one."""
        self._stop.set()
        self._wake.set()
        retrier = self._retrier
        if retrier is not None and retrier is not threading.current_thread():
            retrier.join(timeout=5)
        return self._inner
