"""PostgreSQL state store (psycopg 3): many application servers sharing one database.

Needs the ``postgres`` extra (``pip install "ctxmgmt[postgres]"``: psycopg 3 and psycopg-pool);
psycopg is imported when a :class:`PostgresStore` is created, never by ``import ctxmgmt``. Its
connections (pools, deadlines, probes, error translation) are
:class:`~ctxmgmt.store.postgres_pools.PostgresPools`; this module adds the tables and the
store's methods.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ctxmgmt.store.base import StoredSession, TurnEntry
from ctxmgmt.store.keys import MAX_KEY_BYTES as MAX_KEY_BYTES  # re-exported
from ctxmgmt.store.keys import shown_key
from ctxmgmt.store.postgres_pools import CLOSE_SECONDS as CLOSE_SECONDS
from ctxmgmt.store.postgres_pools import CONNECT_TIMEOUT as CONNECT_TIMEOUT
from ctxmgmt.store.postgres_pools import DEADLINE as DEADLINE
from ctxmgmt.store.postgres_pools import FREE_CONNECTION_WAIT as FREE_CONNECTION_WAIT
from ctxmgmt.store.postgres_pools import INSTALL_HINT as INSTALL_HINT
from ctxmgmt.store.postgres_pools import STATEMENT_TIMEOUT as STATEMENT_TIMEOUT
from ctxmgmt.store.postgres_pools import PostgresPools
from ctxmgmt.store.postgres_pools import redact as redact
from ctxmgmt.store.sql import (
    TABLES,
    Plan,
    SQLStore,
    append_plan,
    arun_plan,
    delete_plan,
    load_plan,
    truncate_plan,
)
from ctxmgmt.store.sql import storage_key as storage_key  # re-exported

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

T = TypeVar("T")

_TABLES_EXIST = (
    "SELECT to_regclass('ctxmgmt_sessions'), to_regclass('ctxmgmt_turns'), to_regclass('ctxmgmt_records')"
)
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7301843212)"  # concurrent CREATE TABLE IF NOT EXISTS races


class PostgresStore(PostgresPools, SQLStore):
    """Derived state in PostgreSQL, through a psycopg connection pool (sync and native async).

    Every write is one transaction that compare-and-sets the session's version (``UPDATE ...
    WHERE version = expected``; a concurrent first write of the same session loses on the
    primary key), so any number of processes on any number of hosts can add to the same
    session without losing or duplicating turns: the loser gets :class:`StaleStateError`,
    reloads and retries. A load reads one snapshot (``REPEATABLE READ``).

    The synchronous methods use a :class:`psycopg_pool.ConnectionPool`; ``aload``,
    ``aappend``, ``atruncate`` and ``adelete`` use a :class:`psycopg_pool.AsyncConnectionPool`
    opened on first async use (one per event loop). Create the store in each worker process
    (after a fork): connections cannot be shared across processes.

    Args:
        conninfo: A DSN (``"postgresql://user@host/db"``), a libpq conninfo string
            (``"host=/run/postgresql dbname=app"``), or an existing ``ConnectionPool`` or
            ``AsyncConnectionPool`` (shared, not closed by :meth:`close`; the other kind of
            pool is created from its conninfo).
        min_size: Connections each pool keeps open.
        max_size: Most connections each pool opens.
        timeout: Seconds to wait for a free pooled connection before :class:`StoreError`
            while the server answers (a busy pool); 30. When no pooled connection is free
            within :data:`FREE_CONNECTION_WAIT` and a direct connection fails, the call fails
            at once.
        connect_kwargs: Extra ``psycopg.connect`` arguments for the pools this store creates
            (e.g. ``{"prepare_threshold": None}`` behind PgBouncer in transaction mode).
        deadline: Seconds a call may hold a connection before the connection is cut and the
            call fails with :class:`StoreError` (:data:`DEADLINE`, 5); None: no limit.
        statement_timeout: Seconds the server lets one statement run, and wait for a lock
            (:data:`STATEMENT_TIMEOUT`, 4), set per transaction (``SET LOCAL``, so it never
            leaks to other users of a connection behind PgBouncer); None: the server's setting.

    Raises:
        ConfigurationError: psycopg is not installed.
        StoreError: the server cannot be reached or the tables cannot be created.
    """

    placeholder = "%s"
    blob = "BYTEA"

    def __init__(
        self,
        conninfo: str | ConnectionPool | AsyncConnectionPool,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        connect_kwargs: Mapping[str, Any] | None = None,
        deadline: float | None = DEADLINE,
        statement_timeout: float | None = STATEMENT_TIMEOUT,
    ) -> None:
        super().__init__(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            connect_kwargs=connect_kwargs,
            deadline=deadline,
            statement_timeout=statement_timeout,
        )
        self._create_tables()

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.conninfo)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy connects to the same database with pools of its own.

        Raises:
            TypeError: the store was built on a pool given to it (pass a DSN to copy it).
        """
        if not self._own_pool or self._given_apool is not None:
            raise TypeError("a PostgresStore built on a given pool cannot be copied; build it from a DSN")
        make = functools.partial(
            PostgresStore,
            self.conninfo,
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.timeout,
            connect_kwargs=self._kwargs,
        )
        return (make, ())

    async def _arun(self, plan: Plan[T], *, readonly: bool = False) -> T:
        async with self._atransaction(readonly=readonly) as cur:
            return await arun_plan(cur, plan, self.placeholder)

    def _create_tables(self) -> None:
        """Create the tables unless they exist (then no CREATE privilege is needed)."""
        with self._transaction() as cur:
            cur.execute(_TABLES_EXIST)
            if all(cur.fetchone() or ()):
                return
            cur.execute(_SCHEMA_LOCK)
            for statement in TABLES:
                cur.execute(statement.format(blob=self.blob))

    # -- native async --------------------------------------------------------------------------
    async def aload(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """Async :meth:`load` on the async pool."""
        return await self._arun(load_plan(self._storage_key(key), turns), readonly=True)

    async def aappend(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """Async :meth:`append` on the async pool."""
        return await self._arun(
            append_plan(
                self._storage_key(key),
                entries,
                expected_version=expected_version,
                strategy=strategy,
                config=config,
                label=shown_key(key),
            )
        )

    async def atruncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Async :meth:`truncate` on the async pool."""
        return await self._arun(
            truncate_plan(
                self._storage_key(key), turns, expected_version=expected_version, label=shown_key(key)
            )
        )

    async def adelete(self, key: str) -> None:
        """Async :meth:`delete` on the async pool."""
        await self._arun(delete_plan(self._storage_key(key)))
