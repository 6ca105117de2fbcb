"""The state-store protocol, record encoding and folding (``ctxmgmt.store.base``)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from ctxmgmt.messages.exceptions import CtxMgmtError
from ctxmgmt.store import base
from ctxmgmt.store.base import (
    MAX_RETRY_WAIT,
    CorruptRecordError,
    StaleStateError,
    StateStore,
    StoreError,
    aclose_store,
    checked_header,
    decode,
    encode,
    fold,
    wait_after_conflict,
)
from ctxmgmt.store.memory import InMemoryStore
from tests.unit.store.contract import CONFIG, entries


@pytest.mark.parametrize("value", [None, {"a": [1, 2.5, "x"]}, "text", 3, [], {"nested": {"k": None}}])
def test_json_values_and_removals_round_trip(value) -> None:
    assert decode(*encode(value)) == value


def test_vectors_are_stored_as_little_endian_float32() -> None:
    kind, data = encode(np.array([1.0, -2.5, 3.25], dtype=np.float64))
    assert kind == "f32" and len(data) == 12
    out = decode(kind, memoryview(data))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.0, -2.5, 3.25])


def test_a_lone_surrogate_survives_as_json_escape() -> None:
    kind, data = encode({"text": "cat \ud83d ill"})
    assert kind == "json" and data.isascii()
    assert decode(kind, data) == {"text": "cat \ud83d ill"}


@pytest.mark.parametrize(("kind", "data"), [("json", b"{not json"), ("zip", b"x"), ("json", b"\xff")])
def test_undecodable_records_are_corrupt_record_errors(kind, data) -> None:
    with pytest.raises(CorruptRecordError):
        decode(kind, data)


def test_corrupt_records_are_store_errors_and_ctxmgmt_errors() -> None:
    assert issubclass(CorruptRecordError, StoreError) and issubclass(StaleStateError, StoreError)
    assert issubclass(StoreError, CtxMgmtError) and issubclass(StoreError, RuntimeError)


def test_fold_keeps_each_keys_newest_value_and_drops_removed_keys() -> None:
    rows = [
        ("a", *encode(1)),
        ("b", *encode({"x": 1})),
        ("a", *encode(2)),
        ("c", *encode(np.ones(2, dtype=np.float32))),
        ("b", *encode(None)),
    ]
    records = fold(rows)
    assert list(records) == ["a", "c"] and records["a"] == 2
    np.testing.assert_array_equal(records["c"], [1.0, 1.0])


def test_fold_decodes_each_json_record_by_itself_when_one_is_odd() -> None:
    rows = [("a", "json", b"[1,"), ("b", "json", b"2")]
    with pytest.raises(CorruptRecordError):
        fold(rows)
    assert fold([("a", "json", b'"x"'), ("b", "json", b"2")]) == {"a": "x", "b": 2}


def test_a_record_name_must_be_text() -> None:
    with pytest.raises(CorruptRecordError, match="record name"):
        fold([(3, "json", b"1")])  # type: ignore[list-item]


def test_checked_header_reads_text_config_and_integer_strings() -> None:
    assert checked_header("swin", '{"window": 8}', "1", 4) == ("swin", {"window": 8}, 1, 4)
    assert checked_header("swin", b'{"window": 8}', 1, 4.0)[1] == {"window": 8}


@pytest.mark.parametrize(
    "header",
    [(3, "{}", 1, 1), ("s", "[1]", 1, 1), ("s", "{bad", 1, 1), ("s", "{}", True, 1), ("s", "{}", 1, 1.5)],
)
def test_a_bad_header_is_a_corrupt_record(header) -> None:
    with pytest.raises(CorruptRecordError, match="corrupt session header"):
        checked_header(*header)


def test_the_wait_after_a_conflict_grows_and_is_capped(monkeypatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(base.time, "sleep", waits.append)
    monkeypatch.setattr(base.random, "uniform", lambda low, high: high)
    for attempt in range(10):
        wait_after_conflict(attempt)
    assert waits[0] == base.RETRY_BACKOFF and waits == sorted(waits) and waits[-1] == MAX_RETRY_WAIT


def test_the_async_variants_run_the_sync_methods() -> None:
    store = InMemoryStore()
    assert isinstance(store, StateStore)

    async def use() -> None:
        assert await store.aappend("k", entries(0, 2), expected_version=0, strategy="s", config=CONFIG) == 1
        loaded = await store.aload("k")
        assert loaded is not None and loaded.chains == ["chain0", "chain1"]
        assert await store.atruncate("k", 1, expected_version=1) == 2
        await store.adelete("k")
        assert await store.aload("k") is None

    asyncio.run(use())


class Recorded:
    """A store by the protocol alone (no ``aclose``), recording the thread ``close`` ran on."""

    def __init__(self) -> None:
        self.closed_on: list[int] = []

    def close(self) -> None:
        self.closed_on.append(threading.get_ident())


def test_aclose_store_closes_a_store_without_aclose_off_the_event_loop() -> None:
    store = Recorded()
    asyncio.run(aclose_store(store))  # type: ignore[arg-type]
    assert len(store.closed_on) == 1 and store.closed_on[0] != threading.get_ident()


def test_the_default_aclose_runs_close() -> None:
    closed: list[bool] = []

    class Counted(InMemoryStore):
        def close(self) -> None:
            closed.append(True)

    asyncio.run(Counted().aclose())
    assert closed == [True]
