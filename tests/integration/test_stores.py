"""One contract for every state store, run against real backends (no mocks).

``StoreContract`` holds the tests; each ``Test*`` subclass provides a fresh store of one
backend: in process, SQLite on a temporary file, PostgreSQL (a throwaway server, see the
``postgres_dsn`` fixture), a LangGraph ``InMemoryStore`` and a LlamaIndex ``SimpleKVStore``.
The SQL stores also run the concurrent-writer test across processes (``spawn``).

Framework imports stay inside fixtures: the ``spawn`` children import this module.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store import (
    CircuitStore,
    InMemoryStore,
    SQLiteStore,
    StaleStateError,
    StateStore,
    StoreError,
    TurnEntry,
    open_store,
)
from ctxmgmt.store.base import SCHEMA_VERSION, CorruptRecordError, StoredSession

STRATEGY = "kadanedial"
CONFIG = {"tau": 0.6, "theta": 1.0, "name": "ünï 'q' \"dq\""}

KEYS = [
    "",
    " ",
    "thread-1",
    "a.b",
    "a%2Eb",
    "a%2eb",
    "k_a",
    "a/b\\c",
    "it's",
    'say "hi"',
    "'; DROP TABLE ctxmgmt_sessions; --",
    "x' OR '1'='1",
    "Robert'); DELETE FROM ctxmgmt_records WHERE ('1'='1",
    "%s %(key)s ? $1 :name",
    "ünïcödé 会话 🚀 \u200b",
    "tab\there\nnewline",
    "nul\x00byte",
    "\x01sha256:" + "0" * 64,
    "L" * 5_000,
    "L" * 5_001,
    "".join(chr(0x4E00 + i % 500) for i in range(3_000)),
    "u\udc80",  # a lone surrogate: not UTF-8
    "\udc80",
    "\ud800" * 600,
    "kadanedial:classic:u1",  # a key that names its surface
    "kadanedial:block:u1",
]


def inner(store: Any) -> Any:
    """The store ``open_store`` wrapped in its circuit."""
    assert isinstance(store, CircuitStore), store
    return store.inner


def entry(turn: int, chain: str | None = None, **records: Any) -> TurnEntry:
    return TurnEntry(turn, chain or f"chain-{turn}", records)


def append(store: StateStore, key: str, entries: list[TurnEntry], version: int) -> int:
    return store.append(key, entries, expected_version=version, strategy=STRATEGY, config=CONFIG)


def next_turn(current: StoredSession | None, worker: int, done: int) -> tuple[int, TurnEntry]:
    """The version read and the entry of ``worker``'s turn ``done`` after ``current`` (checked by
    :func:`check_all_turns`)."""
    version = 0 if current is None else current.version
    turn = 0 if current is None else len(current.chains)
    tag = f"{worker}:{done}"
    return version, entry(
        turn, tag, **{f"w{tag}": [worker, done], "last": tag, "vec": np.full(3, turn, np.float32)}
    )


def write_turns(store: StateStore, key: str, worker: int, count: int) -> int:
    """Add ``count`` turns with read-version / compare-and-set / retry; the conflicts seen."""
    done = conflicts = 0
    rng = random.Random(worker)
    while done < count:
        version, new = next_turn(store.load(key), worker, done)
        try:
            append(store, key, [new], version)
        except StaleStateError:
            conflicts += 1
            time.sleep(rng.uniform(0, 0.003))
            continue
        done += 1
    return conflicts


def check_all_turns(store: StateStore, key: str, workers: int, count: int) -> None:
    """No lost and no duplicate turns: every worker's turns exactly once, numbered 0..n-1."""
    final = store.load(key)
    assert final is not None
    expected = {f"{w}:{i}" for w in range(workers) for i in range(count)}
    assert len(final.chains) == workers * count
    assert set(final.chains) == expected
    assert final.version == workers * count
    assert {name for name in final.records if name.startswith("w")} == {f"w{tag}" for tag in expected}
    assert final.records["last"] == final.chains[-1]
    np.testing.assert_array_equal(final.records["vec"], np.full(3, workers * count - 1, np.float32))
    for w in range(workers):  # each worker's turns in its own order
        mine = [c for c in final.chains if c.startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(count)]


def _open_spec(spec: tuple[str, str]) -> StateStore:
    kind, arg = spec
    if kind == "postgres":
        from ctxmgmt.store import PostgresStore

        return PostgresStore(arg)
    return open_store(arg)


def _process_writer(spec: tuple[str, str], key: str, worker: int, count: int, barrier: Any) -> None:
    """A ``spawn``-ed worker process: open the store by spec and add ``count`` turns."""
    store = _open_spec(spec)
    try:
        barrier.wait(timeout=120)
        write_turns(store, key, worker, count)
    finally:
        store.close()


class StoreContract:
    """The behaviour every :class:`~ctxmgmt.store.StateStore` shares (``InMemoryStore`` is the
    reference). Subclasses define the ``store`` fixture (a fresh, empty store)."""

    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        raise NotImplementedError

    # -- basics --------------------------------------------------------------------------------
    def test_is_a_state_store(self, store: StateStore) -> None:
        assert isinstance(store, StateStore)

    def test_absent_session(self, store: StateStore) -> None:
        assert store.load("nobody") is None
        assert store.load("nobody", turns=3) is None
        assert store.truncate("nobody", 0, expected_version=0) == 0
        store.delete("nobody")
        assert store.load("nobody") is None

    def test_append_load_fold(self, store: StateStore) -> None:
        vec = np.arange(8, dtype=np.float32) / 7
        assert append(store, "s", [entry(0, a={"x": 1}, b=vec)], 0) == 1
        assert append(store, "s", [entry(1, a=[1, 2], c="three"), entry(2, d=None, e=True)], 1) == 2
        loaded = store.load("s")
        assert loaded is not None
        assert loaded.strategy == STRATEGY
        assert loaded.config == CONFIG
        assert loaded.schema == SCHEMA_VERSION
        assert loaded.version == 2
        assert loaded.chains == ["chain-0", "chain-1", "chain-2"]
        assert set(loaded.records) == {"a", "b", "c", "e"}
        assert loaded.records["a"] == [1, 2]
        assert loaded.records["c"] == "three"
        assert loaded.records["e"] is True
        assert loaded.records["b"].dtype == np.float32
        np.testing.assert_array_equal(loaded.records["b"], vec)

    def test_empty_append_bumps_version(self, store: StateStore) -> None:
        assert append(store, "s", [], 0) == 1
        loaded = store.load("s")
        assert loaded is not None and loaded.version == 1 and loaded.chains == [] and loaded.records == {}
        assert append(store, "s", [entry(0, a=1)], 1) == 2

    def test_strategy_and_config_follow_the_last_append(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a=1)], 0)
        store.append("s", [entry(1)], expected_version=1, strategy="other", config={"k": [1, {"z": None}]})
        loaded = store.load("s")
        assert loaded is not None and loaded.strategy == "other" and loaded.config == {"k": [1, {"z": None}]}

    def test_partial_load(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a=0, b="keep"), entry(1, a=1, b=None), entry(2, a=2, c=[2])], 0)
        first = store.load("s", turns=1)
        assert first is not None
        assert first.chains == ["chain-0"] and first.records == {"a": 0, "b": "keep"}
        two = store.load("s", turns=2)
        assert two is not None and two.chains == ["chain-0", "chain-1"] and two.records == {"a": 1}
        none = store.load("s", turns=0)
        assert none is not None and none.chains == [] and none.records == {} and none.version == 1
        beyond = store.load("s", turns=99)
        assert beyond is not None and beyond.chains == ["chain-0", "chain-1", "chain-2"]
        assert beyond.records == {"a": 2, "c": [2]}

    def test_tombstones(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a="v0", b="b0")], 0)
        append(store, "s", [entry(1, a=None)], 1)
        loaded = store.load("s")
        assert loaded is not None and loaded.records == {"b": "b0"}
        append(store, "s", [entry(2, a="again", b=None)], 2)
        loaded = store.load("s")
        assert loaded is not None and loaded.records == {"a": "again"}
        assert store.load("s", turns=2).records == {"b": "b0"}  # type: ignore[union-attr]

    def test_float32_bytes_round_trip_exactly(self, store: StateStore) -> None:
        rng = np.random.default_rng(7)
        special = np.array(
            [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 3.4028235e38, 1.17549435e-38], np.float32
        )
        values: dict[str, Any] = {
            "random": rng.standard_normal(384).astype(np.float32),
            "special": special,
            "empty": np.zeros(0, np.float32),
            "big": rng.standard_normal(4096).astype(np.float32),
            "matrix_row": np.ascontiguousarray(rng.standard_normal((4, 5)).astype(np.float32)[:, 1]),
        }
        append(store, "s", [entry(0, **values)], 0)
        loaded = store.load("s")
        assert loaded is not None
        for name, value in values.items():
            got = loaded.records[name]
            assert isinstance(got, np.ndarray) and got.dtype == np.float32, name
            assert got.tobytes() == np.asarray(value, dtype="<f4").tobytes(), name

    def test_json_values_round_trip(self, store: StateStore) -> None:
        value = {
            "z": 1,
            "a": [1.0000000000000002, 0.1, -2.5e-300, 2**63 + 1, -(2**70)],
            "m": {"nested": {"deep": [None, True, False, ""]}, "b": 2, "a": 1},
            "text": "quotes ' \" \\ nul\x00 ünï 🚀 \u2028",
        }
        append(store, "s", [entry(0, v=value, s="plain", n=3, f=0.5, l=[], d={})], 0)
        loaded = store.load("s")
        assert loaded is not None
        assert loaded.records["v"] == value
        assert list(loaded.records["v"]) == ["z", "a", "m", "text"]  # key order kept
        assert list(loaded.records["v"]["m"]) == ["nested", "b", "a"]
        assert loaded.records["s"] == "plain" and loaded.records["n"] == 3 and loaded.records["f"] == 0.5
        assert loaded.records["l"] == [] and loaded.records["d"] == {}

    def test_truncate(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a=0, keep="k"), entry(1, a=1, b=1), entry(2, a=2, keep=None)], 0)
        assert store.truncate("s", 1, expected_version=1) == 2
        loaded = store.load("s")
        assert loaded is not None
        assert (
            loaded.chains == ["chain-0"] and loaded.records == {"a": 0, "keep": "k"} and loaded.version == 2
        )
        # the truncated turns can be written again, differently
        assert append(store, "s", [entry(1, "new-1", a="new")], 2) == 3
        loaded = store.load("s")
        assert loaded is not None and loaded.chains == ["chain-0", "new-1"]
        assert loaded.records == {"a": "new", "keep": "k"}
        # past the end: nothing removed, still a write
        assert store.truncate("s", 10, expected_version=3) == 4
        loaded = store.load("s")
        assert loaded is not None and loaded.chains == ["chain-0", "new-1"]
        assert append(store, "s", [entry(2, a=2)], 4) == 5
        # to zero: an empty session that still exists
        assert store.truncate("s", 0, expected_version=5) == 6
        loaded = store.load("s")
        assert loaded is not None and loaded.chains == [] and loaded.records == {} and loaded.version == 6
        assert append(store, "s", [entry(0, a="fresh")], 6) == 7

    def test_fold_at_every_turn_matches_a_reference_fold(self, store: StateStore) -> None:
        """Records rewritten, removed and written again over many turns, loaded after every turn.

        Each load holds exactly the newest value of every live record, in the order the
        records were first written (turn, then name), also after a truncation rewrote the
        later turns.
        """
        rng = random.Random(3)
        names = [f"r{i}" for i in range(12)]
        written: list[dict[str, Any]] = []
        version = 0
        for turn in range(40):
            records: dict[str, Any] = {}
            for name in rng.sample(names, 4):
                roll = rng.random()
                vector = np.full(2, turn, np.float32)
                records[name] = None if roll < 0.25 else vector if roll < 0.4 else [turn, name]
            written.append(records)
            version = append(store, "s", [entry(turn, **records)], version)
        version = store.truncate("s", 25, expected_version=version)
        del written[25:]
        for turn in range(25, 35):
            records = {"r0": {"again": turn}, "r11": None if turn % 2 else turn}
            written.append(records)
            version = append(store, "s", [entry(turn, **records)], version)
        for upto in range(len(written) + 1):
            expected: dict[str, Any] = {}
            for records in written[:upto]:
                expected.update(sorted(records.items()))
            expected = {k: v for k, v in expected.items() if v is not None}
            loaded = store.load("s", turns=upto)
            assert loaded is not None and len(loaded.chains) == upto
            assert list(loaded.records) == [k for k in expected], upto  # first-write order
            for name, value in expected.items():
                got = loaded.records[name]
                if isinstance(value, np.ndarray):
                    assert got.tobytes() == value.tobytes(), (upto, name)
                else:
                    assert got == value, (upto, name)

    # -- compare-and-set -----------------------------------------------------------------------
    def test_stale_version_conflicts(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a=0)], 0)
        append(store, "s", [entry(1, a=1)], 1)
        with pytest.raises(StaleStateError):
            append(store, "s", [entry(2, a="lost")], 1)
        with pytest.raises(StaleStateError):
            append(store, "s", [entry(0, a="lost")], 0)  # "new session", but it exists
        with pytest.raises(StaleStateError):
            append(store, "s", [entry(2, a="lost")], 3)  # from the future
        with pytest.raises(StaleStateError):
            store.truncate("s", 0, expected_version=1)
        with pytest.raises(StaleStateError):
            store.truncate("nobody", 0, expected_version=1)
        loaded = store.load("s")
        assert loaded is not None and loaded.version == 2 and loaded.records == {"a": 1}
        assert loaded.chains == ["chain-0", "chain-1"]

    def test_wrong_turn_conflicts(self, store: StateStore) -> None:
        with pytest.raises(StaleStateError):
            append(store, "s", [entry(1, a="gap")], 0)
        assert store.load("s") is None
        append(store, "s", [entry(0, a=0), entry(1, a=1)], 0)
        for turn in (0, 1, 3):
            with pytest.raises(StaleStateError):
                append(store, "s", [entry(turn, a="wrong")], 1)
        loaded = store.load("s")
        assert loaded is not None and loaded.version == 1 and loaded.records == {"a": 1}
        assert loaded.chains == ["chain-0", "chain-1"]

    def test_stale_error_is_a_store_error(self) -> None:
        assert issubclass(StaleStateError, StoreError)

    # -- session keys --------------------------------------------------------------------------
    def test_any_string_is_a_session_key(self, store: StateStore) -> None:
        for i, key in enumerate(KEYS):
            append(store, key, [entry(0, f"c{i}", who=key, i=i, vec=np.full(2, i, np.float32))], 0)
        for i, key in enumerate(KEYS):
            loaded = store.load(key)
            assert loaded is not None, repr(key[:40])
            assert loaded.chains == [f"c{i}"] and loaded.records["who"] == key and loaded.records["i"] == i
            np.testing.assert_array_equal(loaded.records["vec"], np.full(2, i, np.float32))
        # a key's writes and deletes touch no other key
        append(store, KEYS[3], [entry(1, x=1)], 1)
        store.truncate(KEYS[4], 0, expected_version=1)
        store.delete(KEYS[5])
        assert store.load(KEYS[5]) is None
        for i, key in enumerate(KEYS):
            loaded = store.load(key)
            if i == 5:
                continue
            assert loaded is not None
            assert loaded.chains == ([] if i == 4 else [f"c{i}", "chain-1"] if i == 3 else [f"c{i}"])

    def test_injection_looking_keys_do_not_touch_other_sessions(self, store: StateStore) -> None:
        append(store, "victim", [entry(0, secret="s")], 0)
        for key in KEYS[10:14]:
            append(store, key, [entry(0, x=1)], 0)
            store.truncate(key, 0, expected_version=1)
            store.delete(key)
        loaded = store.load("victim")
        assert loaded is not None and loaded.records == {"secret": "s"}

    # -- delete --------------------------------------------------------------------------------
    def test_delete(self, store: StateStore) -> None:
        append(store, "s", [entry(0, a=0), entry(1, v=np.ones(4, np.float32))], 0)
        append(store, "other", [entry(0, a="other")], 0)
        store.delete("s")
        assert store.load("s") is None
        store.delete("s")  # absent: fine
        assert append(store, "s", [entry(0, "again", b=1)], 0) == 1  # starts over at version 0
        loaded = store.load("s")
        assert loaded is not None and loaded.chains == ["again"] and loaded.records == {"b": 1}
        other = store.load("other")
        assert other is not None and other.records == {"a": "other"}

    # -- async ---------------------------------------------------------------------------------
    async def test_async_methods(self, store: Any) -> None:
        assert await store.aload("s") is None
        v = await store.aappend(
            "s",
            [entry(0, a=0, v=np.arange(3, dtype=np.float32))],
            expected_version=0,
            strategy="x",
            config={},
        )
        assert v == 1
        v = await store.aappend("s", [entry(1, a=1)], expected_version=1, strategy="x", config={})
        assert v == 2
        with pytest.raises(StaleStateError):
            await store.aappend("s", [entry(2, a=2)], expected_version=1, strategy="x", config={})
        loaded = await store.aload("s")
        assert loaded.chains == ["chain-0", "chain-1"] and loaded.records["a"] == 1
        part = await store.aload("s", turns=1)
        assert part.records["a"] == 0
        np.testing.assert_array_equal(part.records["v"], np.arange(3, dtype=np.float32))
        assert await store.atruncate("s", 1, expected_version=2) == 3
        with pytest.raises(StaleStateError):
            await store.atruncate("s", 0, expected_version=2)
        assert (await store.aload("s")).chains == ["chain-0"]
        # concurrent async writers, one session
        await asyncio.gather(*(store.adelete(f"k{i}") for i in range(5)))
        await store.adelete("s")
        assert await store.aload("s") is None
        assert store.load("s") is None  # the sync path agrees
        if hasattr(store, "aclose"):  # on this test's own event loop, before it closes
            await store.aclose()

    async def test_async_concurrent_writers(self, store: Any) -> None:
        async def writer(worker: int, count: int) -> None:
            done = 0
            while done < count:
                version, new = next_turn(await store.aload("shared"), worker, done)
                try:
                    await store.aappend(
                        "shared", [new], expected_version=version, strategy=STRATEGY, config={}
                    )
                except StaleStateError:
                    await asyncio.sleep(random.uniform(0, 0.002))
                    continue
                done += 1

        await asyncio.gather(*(writer(w, 5) for w in range(3)))
        check_all_turns(store, "shared", 3, 5)

    # -- concurrent writers --------------------------------------------------------------------
    def test_concurrent_threads_lose_and_duplicate_nothing(self, store: StateStore) -> None:
        workers, count = 4, 12
        barrier = threading.Barrier(workers)
        errors: list[BaseException] = []
        conflicts: list[int] = []

        def run(worker: int) -> None:
            try:
                barrier.wait(timeout=30)
                conflicts.append(write_turns(store, "shared", worker, count))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert len(conflicts) == workers
        check_all_turns(store, "shared", workers, count)


class SQLRowsContract:
    """Loads of the SQL stores read each record's newest row only, and a row another writer
    created first is a conflict. Subclasses define ``execute`` (run one statement with ``?``
    placeholders on the store's database, committed)."""

    def test_integrity_error_is_a_conflict(self, store: Any, execute: Any) -> None:
        """A row another writer created first (here: a stray turn row) fails as a conflict."""
        execute("INSERT INTO ctxmgmt_turns (key, turn, chain) VALUES (?, ?, ?)", ("s", 0, "stray"))
        with pytest.raises(StaleStateError):
            append(store, "s", [entry(0, a=1)], 0)
        assert store.load("s") is None  # rolled back

    def test_only_the_newest_row_of_a_record_is_decoded(self, store: Any, execute: Any) -> None:
        append(store, "s", [entry(0, a="old", b=[0])], 0)
        append(store, "s", [entry(1, a="new"), entry(2, b=None)], 1)
        # garbage in rows a load must not read: a superseded value and a removed record's rows
        execute("UPDATE ctxmgmt_records SET data = ? WHERE turn = 0", (b"\xff not json",))
        loaded = store.load("s")
        assert loaded is not None and loaded.records == {"a": "new"}
        with pytest.raises(CorruptRecordError):
            store.load("s", turns=1)  # there the garbage is the newest row
        execute("UPDATE ctxmgmt_records SET data = ? WHERE turn = 1", (b'"unterminated',))
        with pytest.raises(CorruptRecordError):
            store.load("s")

    def test_corrupt_json_never_shifts_into_its_neighbours(self, store: Any, execute: Any) -> None:
        """Records decoded together: one record holding two values fails, it is not split."""
        append(store, "s", [entry(0, a=[1], b=[2], c=3)], 0)
        execute("UPDATE ctxmgmt_records SET data = ? WHERE name = 'a'", (b"[1],[9]",))
        with pytest.raises(CorruptRecordError):
            store.load("s")


class CrossProcessContract:
    """Concurrent writers in several processes (``spawn``): for stores other processes reach.

    Subclasses define ``spec``: what :func:`_open_spec` opens in a child process.
    """

    def test_concurrent_processes_lose_and_duplicate_nothing(
        self, store: StateStore, spec: tuple[str, str]
    ) -> None:
        workers, count = 3, 8
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(workers)
        procs = [
            ctx.Process(target=_process_writer, args=(spec, "shared", w, count, barrier))
            for w in range(workers)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=180)
        assert [p.exitcode for p in procs] == [0] * workers
        check_all_turns(store, "shared", workers, count)


# -- the backends ------------------------------------------------------------------------------
class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        yield InMemoryStore()


class TestSQLiteStore(StoreContract, SQLRowsContract, CrossProcessContract):
    @pytest.fixture
    def spec(self, tmp_path: Any) -> tuple[str, str]:
        return ("sqlite", f"sqlite:///{tmp_path / 'state.db'}")

    @pytest.fixture
    def execute(self, store: SQLiteStore) -> Any:
        def run(sql: str, params: tuple[Any, ...]) -> None:
            with store._transaction() as cur:
                cur.execute(sql, params)

        return run

    @pytest.fixture
    def store(self, tmp_path: Any) -> Iterator[StateStore]:
        store = SQLiteStore(tmp_path / "state.db")
        yield store
        store.close()

    def test_memory_database(self) -> None:
        store = SQLiteStore(":memory:")
        append(store, "s", [entry(0, a=1)], 0)
        assert store.load("s").records == {"a": 1}  # type: ignore[union-attr]
        store.close()


class TestPostgresStore(StoreContract, SQLRowsContract, CrossProcessContract):
    @pytest.fixture
    def spec(self, pg_dsn: str) -> tuple[str, str]:
        return ("postgres", pg_dsn)

    @pytest.fixture
    def execute(self, store: Any) -> Any:
        def run(sql: str, params: tuple[Any, ...]) -> None:
            with store._transaction() as cur:
                cur.execute(sql.replace("?", "%s"), params)

        return run

    @pytest.fixture
    def store(self, pg_dsn: str) -> Iterator[StateStore]:
        from ctxmgmt.store import PostgresStore

        store = PostgresStore(pg_dsn, max_size=8)
        yield store
        store.close()

    async def test_async_path_is_native(self, store: Any) -> None:
        append(store, "s", [entry(0, a=1)], 0)
        assert (await store.aload("s")).records == {"a": 1}
        assert len(store._apools) == 1  # an AsyncConnectionPool, not a worker thread
        await store.aclose()
        with pytest.raises(StoreError, match="closed"):
            await store.aload("s")

    def test_survives_dropped_connections(self, store: Any, postgres_dsn: str) -> None:
        """Pooled connections the server dropped (restart, failover) are replaced, not reported."""
        import psycopg

        append(store, "s", [entry(0, a=1)], 0)

        async def touch() -> None:
            assert (await store.aload("s")).records == {"a": 2}
            kill_others()
            assert (await store.aload("s")).records == {"a": 2}
            await store.aclose()

        def kill_others() -> None:
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                killed = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = 'ctxmgmt' AND pid <> pg_backend_pid()"
                ).fetchone()
                assert killed is not None and killed[0] >= 1

        kill_others()
        assert store.load("s").records == {"a": 1}
        assert append(store, "s", [entry(1, a=2)], 1) == 2
        asyncio.run(touch())

    def test_role_without_create_privilege(self, store: Any, pg_dsn: str, postgres_dsn: str) -> None:
        """An application role with only table privileges uses tables a DBA created."""
        import psycopg

        from ctxmgmt.store import PostgresStore

        schema = pg_dsn.split("search_path=")[1].rstrip("'")
        role = f"app_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
        try:
            app = PostgresStore(pg_dsn.replace("user=postgres", f"user={role}"))
            append(app, "s", [entry(0, a=1)], 0)
            assert store.load("s").records == {"a": 1}
            app.close()
        finally:
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")

    def test_existing_pools(self, pg_dsn: str) -> None:
        from psycopg_pool import ConnectionPool

        from ctxmgmt.store import PostgresStore

        with ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True) as pool:
            store = PostgresStore(pool)
            append(store, "s", [entry(0, a=1)], 0)
            store.close()  # leaves the caller's pool open
            with pool.connection() as conn:
                assert conn.execute("SELECT count(*) FROM ctxmgmt_sessions").fetchone() == (1,)

        async def use_async_pool() -> None:
            from psycopg_pool import AsyncConnectionPool

            async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False) as apool:
                store = PostgresStore(apool)
                assert (await store.aload("s")).records == {"a": 1}  # type: ignore[union-attr]
                await store.aclose()
                async with apool.connection() as conn:  # still open
                    await conn.execute("SELECT 1")

        asyncio.run(use_async_pool())

    def test_open_store_with_a_url(self, postgres_dsn: str) -> None:
        host = postgres_dsn.split("host=")[1].split()[0]
        for scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            store = open_store(f"{scheme}://postgres@/ctxmgmt?host={host}")
            assert isinstance(store, CircuitStore) and type(store.inner).__name__ == "PostgresStore"
            store.close()

    def test_long_and_nul_keys_are_stored_as_digests(self, store: Any) -> None:
        from ctxmgmt.store.postgres import storage_key

        assert storage_key("thread-1") == "thread-1"
        assert storage_key("a\x00b").startswith("\x01sha256:")
        assert storage_key("L" * 5000) != storage_key("L" * 5001)
        marker = "\x01sha256:" + "0" * 64
        assert storage_key(marker) != marker

    def test_unreachable_server_is_a_clear_store_error(self, tmp_path: Any) -> None:
        from ctxmgmt.store import PostgresStore

        started = time.monotonic()
        with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
            PostgresStore(f"postgresql://someone:s3cret@/db?host={tmp_path}", timeout=2)
        assert "s3cret" not in str(info.value)
        assert str(tmp_path) in str(info.value)
        assert time.monotonic() - started < 20


class TestLangGraphStateStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        from langgraph.store.memory import InMemoryStore as LangGraphMemory

        from langchain_ctxmgmt._store import LangGraphStateStore

        yield LangGraphStateStore(LangGraphMemory())

    def test_layout(self, store: Any) -> None:
        append(store, "thread.1", [entry(0, a={"x": 1}, v=np.ones(2, np.float32)), entry(1, a=None)], 0)
        namespace = ("ctxmgmt", "k_thread%2E1")
        meta = store.store.get(namespace, "meta").value
        assert meta == {
            "strategy": STRATEGY,
            "config": CONFIG,
            "schema": SCHEMA_VERSION,
            "version": 1,
            "turns": 2,
        }
        turn = store.store.get(namespace, "turn:00000000").value
        assert turn["chain"] == "chain-0"
        assert turn["records"]["a"] == {"kind": "json", "data": '{"x":1}'}
        assert turn["records"]["v"]["kind"] == "f32"
        assert store.store.get(namespace, "turn:00000001").value["records"]["a"]["kind"] == "del"
        store.truncate("thread.1", 1, expected_version=1)
        assert store.store.get(namespace, "turn:00000001") is None
        store.delete("thread.1")
        assert store.store.search(namespace) == []

    def test_as_state_store(self, tmp_path: Any) -> None:
        from langgraph.store.memory import InMemoryStore as LangGraphMemory

        from langchain_ctxmgmt._store import LangGraphStateStore, as_state_store

        assert isinstance(inner(as_state_store(LangGraphMemory())), LangGraphStateStore)
        assert isinstance(as_state_store(None), InMemoryStore)
        assert isinstance(inner(as_state_store(f"sqlite:///{tmp_path / 'x.db'}")), SQLiteStore)
        with pytest.raises(ConfigurationError):
            as_state_store("redis://nope")


class TestKVStateStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[StateStore]:
        from llama_index.core.storage.kvstore import SimpleKVStore

        from llamaindex_ctxmgmt._store import KVStateStore

        yield KVStateStore(SimpleKVStore())

    def test_survives_persist_and_reload(self, store: Any, tmp_path: Any) -> None:
        from llama_index.core.storage.kvstore import SimpleKVStore

        from llamaindex_ctxmgmt._store import KVStateStore

        vec = np.linspace(-1, 1, 9, dtype=np.float32)
        append(store, "chat/1", [entry(0, a={"x": 1}, v=vec), entry(1, b="two")], 0)
        path = str(tmp_path / "kv.json")
        store.kvstore.persist(path)
        reopened = KVStateStore(SimpleKVStore.from_persist_path(path))
        loaded = reopened.load("chat/1")
        assert loaded is not None and loaded.chains == ["chain-0", "chain-1"] and loaded.version == 1
        assert loaded.records["a"] == {"x": 1} and loaded.records["b"] == "two"
        assert loaded.records["v"].tobytes() == vec.tobytes()
        assert "ctxmgmt/k_chat%2F1" in store.kvstore.to_dict()

    def test_as_state_store(self) -> None:
        from llama_index.core.storage.kvstore import SimpleKVStore

        from llamaindex_ctxmgmt._store import KVStateStore, as_state_store

        assert isinstance(inner(as_state_store(SimpleKVStore())), KVStateStore)
        memory = InMemoryStore()
        assert as_state_store(memory) is memory
        with pytest.raises(ConfigurationError):
            as_state_store(42)


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_adapter_closes_the_postgres_pool_it_opened_from_a_dsn(
    framework: str, mode: str, pg_dsn: str, postgres_dsn: str, hashing_embedder: Any
) -> None:
    """``close()`` (or, used from async code, ``await aclose()``) releases the connections of a
    store given as a DSN: none is left on the server, and a later call says closed."""
    import psycopg
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from llama_index.core.base.llms.types import ChatMessage

    from langchain_ctxmgmt import KadaneDialMiddleware
    from llamaindex_ctxmgmt import KadaneDialMemory

    name = f"close-{uuid.uuid4().hex[:8]}"
    dsn = f"{pg_dsn} application_name={name}"

    def connections() -> int:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,))
            return int(row.fetchone()[0])  # type: ignore[index]

    said = HumanMessage("My cat is Miso.")
    if framework == "langchain":
        adapter: Any = KadaneDialMiddleware(embedder=hashing_embedder, store=dsn)
        model = GenericFakeChatModel(messages=iter([AIMessage("Noted.")] * 2))
        agent = create_agent(model, [], middleware=[adapter])

        def use() -> None:
            agent.invoke({"messages": [said]})

        async def ause() -> None:
            await agent.ainvoke({"messages": [said]})
    else:
        adapter = KadaneDialMemory.from_defaults(embed_model=hashing_embedder, store=dsn)

        def use() -> None:
            adapter.put(ChatMessage(role="user", content=said.text))
            adapter.get()

        async def ause() -> None:
            await adapter.aput(ChatMessage(role="user", content=said.text))
            await adapter.aget()

    if mode == "sync":
        use()
        assert connections() >= 1
        adapter.close()
        assert connections() == 0
        with pytest.raises(ConfigurationError, match="closed"):
            use()
        return

    async def scenario() -> None:
        await ause()
        assert connections() >= 1
        await adapter.aclose()
        assert connections() == 0
        with pytest.raises(ConfigurationError, match="closed"):
            await ause()

    asyncio.run(scenario())


# -- open_store and imports --------------------------------------------------------------------
def test_open_store_forms(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store(None), InMemoryStore)
    assert isinstance(open_store("memory://"), InMemoryStore)
    relative = open_store("sqlite:///sub.db")
    assert isinstance(inner(relative), SQLiteStore) and inner(relative).path == "sub.db"
    append(relative, "s", [entry(0, a=1)], 0)
    assert (tmp_path / "sub.db").exists()
    relative.close()
    absolute = open_store(f"sqlite:///{tmp_path / 'abs.db'}")
    assert isinstance(inner(absolute), SQLiteStore) and inner(absolute).path == str(tmp_path / "abs.db")
    absolute.close()
    assert (tmp_path / "abs.db").exists()
    memory = open_store("sqlite:///:memory:")
    assert isinstance(inner(memory), SQLiteStore) and inner(memory).path == ":memory:"
    store = InMemoryStore()
    assert open_store(store) is store
    circuit = CircuitStore(SQLiteStore(":memory:"))
    assert open_store(circuit) is circuit
    wrapped = open_store(circuit.inner)  # any other store object gets a circuit
    assert isinstance(wrapped, CircuitStore) and wrapped.inner is circuit.inner


@pytest.mark.parametrize(
    "spec",
    ["", "memory", "sqlite:///", "sqlite:/x.db", "mysql://u@h/db", "redis://localhost", "memories.db", 42],
)
def test_open_store_rejects(spec: Any) -> None:
    with pytest.raises(ConfigurationError, match="sqlite:///") as info:
        open_store(spec)
    assert "postgresql://" in str(info.value)


def test_open_store_hides_passwords() -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store("mysql://user:hunter2@db/app")
    assert "hunter2" not in str(info.value)


def test_import_does_not_import_psycopg() -> None:
    code = (
        "import sys, ctxmgmt, ctxmgmt.store\n"
        "from ctxmgmt.store import open_store, PostgresStore\n"
        "assert 'psycopg' not in sys.modules and 'psycopg_pool' not in sys.modules, 'imported psycopg'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxmgmt.store.postgres import PostgresStore

    monkeypatch.setitem(sys.modules, "psycopg", None)  # what a missing package looks like to import
    with pytest.raises(ConfigurationError, match=r'pip install "ctxmgmt\[postgres\]"'):
        PostgresStore("postgresql://u@h/db")
    with pytest.raises(ConfigurationError, match="postgres"):
        open_store("postgresql://u@h/db")
