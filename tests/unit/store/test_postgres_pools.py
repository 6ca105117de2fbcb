"""PostgresPools: the connections of a PostgresStore (pools, deadlines, probes, error translation).

The tests without a server run everywhere; those that take ``pg_dsn`` start a throwaway
PostgreSQL server (``tests/conftest.py``; skipped where its binaries are missing). The store's
own contract runs in ``tests/integration/test_stores.py``.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from types import SimpleNamespace

import pytest

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store import postgres_pools
from ctxmgmt.store.base import StaleStateError, StoreError
from ctxmgmt.store.postgres_pools import (
    INSTALL_HINT,
    STATEMENT_TIMEOUT,
    PostgresPools,
    import_psycopg,
    redact,
)

pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")


# -- without a server ------------------------------------------------------------------------------
def test_a_missing_driver_is_a_configuration_error_naming_the_extra(monkeypatch) -> None:
    psycopg, psycopg_pool = import_psycopg()
    assert psycopg.__name__ == "psycopg" and psycopg_pool.__name__ == "psycopg_pool"
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(ConfigurationError, match="pip install") as error:
        import_psycopg()
    assert INSTALL_HINT in str(error.value)


def test_redact_drops_the_password_only() -> None:
    shown = redact("host=/run/postgresql dbname=app user=ada password=s3cret")
    assert "s3cret" not in shown and "dbname=app" in shown and "user=ada" in shown
    assert "s3cret" not in redact("postgresql://ada:s3cret@db.example/app")
    assert redact("host='unterminated") == "<unparsable conninfo>"


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan")])
def test_deadline_and_statement_timeout_must_be_positive_seconds(bad: object) -> None:
    for name in ("deadline", "statement_timeout"):
        with pytest.raises(ConfigurationError, match=name):
            PostgresPools("host=/nonexistent", **{name: bad})  # type: ignore[arg-type]


def test_anything_but_a_conninfo_or_a_pool_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="PostgresStore takes a DSN/conninfo string"):
        PostgresPools(42)  # type: ignore[arg-type]


def test_a_server_that_is_not_there_fails_at_once_with_libpqs_reason(tmp_path) -> None:
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as error:
        PostgresPools(f"host={tmp_path} dbname=app user=ada password=s3cret")
    assert "s3cret" not in str(error.value)


def test_the_socket_family_follows_the_host() -> None:
    def conn(host: str, hostaddr: str = "") -> SimpleNamespace:
        return SimpleNamespace(info=SimpleNamespace(host=host, hostaddr=hostaddr))

    assert postgres_pools._family(conn("/run/postgresql")) == socket.AF_UNIX
    assert postgres_pools._family(conn("@abstract")) == socket.AF_UNIX
    assert postgres_pools._family(conn("db.example", "::1")) == socket.AF_INET6
    assert postgres_pools._family(conn("db.example", "10.0.0.7")) == socket.AF_INET


def test_the_cutter_shuts_an_open_connection_down_and_leaves_a_closed_one(monkeypatch, caplog) -> None:
    cuts: list[tuple[int, int]] = []
    monkeypatch.setattr(postgres_pools, "shut_down_socket", lambda fd, family: cuts.append((fd, family)))
    connection = SimpleNamespace(
        closed=False, fileno=lambda: 7, info=SimpleNamespace(host="/tmp", hostaddr="")
    )
    with caplog.at_level("WARNING", logger="ctxmgmt.store.postgres_pools"):
        postgres_pools._cutter(connection, 5.0)()
    assert cuts == [(7, socket.AF_UNIX)] and "5 s deadline" in caplog.text
    connection.closed = True
    postgres_pools._cutter(connection, 5.0)()
    assert len(cuts) == 1


def test_in_loop_tells_whether_the_caller_runs_on_that_loop() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert not postgres_pools._in_loop(loop)

        async def inside() -> bool:
            return postgres_pools._in_loop(asyncio.get_running_loop())

        assert loop.run_until_complete(inside())
    finally:
        loop.close()


# -- with a throwaway server -----------------------------------------------------------------------
def test_postgres_pools_lend_one_transaction_with_the_limits_set(pg_dsn) -> None:
    pools = PostgresPools(pg_dsn)
    try:
        pools.ping()
        with pools._transaction() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == f"{int(STATEMENT_TIMEOUT)}s"
            cur.execute("SHOW lock_timeout")
            assert cur.fetchone()[0] == f"{int(STATEMENT_TIMEOUT)}s"
        with pools._transaction(readonly=True) as cur:
            cur.execute("SHOW transaction_isolation")
            assert cur.fetchone()[0] == "repeatable read"
    finally:
        pools.close()
    with pytest.raises(StoreError, match="PostgresStore is closed"):
        with pools._transaction():
            pass
    pools.close()  # idempotent


def test_postgres_pools_report_a_conflict_as_a_stale_state(pg_dsn) -> None:
    pools = PostgresPools(pg_dsn, statement_timeout=None)
    try:
        with pools._transaction() as cur:
            cur.execute("CREATE TABLE unique_rows (k int PRIMARY KEY)")
            cur.execute("INSERT INTO unique_rows VALUES (1)")
        with pytest.raises(StaleStateError, match="concurrent write"):
            with pools._transaction() as cur:
                cur.execute("INSERT INTO unique_rows VALUES (1)")
        with pools._transaction() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == "0"  # the server's setting: none set
    finally:
        pools.close()


def test_postgres_pools_open_an_async_pool_per_event_loop(pg_dsn) -> None:
    pools = PostgresPools(pg_dsn)

    async def one_query() -> int:
        async with pools._atransaction(readonly=True) as cur:
            await cur.execute("SELECT 41 + 1")
            row = await cur.fetchone()
        await pools.aclose()
        return int(row[0])

    try:
        assert asyncio.run(one_query()) == 42
        assert pools._closed and not pools._apools
    finally:
        pools.close()


def test_the_postgres_store_is_its_pools_plus_the_tables(pg_dsn) -> None:
    from ctxmgmt.store.postgres import PostgresStore

    store = PostgresStore(pg_dsn)
    try:
        assert isinstance(store, PostgresPools)
        with store._transaction() as cur:
            cur.execute("SELECT to_regclass('ctxmgmt_sessions') IS NOT NULL")
            assert cur.fetchone()[0] is True
    finally:
        store.close()
