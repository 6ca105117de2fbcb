"""The in-process state store (``ctxmgmt.store.memory``)."""

from __future__ import annotations

import copy
import pickle

from ctxmgmt.store.keys import bounded_key
from ctxmgmt.store.memory import InMemoryStore
from tests.unit.store.contract import CONFIG, entries, round_trip


def test_the_store_contract() -> None:
    round_trip(InMemoryStore())


def test_stored_values_are_private_copies() -> None:
    store = InMemoryStore()
    written = entries(0, 1)
    store.append("k", written, expected_version=0, strategy="s", config=CONFIG)
    written[0].records["turn:0"]["text"] = "changed by the caller"
    loaded = store.load("k")
    assert loaded is not None and loaded.records["turn:0"]["text"] == "turn 0"
    loaded.records["turn:0"]["text"] = "changed by a reader"
    again = store.load("k")
    assert again is not None and again.records["turn:0"]["text"] == "turn 0"


def test_a_copy_is_a_store_of_its_own() -> None:
    store = InMemoryStore()
    store.append("k", entries(0, 1), expected_version=0, strategy="s", config=CONFIG)
    for twin in (copy.deepcopy(store), pickle.loads(pickle.dumps(store))):
        twin.delete("k")
        assert twin.load("k") is None
    assert store.load("k") is not None


def test_long_keys_are_filed_under_their_bounded_key() -> None:
    store = InMemoryStore()
    key = "thread-" + "x" * 5_000
    store.append(key, entries(0, 1), expected_version=0, strategy="s", config=CONFIG)
    assert list(store._sessions) == [bounded_key(key)]
    assert store.load(key) is not None


def test_truncating_an_absent_session_is_version_zero() -> None:
    assert InMemoryStore().truncate("nobody", 0, expected_version=0) == 0
