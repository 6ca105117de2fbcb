"""Stores that fail or lie: corrupt rows, hostile keys and a PostgreSQL outage, on real backends.

- A row that cannot be decoded (a header whose ``config`` is not JSON, a ``schema`` that is not
  a number, JSON nested past the recursion limit) or a vector that would not pass the checks new
  embeddings pass (NaN, another size) is a corrupt record: the call warns and rebuilds, selects
  exactly what a memory without a store selects, and the store holds clean state afterwards.
- Any string is a session id on every backend (a lone surrogate, a key naming a surface).
- PostgreSQL stopped mid-conversation: every call still answers, quickly (the circuit skips the
  store); started again, the store holds the conversation within three calls. A memory created
  while the server is down works in process and persists once it is up; a deletion asked for
  during the outage is carried out when the server returns.

Real SQLite files and real PostgreSQL servers (:mod:`ctxmgmt.store.testing`); no mocks.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory

from ctxmgmt.app.testing import HashingEmbedder
from langchain_ctxmgmt import KadaneDialMemory, TopicThreadMemory

TOPICS = ("my cat Miso", "sourdough in Porto", "the Kyoto trip", "Ana's birthday", "the car engine")
QUESTION = "What is my cat called?"


def talk(memory: Any, start: int, count: int) -> list[float]:
    """``count`` chat turns (select, then save); the wall time of each, in seconds."""
    times = []
    for i in range(start, start + count):
        began = time.perf_counter()
        topic = TOPICS[i % len(TOPICS)]
        memory.load_memory_variables({"input": f"What about {topic}?"})
        memory.save_context({"input": f"Let me tell you about {topic}, part {i}."}, {"output": f"Noted {i}."})
        times.append(time.perf_counter() - began)
    return times


# -- backends ------------------------------------------------------------------------------------
class SQLiteBackend:
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "state.db"
        self.spec = f"sqlite:///{self.path}"

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with sqlite3.connect(self.path) as db:
            return db.execute(sql, params).fetchall()


class PostgresBackend:
    def __init__(self, dsn: str) -> None:
        self.spec = dsn

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        import psycopg

        with psycopg.connect(self.spec, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SQLiteBackend(tmp_path)
    return PostgresBackend(request.getfixturevalue("pg_dsn"))


# -- corrupt rows --------------------------------------------------------------------------------
def _vector_rows(backend: Any) -> list[Any]:
    return backend.execute(
        "SELECT key, turn, name, data FROM ctxmgmt_records WHERE kind = 'f32' ORDER BY turn"
    )


def _set_vector(backend: Any, row: Any, data: bytes) -> None:
    backend.execute(
        "UPDATE ctxmgmt_records SET data = ? WHERE key = ? AND turn = ? AND name = ?",
        (data, row[0], row[1], row[2]),
    )


def nan_vectors(backend: Any) -> None:
    for row in _vector_rows(backend):
        _set_vector(backend, row, np.full(len(bytes(row[3])) // 4, np.nan, "<f4").tobytes())


def one_short_vector(backend: Any) -> None:
    row = _vector_rows(backend)[0]
    _set_vector(backend, row, bytes(row[3])[:-12])


def one_nan_vector(backend: Any) -> None:
    row = _vector_rows(backend)[3]
    vector = np.frombuffer(bytes(row[3]), "<f4").copy()
    vector[5] = np.nan
    _set_vector(backend, row, vector.tobytes())


CORRUPTIONS: dict[str, Callable[[Any], None]] = {
    "config_not_json": lambda b: b.execute("UPDATE ctxmgmt_sessions SET config = ?", ("{not json",)),
    "config_not_an_object": lambda b: b.execute("UPDATE ctxmgmt_sessions SET config = ?", ("[1, 2]",)),
    "deeply_nested_config": lambda b: b.execute(
        "UPDATE ctxmgmt_sessions SET config = ?", ("[" * 100_000 + "]" * 100_000,)
    ),
    "deeply_nested_record": lambda b: b.execute(
        "UPDATE ctxmgmt_records SET data = ? WHERE kind = 'json'", (b"[" * 100_000 + b"]" * 100_000,)
    ),
    "nan_vectors": nan_vectors,
    "one_nan_vector": one_nan_vector,
    "one_short_vector": one_short_vector,
}


@pytest.mark.parametrize("memory_class", [KadaneDialMemory, TopicThreadMemory])
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_row_is_rebuilt_never_raised(
    backend: Any, corruption: str, memory_class: Any, caplog: pytest.LogCaptureFixture
) -> None:
    first = memory_class(embedder=HashingEmbedder(), store=backend.spec, session_id="u1")
    talk(first, 0, 8)
    first.load_memory_variables({"input": QUESTION})  # writes the last turn
    CORRUPTIONS[corruption](backend)

    chat = InMemoryChatMessageHistory(messages=list(first.chat_memory.messages))
    reference = memory_class(embedder=HashingEmbedder(), chat_memory=chat.model_copy(deep=True))
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        restarted = memory_class(
            embedder=HashingEmbedder(), store=backend.spec, session_id="u1", chat_memory=chat
        )
        for _ in range(3):  # the first call rebuilds; none raises
            assert restarted.load_memory_variables({"input": QUESTION}) == reference.load_memory_variables(
                {"input": QUESTION}
            )
    assert any("rebuild" in r.getMessage() for r in caplog.records)
    # the rebuilt state is clean: a third process restores it without warnings or embedding
    caplog.clear()
    embedder = HashingEmbedder()
    again = memory_class(embedder=embedder, store=backend.spec, session_id="u1", chat_memory=chat)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        assert again.load_memory_variables({"input": QUESTION}) == reference.load_memory_variables(
            {"input": QUESTION}
        )
    assert not caplog.records
    assert sum(embedder.calls) <= 2  # the query only
    for row in _vector_rows(backend):
        assert np.isfinite(np.frombuffer(bytes(row[3]), "<f4")).all()


@pytest.mark.parametrize("session_id", ["u\udc80", "\udc80", "kadanedial:classic:u1", "a\x00b", "x" * 3000])
def test_any_session_id_works_and_restores(backend: Any, session_id: str) -> None:
    first = KadaneDialMemory(embedder=HashingEmbedder(), store=backend.spec, session_id=session_id)
    talk(first, 0, 5)
    first.load_memory_variables({"input": QUESTION})
    embedder = HashingEmbedder()
    again = KadaneDialMemory(
        embedder=embedder, store=backend.spec, session_id=session_id, chat_memory=first.chat_memory
    )
    assert "Miso" in again.load_memory_variables({"input": QUESTION})["history"]
    assert sum(embedder.calls) <= 2  # restored from the store, not re-embedded
    other = KadaneDialMemory(embedder=HashingEmbedder(), store=backend.spec, session_id=session_id + "-other")
    talk(other, 0, 1)
    (count,) = backend.execute("SELECT count(*) FROM ctxmgmt_sessions")[0]
    assert count == 2  # two sessions, never one key for both


# -- a PostgreSQL outage -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def own_postgres() -> Iterator[str]:
    """A server of this module's own: its tests stop and start it."""
    from ctxmgmt.store.testing import PostgresUnavailableError, throwaway_postgres

    try:
        with throwaway_postgres() as dsn:
            yield dsn
    except PostgresUnavailableError as exc:
        pytest.fail(f"PostgreSQL server binaries are needed: {exc}")


@pytest.fixture
def outage(own_postgres: str) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(conninfo of a fresh schema, stop the server, start it); the server is left running."""
    from ctxmgmt.store.testing import start_postgres, stop_postgres

    backend = PostgresBackend(own_postgres)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    backend.execute(f"CREATE SCHEMA {schema}")
    down = [False]

    def stop() -> None:
        stop_postgres(own_postgres)
        down[0] = True

    def start() -> None:
        start_postgres(own_postgres)
        down[0] = False

    yield f"{own_postgres} options='-c search_path={schema}'", stop, start
    if down[0]:
        start()


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(adapter)`` returns ``adapter`` and closes it after the test.

    Each adapter given a DSN opened a PostgreSQL pool of its own; left open, it would keep
    reconnecting (and logging) after this module's server stops.
    """
    adapters: list[Any] = []

    def keep(adapter: Any) -> Any:
        adapters.append(adapter)
        return adapter

    yield keep
    for adapter in adapters:
        adapter.close()


def stored_turns(dsn: str) -> dict[str, int]:
    return {
        key: turns for key, turns in PostgresBackend(dsn).execute("SELECT key, turns FROM ctxmgmt_sessions")
    }


def history_turns(memory: Any) -> int:
    return len(memory.chat_memory.messages) // 2


def calls_until_stored(memory: Any, dsn: str, start: int, limit: int = 10) -> int:
    """Chat turns until the store holds all but the newest turn (which the next call writes)."""
    for n in range(1, limit + 1):
        talk(memory, start + n, 1)
        if max(stored_turns(dsn).values(), default=0) >= history_turns(memory) - 1:
            return n
        time.sleep(0.3)  # a user's pause; the store is retried in the background meanwhile
    return -1


def test_an_outage_costs_no_waiting_and_heals_within_three_calls(outage: Any, closing: Any) -> None:
    dsn, stop, start = outage
    memory = closing(KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u1"))
    talk(memory, 0, 6)
    assert max(stored_turns(dsn).values()) >= 5
    stop()
    times = talk(memory, 6, 6)
    assert max(times) < 5, (
        times
    )  # functional: no call waits for a pool timeout (figures: benchmarks/store_outage.py)
    assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]  # works in process
    start()
    assert 1 <= calls_until_stored(memory, dsn, 12) <= 3
    # what was written after the outage is what a process restoring it needs: nothing re-embedded
    embedder = HashingEmbedder()
    again = closing(
        KadaneDialMemory(embedder=embedder, store=dsn, session_id="u1", chat_memory=memory.chat_memory)
    )
    assert again.load_memory_variables({"input": QUESTION}) == memory.load_memory_variables(
        {"input": QUESTION}
    )
    assert sum(embedder.calls) <= 3


def test_a_memory_starts_while_the_server_is_down_and_persists_when_it_returns(
    outage: Any, closing: Any
) -> None:
    dsn, stop, start = outage
    closing(KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="warm-up"))  # makes the tables
    stop()
    began = time.perf_counter()
    memory = closing(KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u2"))
    assert time.perf_counter() - began < 5
    times = talk(memory, 0, 5)
    assert max(times) < 5, times
    assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]
    start()
    assert 1 <= calls_until_stored(memory, dsn, 5) <= 3
    assert any("u2" in key for key in stored_turns(dsn))


def test_a_deletion_during_the_outage_happens_when_the_server_returns(outage: Any, closing: Any) -> None:
    dsn, stop, start = outage
    memory = closing(KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u3"))
    talk(memory, 0, 4)
    assert stored_turns(dsn)
    stop()
    talk(memory, 4, 1)  # the store fails: the circuit opens
    memory.clear()  # the user erases the conversation while the server is down
    start()
    deadline = time.monotonic() + 20
    while stored_turns(dsn) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stored_turns(dsn) == {}


# -- framework stores ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "meta",
    [
        "not an object",
        ["a", "list"],
        {"strategy": "kadanedial", "config": "{not json", "schema": 1, "version": 1, "turns": 1},
        {"strategy": "kadanedial", "config": {}, "schema": "one", "version": 1, "turns": 1},
        {"strategy": "kadanedial", "config": {}, "schema": 1, "version": 1.5, "turns": 1},
        {"strategy": "kadanedial", "config": {}, "schema": 1, "version": 1, "turns": 10**12},
        {"strategy": 7, "config": {}, "schema": 1, "version": 1, "turns": 1},
    ],
)
@pytest.mark.parametrize("framework", ["langgraph", "llamaindex"])
def test_framework_store_corrupt_header_is_a_corrupt_record(framework: str, meta: Any) -> None:
    from ctxmgmt.store import TurnEntry
    from ctxmgmt.store.base import CorruptRecordError
    from ctxmgmt.store.items import META, space_name

    if framework == "langgraph":
        from langgraph.store.memory import InMemoryStore

        from langchain_ctxmgmt._store import LangGraphStateStore

        store: Any = LangGraphStateStore(InMemoryStore())

        def put(name: str, value: Any) -> None:
            store.store.put(
                ("ctxmgmt", space_name("s")), name, value if isinstance(value, dict) else {"v": value}
            )
    else:
        from llama_index.core.storage.kvstore import SimpleKVStore

        from llamaindex_ctxmgmt._store import KVStateStore

        store = KVStateStore(SimpleKVStore())

        def put(name: str, value: Any) -> None:
            store.kvstore.put(
                name, value if isinstance(value, dict) else {"v": value}, collection="ctxmgmt/k_s"
            )

    store.append("s", [TurnEntry(0, "c0", {"a": 1})], expected_version=0, strategy="kadanedial", config={})
    put(META, meta if isinstance(meta, dict) else {"strategy": meta})
    with pytest.raises(CorruptRecordError):
        store.load("s")
    store.append("t", [TurnEntry(0, "c0", {"a": 1})], expected_version=0, strategy="kadanedial", config={})
    put_turn = {"turn": 0, "chain": ["not", "text"], "records": {}}
    if framework == "langgraph":
        store.store.put(("ctxmgmt", space_name("t")), "turn:00000000", put_turn)
    else:
        store.kvstore.put("turn:00000000", put_turn, collection="ctxmgmt/k_t")
    with pytest.raises(CorruptRecordError):
        store.load("t")


# -- a PostgreSQL that stops answering (SIGSTOP), a slow store, a locked SQLite file ---------------
def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a PostgreSQL server's backends and workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


@contextmanager
def frozen(dsn: str) -> Iterator[None]:
    """Every process of the server ``dsn`` names stopped (SIGSTOP), all continued on exit whatever happens."""
    from ctxmgmt.store.testing import _control

    with open(os.path.join(str(_control(dsn)["data"]), "postmaster.pid"), encoding="utf-8") as f:
        postmaster = int(f.readline())
    stopped: list[int] = []
    try:
        for pid in [postmaster, *_children(postmaster)]:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


def bounded(pool: ThreadPoolExecutor, seconds: float, func: Callable[..., Any], *args: Any) -> float:
    """Run ``func(*args)`` on ``pool``; its wall time, or a failure after ``seconds`` (never a hang)."""
    began = time.perf_counter()
    try:
        pool.submit(func, *args).result(timeout=seconds)
    except FutureTimeout:
        pytest.fail(f"{getattr(func, '__name__', func)} still blocked after {seconds} s")
    return time.perf_counter() - began


@pytest.fixture
def own_schema(own_postgres: str) -> str:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    PostgresBackend(own_postgres).execute(f"CREATE SCHEMA {schema}")
    return f"{own_postgres} options='-c search_path={schema}'"


def test_a_frozen_postgres_costs_one_call_one_deadline(
    own_postgres: str, own_schema: str, caplog: Any, closing: Any
) -> None:
    from ctxmgmt.store.circuit import DEADLINE

    memory = closing(KadaneDialMemory(embedder=HashingEmbedder(), store=own_schema, session_id="u1"))
    talk(memory, 0, 4)
    other = closing(
        KadaneDialMemory(embedder=HashingEmbedder(), store=own_schema, session_id="u2")
    )  # its own store
    talk(other, 0, 2)
    with ThreadPoolExecutor(4) as pool:
        with frozen(own_postgres), caplog.at_level(logging.WARNING):
            began = time.perf_counter()
            first = pool.submit(talk, memory, 4, 1)  # old code: blocked until SIGCONT (116 s seen)
            another = pool.submit(talk, other, 2, 1)
            time.sleep(0.5)
            second = pool.submit(memory.load_memory_variables, {"input": QUESTION})  # waits for the first
            try:
                first.result(timeout=DEADLINE + 10)
                assert "Miso" in second.result(timeout=10)["history"]
                another.result(timeout=10)
            except FutureTimeout:
                pytest.fail("a call on the frozen server still blocked after the deadline")
            both = time.perf_counter() - began
            third = bounded(pool, 10, talk, memory, 5, 1)
            assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]
        assert both < DEADLINE + 3, both  # one deadline (each store), then the calls work without it
        assert third < 1.5, third  # the circuit is open: no waiting at all
        assert any("did not answer" in r.getMessage() for r in caplog.records)
        # resumed: the store answers again and catches up
        assert 1 <= calls_until_stored(memory, own_schema, 7, limit=20) <= 20


def test_stuck_store_calls_never_starve_selectors_without_a_store(
    own_postgres: str, own_schema: str, closing: Any
) -> None:
    from langchain_core.messages import HumanMessage

    from ctxmgmt.store.circuit import DEADLINE
    from langchain_ctxmgmt import KadaneDialSelector

    stored = closing(KadaneDialSelector(embedder=HashingEmbedder(), store=own_schema))
    plain = KadaneDialSelector(embedder=HashingEmbedder())
    messages = [HumanMessage(f"Let me tell you about {topic}.") for topic in TOPICS] + [
        HumanMessage(QUESTION)
    ]

    def config(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    async def run() -> tuple[float, float]:
        # warm: the pool holds several open connections, each of which a frozen server keeps
        await asyncio.gather(*(stored.ainvoke(messages, config(f"warm{i}")) for i in range(8)))
        with frozen(own_postgres):
            stuck = [asyncio.ensure_future(stored.ainvoke(messages, config(f"t{i}"))) for i in range(8)]
            await asyncio.sleep(0.3)  # every one of them is inside a store call now
            began = time.perf_counter()
            try:  # old code: no answer, all offload threads wait for the frozen server
                await asyncio.wait_for(plain.ainvoke(messages, config("other")), 10)
            except TimeoutError:
                pytest.fail("a selector without a store got no answer in 10 s")
            answered = time.perf_counter() - began
            done, pending = await asyncio.wait(stuck, timeout=DEADLINE + 10)
            stuck_took = time.perf_counter() - began
            assert not pending, f"{len(pending)} of 8 store calls still blocked"
        for task in done:
            assert task.result()[-1].content == QUESTION  # each answered, without the store
        return answered, stuck_took

    answered, stuck_took = asyncio.run(run())
    assert answered < 1.0, answered
    assert stuck_took < 2 * DEADLINE + 2, stuck_took


class SlowSQLiteStore:
    """A real SQLite store whose every transaction takes ``delay[0]`` seconds more (a disk in trouble)."""

    def __new__(cls, path: Path, delay: list[float]) -> Any:
        from ctxmgmt.store import SQLiteStore

        class Slow(SQLiteStore):
            @contextmanager
            def _transaction(self, *, readonly: bool = False) -> Iterator[Any]:
                time.sleep(delay[0])
                with super()._transaction(readonly=readonly) as cur:
                    yield cur

        return Slow(path)


def test_a_slow_store_opens_the_circuit_and_closes_it_when_fast_again(tmp_path: Path, caplog: Any) -> None:
    from ctxmgmt.store import CircuitStore
    from ctxmgmt.store.circuit import SLOW_CALL, SLOW_CALLS

    delay = [0.0]
    store = CircuitStore(SlowSQLiteStore(tmp_path / "slow.db", delay))
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=store, session_id="u1")
    talk(memory, 0, 3)
    delay[0] = SLOW_CALL + 0.1  # every call answers, in over a second
    with caplog.at_level(logging.WARNING):
        times = talk(memory, 3, 6)
    slow = [t for t in times if t > SLOW_CALL]
    assert len(slow) <= SLOW_CALLS, times  # old code: every call slow (2-4 s with a 2 s store)
    assert all(t < 0.5 for t in times[-3:]), times
    assert not store.available
    assert any("in a row took over" in r.getMessage() for r in caplog.records)
    assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]
    delay[0] = 0.0  # the store is fast again: the circuit closes and the store catches up
    deadline = time.monotonic() + 10
    while not store.available and time.monotonic() < deadline:
        talk(memory, 9, 1)
        time.sleep(0.3)
    assert store.available
    talk(memory, 10, 2)
    stored = store.load("kadanedial:classic:u1")  # the turns derived meanwhile were written back
    assert stored is not None and len(stored.chains) >= 10, stored


def test_a_locked_sqlite_file_costs_one_call_the_busy_timeout(tmp_path: Path) -> None:
    from ctxmgmt.store.sqlite import BUSY_TIMEOUT

    path = tmp_path / "locked.db"
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=f"sqlite:///{path}", session_id="u1")
    talk(memory, 0, 3)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another process's writer that never commits
    try:
        with ThreadPoolExecutor(1) as pool:
            times = [bounded(pool, BUSY_TIMEOUT + 10, talk, memory, 3 + i, 1) for i in range(3)]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert times[0] < BUSY_TIMEOUT + 2, times  # old code: 30 s (the former busy timeout)
    assert max(times[1:]) < 1.0, times
    assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]


def test_an_abandoned_call_keeps_the_circuit_open_until_it_ends(tmp_path: Path) -> None:
    # A call past its deadline is abandoned, not stopped: its write may still land. Closing the
    # circuit replays deletions, so it waits for the abandoned call to end first.
    from ctxmgmt.store import CircuitStore, SQLiteStore, StoreError, TurnEntry
    from ctxmgmt.store.circuit import StoreTimeoutError

    gate = threading.Event()
    gate.set()

    class Gated(SQLiteStore):
        def append(self, *args: Any, **kwargs: Any) -> int:
            gate.wait(30)
            return super().append(*args, **kwargs)

    store = CircuitStore(Gated(tmp_path / "gated.db"), deadline=0.5, first_retry=0.05, max_retry=0.1)
    entry = TurnEntry(0, "c0", {"a": 1})
    gate.clear()
    began = time.perf_counter()
    with pytest.raises(StoreTimeoutError):
        store.append("u1", [entry], expected_version=0, strategy="s", config={})
    assert time.perf_counter() - began < 1.5
    store.delete("u1")  # asked while the circuit is open: replayed when it closes
    time.sleep(0.5)  # retries run meanwhile: the file answers, but the abandoned write has not ended
    assert not store.available
    with pytest.raises(StoreError):
        store.load("u1")
    gate.set()  # the abandoned write lands now ...
    deadline = time.monotonic() + 5
    while not store.available and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.available
    assert store.load("u1") is None  # ... and the deletion asked for after it still wins


def test_create_agent_answers_through_a_frozen_postgres(
    own_postgres: str, own_schema: str, closing: Any
) -> None:
    # The real agent loop: a middleware with the store pays one deadline, once; an agent without a
    # store, run at the same time, answers at once.
    import itertools

    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    from ctxmgmt.store.circuit import DEADLINE
    from langchain_ctxmgmt import KadaneDialMiddleware

    def agent(**kwargs: Any) -> Any:
        model = GenericFakeChatModel(messages=itertools.repeat(AIMessage("Miso.")))
        return create_agent(
            model, [], middleware=[closing(KadaneDialMiddleware(embedder=HashingEmbedder(), **kwargs))]
        )

    stored, plain = agent(store=own_schema), agent()
    past = [HumanMessage(f"Let me tell you about {topic}.") for topic in TOPICS]

    async def ask(graph: Any, thread: str) -> float:
        began = time.perf_counter()
        state = await graph.ainvoke(
            {"messages": [*past, HumanMessage(QUESTION)]}, {"configurable": {"thread_id": thread}}
        )
        assert state["messages"][-1].content == "Miso."
        return time.perf_counter() - began

    async def run() -> tuple[list[float], float]:
        await ask(stored, "warm")
        with frozen(own_postgres):
            stuck = [asyncio.ensure_future(ask(stored, f"t{i}")) for i in range(8)]
            await asyncio.sleep(0.3)
            try:
                alone = await asyncio.wait_for(ask(plain, "other"), 10)
            except TimeoutError:
                pytest.fail("an agent without a store got no answer in 10 s")
            done, pending = await asyncio.wait(stuck, timeout=DEADLINE + 10)
            assert not pending, f"{len(pending)} of 8 agent runs still blocked"
        return [task.result() for task in done], alone

    times, alone = asyncio.run(run())
    assert alone < 1.0, alone
    assert max(times) < 2 * DEADLINE + 2, times
