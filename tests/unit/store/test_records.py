"""The store layout of derived state: records, their round trip, and what a turn changed."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.store.records import RecordTracker, flatten, unflatten
from ctxmgmt.strategies.discourse_tree import Node
from ctxmgmt.strategies.state import CappedLog, jsonable


def test_records_round_trip_and_track_changes():
    state = {"embeddings": [np.ones(3, dtype=np.float32)], "items": {"a{b}": 1}, "n": 2, "log": []}
    records = flatten(state)
    back = unflatten(records)
    assert back["items"] == {"a{b}": 1} and back["n"] == 2 and back["log"] == []
    assert np.array_equal(back["embeddings"][0], state["embeddings"][0])
    tracker = RecordTracker()
    assert set(tracker.changes(records)) == set(records)
    assert tracker.changes(records) == {}
    state["n"] = 3
    del state["items"]
    changed = tracker.changes(flatten(state))
    assert changed == {"n": 3, "items#": None, "items{a{b}}": None}


def test_capped_log_records_keep_their_numbers():
    log = CappedLog(3)
    tracker = RecordTracker()
    writes = []
    for i in range(8):
        log.append({"event": i})
        writes.append(tracker.changes(flatten({"log": log.map(dict), "n": i})))
    assert list(log) == [{"event": 5}, {"event": 6}, {"event": 7}] and log.start == 5
    # once full, a turn writes the new entry, a tombstone for the dropped one and the counter
    assert writes[-1] == {"log[7]": {"event": 7}, "log[4]": None, "n": 7}
    assert all(len(w) <= 4 for w in writes)
    back = unflatten(flatten({"log": log}))["log"]
    assert isinstance(back, CappedLog) and back == log and back.cap == 3
    assert jsonable({"log": log}) == {"log": [{"event": 5}, {"event": 6}, {"event": 7}]}
    assert CappedLog.restored(2, [1, 2, 3]) == CappedLog(2, [2, 3], 1)  # a plain list: numbered from 0
    with pytest.raises(ValueError, match="missing entries"):
        unflatten({"log#": ["log", 3, 3], "log[5]": 1, "log[7]": 2, "log[8]": 3})


def test_tracker_compares_frozen_items_by_identity_and_values_exactly():
    node = Node(id=0, tree=0, branch=0, parent=None, summary="cats")
    tracker = RecordTracker()
    assert tracker.changes(flatten({"nodes": [node], "x": 1})) == {
        "nodes#": ["list", 1],
        "nodes[0]": node.to_dict(),
        "x": 1,
    }
    assert tracker.changes(flatten({"nodes": [node], "x": 1})) == {}
    # a replaced node is written even when only its type of number changed
    assert tracker.changes(flatten({"nodes": [Node(0, 0, 0, None, "dogs")], "x": 1.0})) == {
        "nodes[0]": {"id": 0, "tree": 0, "branch": 0, "parent": None, "summary": "dogs", "query": ""},
        "x": 1.0,
    }
    # a restored state (plain records) is compared by value: nothing is rewritten
    restored = RecordTracker()
    restored.reset({"nodes#": ["list", 1], "nodes[0]": node.to_dict(), "x": 1})
    assert restored.changes(flatten({"nodes": [node], "x": 1})) == {}
