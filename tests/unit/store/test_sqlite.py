"""The SQLite state store (``ctxmgmt.store.sqlite``)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import StaleStateError, StoreError
from ctxmgmt.store.sqlite import SQLiteStore
from tests.unit.store.contract import CONFIG, entries, round_trip


def test_the_store_contract_in_memory() -> None:
    round_trip(SQLiteStore(":memory:"))


def test_the_store_contract_on_a_file(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    round_trip(store)
    store.close()


def test_two_stores_on_one_file_share_sessions_and_compare_and_set(tmp_path) -> None:
    path = tmp_path / "shared.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    first.append("k", entries(0, 2), expected_version=0, strategy="s", config=CONFIG)
    loaded = second.load("k")
    assert loaded is not None and loaded.version == 1 and loaded.chains == ["chain0", "chain1"]
    second.append("k", entries(2, 1), expected_version=1, strategy="s", config=CONFIG)
    with pytest.raises(StaleStateError):
        first.append("k", entries(2, 1), expected_version=1, strategy="s", config=CONFIG)
    first.close()
    second.close()


def test_the_file_holds_the_three_tables(tmp_path) -> None:
    path = tmp_path / "tables.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"ctxmgmt_sessions", "ctxmgmt_turns", "ctxmgmt_records"} <= names


def test_ping_answers_on_a_free_file_and_fails_once_the_file_is_gone(tmp_path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    store = SQLiteStore(folder / "ping.db")
    store.ping()
    store.close()
    shutil.rmtree(folder)
    with pytest.raises(StoreError):
        store.ping()
    SQLiteStore(":memory:").ping()  # a private database always answers


@pytest.mark.parametrize("limits", [{"busy_timeout": -1}, {"deadline": float("inf")}, {"deadline": -0.5}])
def test_bad_limits_are_configuration_errors(tmp_path, limits) -> None:
    with pytest.raises(ConfigurationError, match="non-negative number of seconds"):
        SQLiteStore(tmp_path / "x.db", **limits)


def test_a_folder_that_does_not_exist_is_a_store_error(tmp_path) -> None:
    with pytest.raises(StoreError):
        SQLiteStore(tmp_path / "missing" / "state.db")
