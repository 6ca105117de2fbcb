"""SQLite state store (standard library): one file, several processes on one host (WAL)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import StaleStateError, StoreError
from ctxmgmt.store.sql import SQLStore
from ctxmgmt.store.watchdog import watch

BUSY_TIMEOUT = 4.0
"""Seconds a writer waits for another connection's write lock (SQLite's ``busy_timeout``)
before the call fails with :class:`StoreError` (the conversation then works without the store
for that call). A write holds the lock for one short transaction (milliseconds), so a longer
wait means a stuck writer; 4 s ends the wait a little before the circuit's 5 s deadline
(:data:`ctxmgmt.store.circuit.DEADLINE`), with SQLite's own error instead of an abandoned call."""

BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT * 1000)
""":data:`BUSY_TIMEOUT` in milliseconds."""

PING_WAIT = 0.25
"""Seconds :meth:`SQLiteStore.ping` waits for the write lock."""

DEADLINE = 5.0
"""Seconds one transaction may run before it is interrupted (``Connection.interrupt()``): a
load of a huge session on a slow disk fails instead of holding the caller."""


class SQLiteStore(SQLStore):
    """Derived state in one SQLite file, in WAL mode (readers never block the writer).

    Each thread gets its own connection; a write takes the database's write lock for its
    transaction (``BEGIN IMMEDIATE``), so concurrent writers in several processes serialise
    and compare-and-set decides who wins.

    Args:
        path: The database file (created with its tables if missing); ``":memory:"`` for a
            private in-memory database (one connection, tests only).
        busy_timeout: Seconds a write waits for another writer's lock (:data:`BUSY_TIMEOUT`).
        deadline: Seconds a transaction may run before it is interrupted (:data:`DEADLINE`);
            None: no limit.

    Example:
        >>> store = SQLiteStore(":memory:")
        >>> store.load("no-such-session") is None
        True
    """

    def __init__(
        self, path: str | Path, *, busy_timeout: float = BUSY_TIMEOUT, deadline: float | None = DEADLINE
    ) -> None:
        self.path = str(path)
        for name, value in (("busy_timeout", busy_timeout), ("deadline", deadline)):
            if value is not None and not 0 <= float(value) < float("inf"):
                raise ConfigurationError(f"{name} must be a non-negative number of seconds, got {value!r}")
        self.busy_timeout = float(busy_timeout)
        self.deadline = None if deadline is None else float(deadline)
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        if self.path == ":memory:":
            self._shared = self._open()
        self._create_tables()

    def __getstate__(self) -> dict[str, Any]:
        """Where the store is: a copy opens connections of its own (``":memory:"``: a new, empty one)."""
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {exc}") from exc
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        return conn

    @contextmanager
    def _transaction(self, *, readonly: bool = False) -> Iterator[Any]:
        conn = self._connection()
        # A write takes the write lock up front; a load reads one WAL snapshot without it.
        begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"
        with self._lock if self._shared is not None else _nolock(), watch(self.deadline, conn.interrupt):
            try:
                conn.execute(begin)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc
            cur = conn.cursor()
            try:
                yield cur
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    # Another writer created the same rows first (a lost compare-and-set).
                    raise StaleStateError(f"SQLite store {self.path!r}: concurrent write: {exc}") from exc
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc
            finally:
                cur.close()

    def ping(self) -> None:
        """Check the file answers and its write lock can be taken within :data:`PING_WAIT`.

        :class:`~ctxmgmt.store.CircuitStore` asks this before it lets calls through again: a
        read succeeds while another writer holds the lock (WAL), so only taking the lock (and
        releasing it at once) shows that writes would not wait out :data:`BUSY_TIMEOUT` again.

        Raises:
            StoreError: the file cannot be opened or the lock is still held.
        """
        if self._shared is not None:
            return
        try:
            conn = sqlite3.connect(self.path, timeout=PING_WAIT, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path!r}: {exc}") from exc

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = self._shared or getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local = threading.local()
        self._shared = None


@contextmanager
def _nolock() -> Iterator[None]:
    yield
