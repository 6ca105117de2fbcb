"""State stores over a key-value store of JSON documents (``ctxmgmt.store.items``).

A dict of dicts stands in for the framework store (LangGraph ``BaseStore``, LlamaIndex
``BaseKVStore``); the adapters' own stores are tested in ``tests/integration/test_stores.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import CorruptRecordError, StoreError
from ctxmgmt.store.items import (
    MAX_SPACE_CHARS,
    META,
    ItemStateStore,
    record_item,
    record_row,
    space_name,
    turn_name,
    turn_of,
)
from tests.unit.store.contract import CONFIG, entries, round_trip


class Spaces(dict):
    """The framework store: space -> item name -> JSON document."""


class DictStateStore(ItemStateStore):
    backend_type = Spaces
    backend: Spaces

    def _get_items(self, space: str, names: Sequence[str]) -> list[dict[str, Any] | None]:
        items = self.backend.get(space, {})
        return [json.loads(items[n]) if n in items else None for n in names]  # documents as JSON text

    def _put_items(self, space: str, items: Mapping[str, dict[str, Any]]) -> None:
        self.backend.setdefault(space, {}).update({n: json.dumps(item) for n, item in items.items()})

    def _delete_items(self, space: str, names: Sequence[str]) -> None:
        for name in names:
            self.backend.get(space, {}).pop(name, None)

    def _list_names(self, space: str) -> list[str]:
        return list(self.backend.get(space, {}))


def test_the_store_contract() -> None:
    round_trip(DictStateStore(Spaces()))


def test_the_store_wraps_only_its_framework_store() -> None:
    with pytest.raises(ConfigurationError, match="DictStateStore wraps a Spaces, not dict"):
        DictStateStore({})
    assert repr(DictStateStore(Spaces())) == "DictStateStore(Spaces)"


def test_space_names_are_safe_labels_and_one_to_one() -> None:
    assert space_name("thread 1.a") == "k_thread%201%2Ea"
    assert space_name("a/b") != space_name("a%2Fb")
    long = space_name("x" * (MAX_SPACE_CHARS + 1))
    assert long.startswith("h_") and len(long) == 66


def test_turn_item_names() -> None:
    assert turn_name(42) == "turn:00000042"
    assert turn_of(turn_name(42)) == 42
    assert turn_of(META) is None and turn_of("turn:x") is None


def test_record_items_are_json_safe_strings_and_read_back() -> None:
    vector = np.array([0.5, -1.0], dtype=np.float32)
    item = record_item(vector)
    assert item["kind"] == "f32" and isinstance(item["data"], str)
    name, kind, data = record_row("v", item)
    assert (name, kind) == ("v", "f32") and np.frombuffer(data, dtype="<f4").tolist() == [0.5, -1.0]
    assert record_item({"a": 1}) == {"kind": "json", "data": '{"a":1}'}


@pytest.mark.parametrize(
    "item", [None, {"kind": "json"}, {"kind": 1, "data": ""}, {"kind": "f32", "data": "!!"}]
)
def test_malformed_record_items_are_corrupt_records(item) -> None:
    with pytest.raises(CorruptRecordError):
        record_row("r", item)


def test_meta_commits_the_turns_and_a_missing_turn_is_a_store_error() -> None:
    spaces = Spaces()
    store = DictStateStore(spaces)
    store.append("k", entries(0, 2), expected_version=0, strategy="s", config=CONFIG)
    (space,) = spaces
    assert json.loads(spaces[space][META])["turns"] == 2
    del spaces[space][turn_name(1)]
    with pytest.raises(StoreError, match="turn 1 of 2 is missing"):
        store.load("k")


@pytest.mark.parametrize("turns", [-1, "2", True, 10**12])
def test_a_corrupt_turn_count_is_a_corrupt_record(turns) -> None:
    spaces = Spaces()
    store = DictStateStore(spaces)
    store.append("k", entries(0, 1), expected_version=0, strategy="s", config=CONFIG)
    (space,) = spaces
    meta = json.loads(spaces[space][META])
    spaces[space][META] = json.dumps({**meta, "turns": turns})
    with pytest.raises(CorruptRecordError):
        store.load("k")


def test_truncate_and_delete_remove_the_items() -> None:
    spaces = Spaces()
    store = DictStateStore(spaces)
    store.append("k", entries(0, 3), expected_version=0, strategy="s", config=CONFIG)
    store.truncate("k", 1, expected_version=1)
    (space,) = spaces
    assert sorted(spaces[space]) == [META, turn_name(0)]
    store.delete("k")
    assert spaces[space] == {}
