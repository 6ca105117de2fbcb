"""The SQL both database stores share: plans and their drivers (``ctxmgmt.store.sql``).

The plans run here on a bare ``sqlite3`` cursor (and an async wrapper around one), outside any
store; :class:`~ctxmgmt.store.sqlite.SQLiteStore` has ``test_sqlite.py``.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from ctxmgmt.store.base import CorruptRecordError, StaleStateError
from ctxmgmt.store.keys import HASHED
from ctxmgmt.store.sql import (
    TABLES,
    Step,
    append_plan,
    arun_plan,
    delete_plan,
    load_plan,
    run_plan,
    storage_key,
    truncate_plan,
)
from tests.unit.store.contract import CONFIG, entries


@pytest.fixture
def cur():
    conn = sqlite3.connect(":memory:")
    cursor = conn.cursor()
    for statement in TABLES:
        cursor.execute(statement.format(blob="BLOB"))
    yield cursor
    conn.close()


def test_storage_keys_are_bounded_keys() -> None:
    assert storage_key("kadanedial:classic:u1") == "kadanedial:classic:u1"
    assert storage_key("x" * 5_000).startswith(HASHED)


def test_run_plan_sends_each_result_back_and_returns_the_plans_value(cur) -> None:
    def plan():
        yield Step("CREATE TABLE t (x INTEGER)", ())
        yield Step("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)], "many")
        changed = yield Step("UPDATE t SET x = x * 10 WHERE x > ?", (1,))
        one = yield Step("SELECT MAX(x) FROM t", (), "one")
        rows = yield Step("SELECT x FROM t ORDER BY x", (), "all")
        return changed, one, rows

    assert run_plan(cur, plan()) == (2, (30,), [(1,), (20,), (30,)])


def test_placeholders_are_rewritten_for_the_driver() -> None:
    seen: list[str] = []

    class Recorder:
        rowcount = 0

        def execute(self, sql, params):
            seen.append(sql)

    def plan():
        yield Step("SELECT 1 WHERE ? = ?", (1, 1))

    run_plan(Recorder(), plan(), placeholder="%s")
    assert seen == ["SELECT 1 WHERE %s = %s"]


def test_the_operations_on_one_session(cur) -> None:
    assert run_plan(cur, load_plan("k", None)) is None
    assert (
        run_plan(cur, append_plan("k", entries(0, 3), expected_version=0, strategy="s", config=CONFIG)) == 1
    )
    session = run_plan(cur, load_plan("k", None))
    assert session is not None and session.chains == ["chain0", "chain1", "chain2"]
    assert session.records["last"] == 2 and "turn:0" not in session.records
    first = run_plan(cur, load_plan("k", 1))
    assert first is not None and first.records["turn:0"] == {"text": "turn 0", "n": 0}
    with pytest.raises(StaleStateError, match="at version 1, not 0"):
        run_plan(cur, append_plan("k", entries(3, 1), expected_version=0, strategy="s", config=CONFIG))
    assert run_plan(cur, truncate_plan("k", 1, expected_version=1)) == 2
    cut = run_plan(cur, load_plan("k", None))
    assert cut is not None and cut.chains == ["chain0"]
    assert run_plan(cur, truncate_plan("absent", 0, expected_version=0)) == 0
    run_plan(cur, delete_plan("k"))
    assert run_plan(cur, load_plan("k", None)) is None


def test_a_corrupt_version_row_is_a_corrupt_record(cur) -> None:
    cur.execute(
        "INSERT INTO ctxmgmt_sessions VALUES (?, ?, ?, ?, ?, ?)", ("k", "s", "{}", 1, "not a number", 0)
    )
    with pytest.raises(CorruptRecordError, match="corrupt version or turn count"):
        run_plan(cur, append_plan("k", [], expected_version=1, strategy="s", config=CONFIG))


class AsyncCursor:
    """A psycopg-style async cursor over a sqlite3 cursor."""

    def __init__(self, inner: sqlite3.Cursor) -> None:
        self.inner = inner

    @property
    def rowcount(self) -> int:
        return self.inner.rowcount

    async def execute(self, sql, params):
        self.inner.execute(sql, params)

    async def executemany(self, sql, params):
        self.inner.executemany(sql, params)

    async def fetchone(self):
        return self.inner.fetchone()

    async def fetchall(self):
        return self.inner.fetchall()


def test_the_async_driver_runs_the_same_plans(cur) -> None:
    async def use():
        acur = AsyncCursor(cur)
        plan = append_plan("k", entries(0, 2), expected_version=0, strategy="s", config=CONFIG)
        version = await arun_plan(acur, plan)
        return version, await arun_plan(acur, load_plan("k", None))

    version, session = asyncio.run(use())
    assert version == 1 and session is not None and session.chains == ["chain0", "chain1"]
    again = run_plan(cur, load_plan("k", None))
    assert again is not None and (again.version, again.chains) == (session.version, session.chains)
    assert again.records["turn:1"] == session.records["turn:1"] == {"text": "turn 1", "n": 1}
