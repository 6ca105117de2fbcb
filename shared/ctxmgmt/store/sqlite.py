"""SQLite state store (standard library): one file, several processes on one host (WAL)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxmgmt.store.base import StaleStateError, StoreError
from ctxmgmt.store.sql import SQLStore

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another process's write lock (30 s)."""


class SQLiteStore(SQLStore):
    """Derived state in one SQLite file, in WAL mode (readers never block the writer).

    Each thread gets its own connection; a write takes the database's write lock for its
    transaction (``BEGIN IMMEDIATE``), so concurrent writers in several processes serialise
    and compare-and-set decides who wins.

    Args:
        path: The database file (created with its tables if missing); ``":memory:"`` for a
            private in-memory database (one connection, tests only).

    Example:
        >>> store = SQLiteStore(":memory:")
        >>> store.load("no-such-session") is None
        True
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
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
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
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
        with self._lock if self._shared is not None else _nolock():
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
