"""The PostgreSQL state store (``ctxmgmt.store.postgres``), on a throwaway server.

``pg_dsn`` starts a real server once per test session (``tests/conftest.py``; under CI a missing
server fails the run). The pools, deadlines and error translation under it are tested in
``test_postgres_pools.py``; the store contract across every store in
``tests/integration/test_stores.py``.
"""

from __future__ import annotations

import asyncio
import copy
import pickle

import pytest

from ctxmgmt.store.base import StaleStateError
from tests.unit.store.contract import CONFIG, entries, round_trip

pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")

from ctxmgmt.store.postgres import PostgresStore  # noqa: E402


def test_the_store_contract(pg_dsn) -> None:
    store = PostgresStore(pg_dsn, max_size=2)
    try:
        round_trip(store)
    finally:
        store.close()


def test_the_repr_hides_the_password() -> None:
    store = PostgresStore.__new__(PostgresStore)
    store.conninfo = "host=/tmp dbname=x user=u password=secret"
    assert "secret" not in repr(store) and repr(store).startswith("PostgresStore(")


def test_a_copy_connects_to_the_same_database_and_sees_what_the_first_wrote(pg_dsn) -> None:
    first = PostgresStore(pg_dsn, max_size=2)
    second = pickle.loads(pickle.dumps(first))
    third = copy.deepcopy(first)
    try:
        assert second is not first and second.conninfo == first.conninfo
        first.append("k", entries(0, 2), expected_version=0, strategy="s", config=CONFIG)
        loaded = third.load("k")
        assert loaded is not None and loaded.version == 1 and loaded.chains == ["chain0", "chain1"]
        with pytest.raises(StaleStateError):
            second.append("k", entries(2, 1), expected_version=0, strategy="s", config=CONFIG)
    finally:
        for store in (first, second, third):
            store.close()


def test_the_native_async_methods_read_what_the_sync_ones_wrote(pg_dsn) -> None:
    store = PostgresStore(pg_dsn, max_size=2)

    async def scenario() -> None:
        await store.aappend("a", entries(0, 3), expected_version=0, strategy="s", config=CONFIG)
        loaded = await store.aload("a", turns=2)
        assert loaded is not None and loaded.chains == ["chain0", "chain1"]
        assert await store.atruncate("a", 1, expected_version=1) == 2
        await store.adelete("a")
        assert await store.aload("a") is None
        await store.aclose()

    try:
        asyncio.run(scenario())
    finally:
        store.close()
