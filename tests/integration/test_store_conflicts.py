"""Write conflicts never take a conversation off its store, and ``clear()`` always reaches it.

Regression tests of issue 33, item 6: after 5 lost compare-and-sets a conversation used to give
up on its store for good, so a later ``clear()`` deleted nothing; 4 processes x 60 calls on one
session in one SQLite file left 2 of 4 workers without the store. Real SQLite files and a real
PostgreSQL server, through LangChain's classic memory, a LlamaIndex ``Memory`` block and a
LangChain selector run in 4 processes.
"""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.store import SQLiteStore, StaleStateError
from ctxmgmt.store.postgres import PostgresStore
from langchain_ctxmgmt import KadaneDialMemory, KadaneDialSelector
from llamaindex_ctxmgmt import KadaneDialBlock, flush_early

TABLES = ("ctxmgmt_sessions", "ctxmgmt_turns", "ctxmgmt_records")


class Conflicting:
    """A store mixin whose appends lose the compare-and-set while ``conflicts`` > 0 (each one counts down)."""

    conflicts = 0
    lost = 0

    def append(self, *args: Any, **kwargs: Any) -> int:
        """:meth:`StateStore.append` of the store mixed in, unless a conflict is due."""
        if self.conflicts > 0:
            self.conflicts -= 1
            self.lost += 1
            raise StaleStateError("another worker wrote first (forced)")
        return super().append(*args, **kwargs)  # type: ignore[misc]


class ConflictingSQLite(Conflicting, SQLiteStore):
    pass


class ConflictingPostgres(Conflicting, PostgresStore):
    pass


def _counts(execute: Callable[[str], int]) -> dict[str, int]:
    return {table: execute(f"SELECT COUNT(*) FROM {table}") for table in TABLES}  # noqa: S608


@pytest.fixture(params=["sqlite", "postgres"])
def conflicting(request, tmp_path) -> tuple[Conflicting, Callable[[], dict[str, int]]]:
    """A store that can be told to lose compare-and-sets, and its row counts per table."""
    if request.param == "sqlite":
        path = tmp_path / "conflicts.db"
        store: Any = ConflictingSQLite(path)

        def execute(sql: str) -> int:
            with sqlite3.connect(path) as db:
                return int(db.execute(sql).fetchone()[0])

    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = ConflictingPostgres(dsn)
        request.addfinalizer(store.close)

        def execute(sql: str) -> int:
            with psycopg.connect(dsn) as conn:
                row = conn.execute(sql).fetchone()
                assert row is not None
                return int(row[0])

    return store, lambda: _counts(execute)


def _stored_turns(store: Any, key: str) -> int:
    stored = store.load(key)
    return 0 if stored is None else len(stored.chains)


def test_classic_memory_keeps_its_store_after_conflicts_and_clear_deletes_every_row(conflicting, caplog):
    store, counts = conflicting
    memory = KadaneDialMemory(embedder=HashingEmbedder(), store=store, session_id="u1")
    key = "kadanedial:classic:u1"
    for i in range(3):
        memory.save_context({"input": f"question {i} about cats"}, {"output": f"answer {i}"})
    assert _stored_turns(store, key) == 3

    store.conflicts = 10_000  # every write of the next call loses
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        memory.save_context({"input": "question 3"}, {"output": "answer 3"})
    assert store.lost >= 5  # the old give-up threshold was crossed
    assert "question 3" in str(memory.load_memory_variables({"input": "question 3"}))  # the call still worked

    store.conflicts = 0  # the other writers are gone: the next call writes again
    memory.save_context({"input": "question 4"}, {"output": "answer 4"})
    assert _stored_turns(store, key) == 5
    assert "this call works without it" in caplog.text and "gave up" not in caplog.text

    store.conflicts = 10_000  # conflicts again, then the user deletes the conversation
    memory.save_context({"input": "question 5"}, {"output": "answer 5"})
    memory.clear()
    assert counts() == dict.fromkeys(TABLES, 0)


async def test_memory_block_clear_session_after_conflicts_deletes_every_row(tmp_path):
    store = ConflictingSQLite(tmp_path / "block.db")
    memory = Memory.from_defaults(
        session_id="u1",
        memory_blocks=[KadaneDialBlock(name="facts", embed_model=HashingEmbedder(), store=store)],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(40),
    )

    async def chat(first: int, last: int) -> None:
        for i in range(first, last):
            await memory.aput_messages(
                [
                    ChatMessage(role="user", content=f"My secret number {i} is {1000 + i}."),
                    ChatMessage(role="assistant", content=f"Noted {i}."),
                ]
            )
        await memory.aput(ChatMessage(role="user", content="What were my numbers?"))
        await memory.aget()

    await chat(0, 6)
    with sqlite3.connect(tmp_path / "block.db") as db:
        assert db.execute("SELECT COUNT(*) FROM ctxmgmt_records").fetchone()[0] > 0
    store.conflicts = 10_000  # other writers keep winning for a while
    await chat(6, 12)
    assert store.lost >= 5
    store.conflicts = 0
    (block,) = memory.memory_blocks
    block.clear_session("u1")
    with sqlite3.connect(tmp_path / "block.db") as db:
        assert _counts(lambda sql: int(db.execute(sql).fetchone()[0])) == dict.fromkeys(TABLES, 0)


# -- 4 processes on one session in one SQLite file -------------------------------------------------
WORKERS = 4
CALLS = 30


def _worker(path: str, chat_path: str, worker: int) -> dict[str, Any]:
    """``CALLS`` agent turns on thread ``shared``: append a turn to the shared chat, select over all of it.

    Returns whether the conversation still uses the store at the end and what the log said.
    """
    import ctxmgmt.session.conversation

    ctxmgmt.session.conversation.INDEX_SECONDS = None  # derive every new turn in each call
    ctxmgmt.session.conversation.BACKGROUND = False
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logging.getLogger("ctxmgmt").addHandler(Keep(logging.INFO))
    logging.getLogger("ctxmgmt").setLevel(logging.INFO)
    selector = KadaneDialSelector(embedder=HashingEmbedder(), store=f"sqlite:///{path}")
    config = {"configurable": {"thread_id": "shared"}}
    chat = sqlite3.connect(chat_path, timeout=60, isolation_level=None)
    ready = Path(path).with_name(f"ready-{worker}")
    ready.touch()  # start together, once every worker has imported everything
    deadline = time.monotonic() + 120
    while sum(1 for _ in ready.parent.glob("ready-*")) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.01)
    for call in range(CALLS):
        chat.execute("BEGIN IMMEDIATE")  # the shared chat history (a checkpointer's part)
        chat.execute("INSERT INTO chat (worker, call) VALUES (?, ?)", (worker, call))
        rows = chat.execute("SELECT worker, call FROM chat ORDER BY n").fetchall()
        chat.execute("COMMIT")
        history: list[BaseMessage] = []
        for w, c in rows:
            history += [
                HumanMessage(f"worker {w} asks question {c} about topic {c % 5}"),
                AIMessage(f"reply {w}.{c}"),
            ]
        selector.invoke([*history, HumanMessage("What did we discuss?")], config)
    conversation = selector._pool.get("shared")  # noqa: SLF001 - what the conversation uses now
    return {
        "uses_store": conversation.state.store is not None,
        "without_store": sum(
            "works without it" in r.getMessage() or "gave up" in r.getMessage() for r in records
        ),
        "conflicts": sum("written by another worker" in r.getMessage() for r in records),
    }


def test_four_processes_on_one_session_all_keep_the_store(tmp_path):
    path, chat_path = str(tmp_path / "shared.db"), str(tmp_path / "chat.db")
    with sqlite3.connect(chat_path) as chat:
        chat.execute("PRAGMA journal_mode = WAL")
        chat.execute("CREATE TABLE chat (n INTEGER PRIMARY KEY AUTOINCREMENT, worker INTEGER, call INTEGER)")
    SQLiteStore(path).close()  # tables created once, before the workers race
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS, mp_context=context) as pool:
        futures = [pool.submit(_worker, path, chat_path, w) for w in range(WORKERS)]
        results = [f.result(timeout=600) for f in futures]
    assert sum(r["conflicts"] for r in results) > 0, results  # they did collide
    assert all(r["uses_store"] for r in results), results
    print("workers:", results)
    # one more call over the whole chat: the store holds every turn, in order
    with sqlite3.connect(chat_path) as chat:
        rows = chat.execute("SELECT worker, call FROM chat ORDER BY n").fetchall()
    assert len(rows) == WORKERS * CALLS
    history: list[BaseMessage] = []
    for w, c in rows:
        history += [
            HumanMessage(f"worker {w} asks question {c} about topic {c % 5}"),
            AIMessage(f"reply {w}.{c}"),
        ]
    selector = KadaneDialSelector(embedder=HashingEmbedder(), store=f"sqlite:///{path}")
    selector.invoke(
        [*history, HumanMessage("What did we discuss?")], {"configurable": {"thread_id": "shared"}}
    )
    stored = SQLiteStore(path).load("kadanedial:selector:KadaneDialSelector:shared")
    assert stored is not None and len(stored.chains) == WORKERS * CALLS
