"""Fuzzing the stored state: a corrupt row never fails a call, whatever it holds.

For each of the five strategies, a conversation is written to a SQLite store through the LangChain
classic memory. Each generated case copies that database, corrupts it (one to three mutations: a
header field replaced by a value of any type, a record's bytes replaced or cut, a node anywhere
inside a JSON record replaced by any JSON value, a vector filled with NaN or given another size,
scaled or emptied, a record's kind renamed, a row deleted, a chain hash changed) and then makes
calls through a *new* memory on that store and the same raw history, as a restarted process would.
Every call must succeed: a corrupt record is a warning and a rebuild, never an exception (not even a
``CtxMgmtError``). Seeded (``derandomize``): the same cases every run.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import langchain_ctxmgmt as lc
from ctxmgmt.app.testing import HashingEmbedder
from tests.adapters.test_acm_contract import CapitalisedExtractor

CASES = int(os.environ.get("CTXMGMT_STORE_FUZZ_CASES", "150"))
"""Generated corruptions per strategy (``$CTXMGMT_STORE_FUZZ_CASES`` to fuzz longer)."""

TURNS = 10
"""Turns written before the store is corrupted."""

MEMORIES: dict[str, Callable[..., Any]] = {
    "kadanedial": lc.KadaneDialMemory,
    "swin": lc.SWinSummaryBuffer,
    "acm": lc.ACMTieredBuffer,
    "discourse_tree": lc.DiscourseTreeMemory,
    "topic_thread": lc.TopicThreadMemory,
}

TOPICS = ("my cat Miso", "sourdough in Porto", "the Kyoto trip", "Ana's birthday", "the car engine")


def make(name: str, path: Path, chat: Any = None) -> Any:
    kwargs: dict[str, Any] = {"store": f"sqlite:///{path}", "session_id": "u1", "max_token_limit": 400}
    if name == "acm":
        kwargs["entity_extractor"] = CapitalisedExtractor()
    elif name != "swin":
        kwargs["embedder"] = HashingEmbedder()
    if chat is not None:
        kwargs["chat_memory"] = chat
    return MEMORIES[name](**kwargs)


def talk(memory: Any, start: int, count: int) -> None:
    for i in range(start, start + count):
        topic = TOPICS[i % len(TOPICS)]
        memory.load_memory_variables({"input": f"What about {topic}?"})
        memory.save_context({"input": f"Let me tell you about {topic}, part {i}."}, {"output": f"Noted {i}."})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Any]]]:
    """Per strategy: a database holding a conversation of :data:`TURNS` turns, and its messages."""
    out = {}
    for name in MEMORIES:
        path = tmp_path_factory.mktemp(name) / "state.db"
        memory = make(name, path)
        talk(memory, 0, TURNS)
        memory.load_memory_variables({"input": "anything"})  # writes the last turn
        out[name] = (path, list(memory.chat_memory.messages))
    return out


# -- mutations -------------------------------------------------------------------------------
SQL_VALUES = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.sampled_from(["{}", "[]", "null", '{"a": 1}', "[" * 5000 + "]" * 5000, "1e999", "NaN", "-1", "3.5"]),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every node of a JSON value, as the keys/indexes leading to it."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += paths(child, (*prefix, i))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    container = value
    for step in path[:-1]:
        container = container[step]
    container[path[-1]] = new
    return value


@st.composite
def mutation(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(
        st.sampled_from(
            ["header", "json_node", "bytes", "vector", "record_kind", "delete_row", "chain", "turns"]
        )
    )
    if kind == "header":
        return kind, (
            draw(st.sampled_from(["strategy", "config", "schema", "version", "turns"])),
            draw(SQL_VALUES),
        )
    if kind == "json_node":
        return kind, (draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6)), draw(JSON_VALUES))
    if kind == "bytes":
        return kind, (draw(st.integers(0, 10**6)), draw(st.binary(max_size=40) | SQL_VALUES))
    if kind == "vector":
        how = draw(st.sampled_from(["nan", "inf", "short", "long", "scaled", "zero_length", "odd_bytes"]))
        return kind, (draw(st.integers(0, 10**6)), how)
    if kind == "record_kind":
        return kind, (draw(st.integers(0, 10**6)), draw(SQL_VALUES))
    if kind == "delete_row":
        return kind, (
            draw(st.sampled_from(["ctxmgmt_records", "ctxmgmt_turns"])),
            draw(st.integers(0, 10**6)),
        )
    if kind == "chain":
        return kind, (draw(st.integers(0, 10**6)), draw(SQL_VALUES))
    return kind, draw(st.integers(-5, 10**9))


def apply(db: sqlite3.Connection, kind: str, arg: Any) -> None:
    """Corrupt the database with one mutation (rows picked by index modulo their count)."""

    def pick(sql: str, index: int) -> Any:
        rows = db.execute(sql).fetchall()
        return rows[index % len(rows)] if rows else None

    if kind == "header":
        column, value = arg
        db.execute(f"UPDATE ctxmgmt_sessions SET {column} = ?", (value,))  # noqa: S608 - fixed names
    elif kind == "turns":
        db.execute("UPDATE ctxmgmt_sessions SET turns = ?", (arg,))
    elif kind == "json_node":
        row = pick(
            "SELECT rowid, data FROM ctxmgmt_records WHERE kind = 'json' AND name LIKE '%vector%'", arg[0]
        )
        if row is not None:
            value = json.loads(bytes(row[1]))
            nodes = paths(value)
            value = replaced(value, nodes[arg[1] % len(nodes)], arg[2])
            db.execute(
                "UPDATE ctxmgmt_records SET data = ? WHERE rowid = ?", (json.dumps(value).encode(), row[0])
            )
    elif kind == "bytes":
        row = pick("SELECT rowid FROM ctxmgmt_records", arg[0])
        if row is not None:
            db.execute("UPDATE ctxmgmt_records SET data = ? WHERE rowid = ?", (arg[1], row[0]))
    elif kind == "vector":
        row = pick(
            "SELECT rowid, data FROM ctxmgmt_records WHERE kind = 'f32' AND length(data) >= 32"
            " AND length(data) % 4 = 0",
            arg[0],
        )
        if row is not None:
            vector = np.frombuffer(bytes(row[1]), dtype="<f4").copy()
            how = arg[1]
            data = {
                "nan": lambda: np.full_like(vector, np.nan).tobytes(),
                "inf": lambda: np.where(vector == vector.max(), np.inf, vector).astype("<f4").tobytes(),
                "short": lambda: vector[:-3].tobytes(),
                "long": lambda: np.concatenate([vector, vector[:5]]).tobytes(),
                "scaled": lambda: (vector * 7).astype("<f4").tobytes(),
                "zero_length": lambda: b"",
                "odd_bytes": lambda: vector.tobytes()[:-1],
            }[how]()
            db.execute("UPDATE ctxmgmt_records SET data = ? WHERE rowid = ?", (data, row[0]))
    elif kind == "record_kind":
        row = pick("SELECT rowid FROM ctxmgmt_records", arg[0])
        if row is not None:
            db.execute("UPDATE ctxmgmt_records SET kind = ? WHERE rowid = ?", (arg[1], row[0]))
    elif kind == "delete_row":
        table, index = arg
        row = pick(f"SELECT rowid FROM {table}", index)  # noqa: S608 - fixed names
        if row is not None:
            db.execute(f"DELETE FROM {table} WHERE rowid = ?", (row[0],))  # noqa: S608
    elif kind == "chain":
        row = pick("SELECT rowid FROM ctxmgmt_turns", arg[0])
        if row is not None:
            db.execute("UPDATE ctxmgmt_turns SET chain = ? WHERE rowid = ?", (arg[1], row[0]))


@pytest.mark.parametrize("name", list(MEMORIES))
def test_a_corrupt_store_never_fails_a_call(
    name: str, pristine: dict[str, tuple[Path, list[Any]]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, messages = pristine[name]
    from langchain_core.chat_history import InMemoryChatMessageHistory

    counter = iter(range(10**9))
    rebuilt = 0

    @settings(
        derandomize=True,
        database=None,
        max_examples=CASES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(mutation(), min_size=1, max_size=3))
    def run(mutations: list[tuple[str, Any]]) -> None:
        nonlocal rebuilt
        path = tmp_path / f"case-{next(counter)}.db"
        with sqlite3.connect(source) as original, sqlite3.connect(path) as copy:
            original.backup(copy)  # the rows still in the write-ahead log too
        with sqlite3.connect(path) as db:
            for kind, arg in mutations:
                apply(db, kind, arg)
        chat = InMemoryChatMessageHistory(messages=list(messages))
        caplog.clear()
        memory = make(name, path, chat)
        talk(memory, TURNS, 2)  # raises on any failure: the test fails with the mutations
        memory.load_memory_variables({"input": "What about my cat?"})
        rebuilt += any("unusable" in r.getMessage() or "rebuild" in r.getMessage() for r in caplog.records)
        path.unlink()

    with caplog.at_level(logging.WARNING):
        run()
    assert rebuilt > CASES // 4  # most corruptions are noticed (the rest touch unread rows)
