"""The connections of a :class:`~ctxmgmt.store.postgres.PostgresStore`: psycopg pools and their limits.

One synchronous :class:`psycopg_pool.ConnectionPool` and one
:class:`psycopg_pool.AsyncConnectionPool` per event loop, each connection checked before use and
cut when a call passes its deadline; a failure is reported as the store's error, with libpq's
reason when the server cannot be reached. psycopg is imported when a pool set is created, never
by ``import ctxmgmt``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import StaleStateError, StoreError
from ctxmgmt.store.watchdog import shut_down_socket, watch

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

logger = logging.getLogger(__name__)

INSTALL_HINT = 'PostgresStore needs psycopg 3 and psycopg-pool: pip install "ctxmgmt[postgres]"'

CONNECT_TIMEOUT = 5
"""Seconds libpq waits for a new connection (``connect_timeout``) unless the conninfo or
``connect_kwargs`` set it: a server that does not answer is reported in seconds, not minutes."""

DEADLINE = 5.0
"""Seconds one store call (a transaction, or the check of a pooled connection) may take before
its connection is cut, client side: a server that stops answering mid-call (frozen, a host
gone without a TCP reset) costs one call this long, not the minutes to hours the operating
system takes to notice. The same figure as :data:`CONNECT_TIMEOUT` and as the circuit's
deadline (:data:`ctxmgmt.store.circuit.DEADLINE`); a store call normally takes milliseconds."""

STATEMENT_TIMEOUT = 4.0
"""Seconds the server lets one statement of a store call run (``SET LOCAL statement_timeout``
and ``lock_timeout`` in each transaction), so a statement stuck behind a lock or a slow plan
is cancelled by the server itself, its locks released, a little before :data:`DEADLINE`."""

FREE_CONNECTION_WAIT = 0.25
"""Seconds a call waits for a free pooled connection before checking the server directly: if a
new connection fails, the call fails at once (the server is down) instead of waiting ``timeout``."""

_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def import_psycopg() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, or :class:`ConfigurationError` naming the extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigurationError(f"{INSTALL_HINT} ({exc})") from exc
    return psycopg, psycopg_pool


def _conninfo_keys(psycopg: Any, conninfo: str) -> set[str]:
    """The parameters ``conninfo`` sets (none if it does not parse: connecting reports that)."""
    try:
        return set(psycopg.conninfo.conninfo_to_dict(conninfo))
    except psycopg.Error:
        return set()


def redact(conninfo: str) -> str:
    """``conninfo`` without its password, for messages."""
    psycopg, _ = import_psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "<unparsable conninfo>"
    params.pop("password", None)
    return str(psycopg.conninfo.make_conninfo(**params))


CLOSE_SECONDS = 2.0
"""How long :meth:`PostgresPools.close` waits for a pool's workers (twice that for an async pool)."""


class PostgresPools:
    """The connection pools of one PostgreSQL database, under a deadline per call.

    The base of :class:`~ctxmgmt.store.postgres.PostgresStore`, which adds the tables and the
    store's methods; its arguments are the store's (see there). It opens the synchronous pool
    at once (a server that is down fails here, with libpq's reason) and an async pool per event
    loop on first use; :meth:`_transaction` and :meth:`_atransaction` lend a connection for one
    transaction.

    Raises:
        ConfigurationError: psycopg is not installed, or ``conninfo`` is not a string or a pool.
        StoreError: the server cannot be reached.
    """

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
        psycopg, psycopg_pool = import_psycopg()
        self.deadline = None if deadline is None else _positive(deadline, "deadline")
        self._set_timeouts: str | None = None
        if statement_timeout is not None:
            ms = max(1, int(_positive(statement_timeout, "statement_timeout") * 1000))
            self._set_timeouts = (
                f"SELECT set_config('statement_timeout', '{ms}', true), "
                f"set_config('lock_timeout', '{ms}', true)"
            )
        self._psycopg = psycopg
        self._pool_module = psycopg_pool
        self.min_size, self.max_size, self.timeout = min_size, max_size, timeout
        self._kwargs: dict[str, Any] = dict(connect_kwargs or {})
        self._pool: ConnectionPool | None = None
        self._own_pool = True
        self._given_apool: AsyncConnectionPool | None = None
        self._apools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool] = {}
        self._apools_lock = threading.Lock()
        self._closed = False
        if isinstance(conninfo, str):
            self.conninfo = conninfo
        elif isinstance(conninfo, psycopg_pool.ConnectionPool):
            self._pool, self._own_pool = conninfo, False
            self.conninfo = str(conninfo.conninfo)
            self._kwargs = {**dict(conninfo.kwargs or {}), **self._kwargs}
        elif isinstance(conninfo, psycopg_pool.AsyncConnectionPool):
            self._given_apool = conninfo
            self.conninfo = str(conninfo.conninfo)
            self._kwargs = {**dict(conninfo.kwargs or {}), **self._kwargs}
        else:
            raise ConfigurationError(
                "PostgresStore takes a DSN/conninfo string, a psycopg_pool.ConnectionPool or an "
                f"AsyncConnectionPool, not {type(conninfo).__name__}"
            )
        if "connect_timeout" not in self._kwargs and "connect_timeout" not in _conninfo_keys(
            psycopg, self.conninfo
        ):
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT
        if self._pool is None:
            self._pool = self._open_pool()

    # -- connections -------------------------------------------------------------------------
    def _pool_options(self, kind: Any, name: str) -> dict[str, Any]:
        """Keyword arguments of a sync or async pool of this store.

        Connections are checked before use, so the pool survives a server restart.
        """
        return {
            "conninfo": self.conninfo,
            "kwargs": self._kwargs,
            "min_size": self.min_size,
            "max_size": self.max_size,
            "timeout": self.timeout,
            "open": False,
            "name": name,
            "check": self._check_connection
            if kind is self._pool_module.ConnectionPool
            else kind.check_connection,
        }

    def _check_connection(self, conn: Any) -> None:
        """The pool's check of a connection before use, under the deadline (a frozen server fails it)."""
        with watch(self.deadline, _cutter(conn, self.deadline)):
            self._pool_module.ConnectionPool.check_connection(conn)

    def _open_pool(self) -> ConnectionPool:
        reason = self._probe()  # a server that is down fails here, in about a connection attempt
        if reason is not None:
            raise StoreError(reason)
        pool = self._pool_module.ConnectionPool(
            **self._pool_options(self._pool_module.ConnectionPool, "ctxmgmt")
        )
        try:
            pool.open(wait=True, timeout=self.timeout)
        except self._pool_module.PoolTimeout:
            pool.close()
            raise StoreError(self._unreachable()) from None
        except self._psycopg.Error as exc:
            pool.close()
            raise StoreError(f"cannot connect to PostgreSQL ({redact(self.conninfo)}): {exc}") from exc
        return pool

    def _probe(self) -> str | None:
        """None if a direct connection to the server succeeds, else why it failed (libpq's reason)."""
        try:
            conn = self._psycopg.connect(self.conninfo, **self._kwargs)
        except self._psycopg.Error as exc:
            return self._unreachable_message(exc)
        conn.close()
        return None

    async def _aprobe(self) -> str | None:
        """:meth:`_probe` without blocking the event loop."""
        try:
            conn = await self._psycopg.AsyncConnection.connect(self.conninfo, **self._kwargs)
        except self._psycopg.Error as exc:
            return self._unreachable_message(exc)
        await conn.close()
        return None

    def ping(self) -> None:
        """Check the server answers a new connection (not through the pool).

        Raises:
            StoreError: it does not (libpq's reason).
        """
        reason = self._probe()
        if reason is not None:
            raise StoreError(reason)

    def reconnect(self) -> None:
        """Replace the connection pools after an outage, so no call waits for their reconnection backoff.

        A pool this store opened is replaced by a new one (opened now, the server answering);
        a pool passed in is asked to check its connections. Async pools are reopened on
        their next use. :class:`~ctxmgmt.store.circuit.CircuitStore` calls this when the
        server answers again.

        Raises:
            StoreError: the server does not answer.
        """
        if self._closed:
            return
        with self._apools_lock:
            apools, self._apools = self._apools, {}
        for loop, apool in apools.items():
            if not loop.is_closed() and loop.is_running():
                asyncio.run_coroutine_threadsafe(apool.close(), loop)
        if not self._own_pool:
            assert self._pool is not None
            self._pool.check()
            return
        old, self._pool = self._pool, self._open_pool()
        if old is not None:
            old.close(timeout=1.0)

    def _unreachable(self) -> str:
        """Why the server cannot be reached: one direct connection attempt gives libpq's reason."""
        return self._probe() or self._unreachable_message(None)

    async def _aunreachable(self) -> str:
        """:meth:`_unreachable` without blocking the event loop."""
        return await self._aprobe() or self._unreachable_message(None)

    def _unreachable_message(self, exc: BaseException | None) -> str:
        reason = str(exc).strip() if exc is not None else ""
        size = self._pool.max_size if self._pool is not None else self.max_size
        reason = reason or f"no free connection within {self.timeout:g} s (pool max_size={size})"
        return f"cannot connect to PostgreSQL ({redact(self.conninfo)}): {reason}"

    def _translate(self, exc: BaseException, unreachable: str | None = None) -> BaseException:
        """A psycopg/pool error as the store's error (conflicts as :class:`StaleStateError`)."""
        errors = self._psycopg.errors
        conflict = self._psycopg.IntegrityError | errors.SerializationFailure | errors.DeadlockDetected
        if isinstance(exc, conflict):
            return StaleStateError(f"concurrent write to the same session: {exc}".strip())
        if isinstance(exc, self._pool_module.PoolClosed):
            return StoreError(f"the PostgreSQL connection pool is closed: {exc}")
        if isinstance(exc, self._pool_module.PoolTimeout):
            return StoreError(unreachable or self._unreachable())
        if isinstance(exc, self._psycopg.OperationalError):
            return StoreError(f"PostgreSQL ({redact(self.conninfo)}) failed: {exc}")
        return StoreError(f"PostgreSQL error: {exc}")

    def _is_db_error(self, exc: BaseException) -> bool:
        pool_errors = self._pool_module.PoolTimeout | self._pool_module.PoolClosed
        return isinstance(exc, self._psycopg.Error | pool_errors)

    @contextmanager
    def _transaction(self, *, readonly: bool = False) -> Iterator[Any]:
        if self._closed or self._pool is None:
            raise StoreError("PostgresStore is closed")
        pool = self._pool
        try:
            try:
                conn = pool.getconn(timeout=min(self.timeout, FREE_CONNECTION_WAIT))
            except self._pool_module.PoolTimeout:
                reason = self._probe()  # none free: a busy pool, or a server that is down?
                if reason is not None:
                    raise StoreError(reason) from None
                conn = pool.getconn(timeout=max(self.timeout - FREE_CONNECTION_WAIT, 0.001))
            try:
                with watch(self.deadline, _cutter(conn, self.deadline)):
                    with conn, conn.cursor(binary=True) as cur:  # commit, or roll back on error
                        if readonly:
                            cur.execute(_SNAPSHOT)
                        if self._set_timeouts is not None:
                            cur.execute(self._set_timeouts)
                        yield cur
            finally:
                pool.putconn(conn)
        except Exception as exc:
            if self._is_db_error(exc):
                raise self._translate(exc) from exc
            raise

    @asynccontextmanager
    async def _atransaction(self, *, readonly: bool = False) -> AsyncIterator[Any]:
        try:
            pool = await self._async_pool()
            try:
                conn = await pool.getconn(timeout=min(self.timeout, FREE_CONNECTION_WAIT))
            except self._pool_module.PoolTimeout:
                reason = await self._aprobe()  # none free: a busy pool, or a server that is down?
                if reason is not None:
                    raise StoreError(reason) from None
                conn = await pool.getconn(timeout=max(self.timeout - FREE_CONNECTION_WAIT, 0.001))
            try:
                with watch(self.deadline, _cutter(conn, self.deadline)):
                    async with conn, conn.cursor(binary=True) as cur:  # commit, or roll back on error
                        if readonly:
                            await cur.execute(_SNAPSHOT)
                        if self._set_timeouts is not None:
                            await cur.execute(self._set_timeouts)
                        yield cur
            finally:
                await pool.putconn(conn)
        except Exception as exc:
            if not self._is_db_error(exc):
                raise
            unreachable = None
            if isinstance(exc, self._pool_module.PoolTimeout):
                unreachable = await self._aunreachable()
            raise self._translate(exc, unreachable) from exc

    async def _async_pool(self) -> AsyncConnectionPool:
        """This event loop's async pool, opened on first use."""
        if self._closed:
            raise StoreError("PostgresStore is closed")
        pool: AsyncConnectionPool | None = self._given_apool
        if pool is None:
            loop = asyncio.get_running_loop()
            with self._apools_lock:
                pool = self._apools.get(loop)
                if pool is None:
                    for old in [old for old in self._apools if old.is_closed()]:
                        del self._apools[old]  # that pool died with its loop
                    kind = self._pool_module.AsyncConnectionPool
                    pool = self._apools[loop] = kind(**self._pool_options(kind, "ctxmgmt-async"))
        await pool.open(wait=False)
        return pool

    # -- closing -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the pools this store opened, awaiting the current event loop's async pool."""
        loop = asyncio.get_running_loop()
        with self._apools_lock:
            mine = self._apools.pop(loop, None)
        if mine is not None:
            await mine.close()
        self.close()

    def close(self) -> None:
        """Close the pools this store opened; pools passed in stay open. Idempotent.

        An async pool is closed on its event loop if that loop still exists (prefer
        :meth:`aclose` from async code); one whose loop has ended is dropped.
        """
        self._closed = True
        with self._apools_lock:
            apools, self._apools = self._apools, {}
        for loop, pool in apools.items():
            if loop.is_closed():
                continue
            try:
                if loop.is_running():
                    future = asyncio.run_coroutine_threadsafe(pool.close(timeout=CLOSE_SECONDS), loop)
                    if not _in_loop(loop):
                        future.result(timeout=2 * CLOSE_SECONDS)
                else:
                    closing = asyncio.wait_for(pool.close(timeout=CLOSE_SECONDS), 2 * CLOSE_SECONDS)
                    loop.run_until_complete(closing)
            except Exception:  # noqa: BLE001 - best effort: the loop is going away
                pass
        if self._pool is not None and self._own_pool:
            self._pool.close(timeout=CLOSE_SECONDS)


def _positive(value: float, name: str) -> float:
    number = float(value)
    if not number > 0 or number == float("inf"):
        raise ConfigurationError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return number


def _cutter(conn: Any, seconds: float | None) -> Any:
    """The watchdog's breaker for ``conn``: shut its socket down, so a blocked call fails at once."""

    def cut() -> None:
        if conn.closed:
            return
        logger.warning("PostgreSQL call ran past its %.3g s deadline; its connection is cut", seconds or 0)
        shut_down_socket(conn.fileno(), _family(conn))

    return cut


def _family(conn: Any) -> int:
    """The address family of ``conn``'s socket: a unix socket when its host is a directory."""
    host = str(conn.info.host or "")
    if host.startswith(("/", "@")):
        return socket.AF_UNIX
    try:
        return socket.AF_INET6 if ":" in str(conn.info.hostaddr or "") else socket.AF_INET
    except Exception:  # noqa: BLE001 - libpq without hostaddr: IPv4 is the usual case
        return socket.AF_INET


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
