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

import logging
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory

from ctxmgmt.testing import HashingEmbedder
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


def test_an_outage_costs_no_waiting_and_heals_within_three_calls(outage: Any) -> None:
    dsn, stop, start = outage
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u1")
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
    again = KadaneDialMemory(embedder=embedder, store=dsn, session_id="u1", chat_memory=memory.chat_memory)
    assert again.load_memory_variables({"input": QUESTION}) == memory.load_memory_variables(
        {"input": QUESTION}
    )
    assert sum(embedder.calls) <= 3


def test_a_memory_starts_while_the_server_is_down_and_persists_when_it_returns(outage: Any) -> None:
    dsn, stop, start = outage
    KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="warm-up")  # creates the tables
    stop()
    began = time.perf_counter()
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u2")
    assert time.perf_counter() - began < 5
    times = talk(memory, 0, 5)
    assert max(times) < 5, times
    assert "Miso" in memory.load_memory_variables({"input": QUESTION})["history"]
    start()
    assert 1 <= calls_until_stored(memory, dsn, 5) <= 3
    assert any("u2" in key for key in stored_turns(dsn))


def test_a_deletion_during_the_outage_happens_when_the_server_returns(outage: Any) -> None:
    dsn, stop, start = outage
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=dsn, session_id="u3")
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
