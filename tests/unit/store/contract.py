"""What every state store does, as plain functions the store modules' unit tests call.

The integration tests (``tests/integration/test_stores.py``) run the full contract on every
backend, PostgreSQL and the framework stores included; these are the few checks each store
module's own unit test file repeats on its store.
"""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.store.base import StaleStateError, StateStore, TurnEntry

CONFIG = {"tau": 0.6}


def entries(start: int, count: int) -> list[TurnEntry]:
    """``count`` turn entries from turn ``start``: a JSON record per turn, a vector, a removal."""
    out = []
    for turn in range(start, start + count):
        records = {f"turn:{turn}": {"text": f"turn {turn}", "n": turn}, "last": turn}
        records["vector"] = np.full(3, turn, dtype=np.float32)
        if turn == 1:
            records["turn:0"] = None  # turn 1 removes what turn 0 wrote
        out.append(TurnEntry(turn, f"chain{turn}", records))
    return out


def round_trip(store: StateStore, key: str = "kadanedial:test:alice") -> None:
    """Append, load (all and a prefix), compare-and-set, truncate, delete."""
    assert isinstance(store, StateStore)
    assert store.load(key) is None
    version = store.append(key, entries(0, 3), expected_version=0, strategy="kadanedial", config=CONFIG)
    assert version == 1
    session = store.load(key)
    assert session is not None
    assert (session.strategy, session.config, session.version) == ("kadanedial", CONFIG, 1)
    assert session.chains == ["chain0", "chain1", "chain2"]
    assert "turn:0" not in session.records and session.records["turn:2"] == {"text": "turn 2", "n": 2}
    assert session.records["last"] == 2
    np.testing.assert_array_equal(session.records["vector"], np.full(3, 2, dtype=np.float32))
    prefix = store.load(key, turns=1)
    assert prefix is not None and prefix.chains == ["chain0"] and prefix.records["turn:0"]["n"] == 0

    with pytest.raises(StaleStateError):  # another writer got there first
        store.append(key, entries(3, 1), expected_version=0, strategy="kadanedial", config=CONFIG)
    with pytest.raises(StaleStateError):  # the turns must continue the stored ones
        store.append(key, entries(5, 1), expected_version=1, strategy="kadanedial", config=CONFIG)

    assert store.truncate(key, 1, expected_version=1) == 2
    cut = store.load(key)
    assert cut is not None and cut.chains == ["chain0"] and cut.records["last"] == 0
    assert store.append(key, entries(1, 1), expected_version=2, strategy="kadanedial", config=CONFIG) == 3

    store.delete(key)
    assert store.load(key) is None
    store.delete(key)  # deleting an absent session is no error
