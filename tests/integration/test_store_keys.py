"""Store keys: one key per identity (no collision through ``:``), bounded in size on every backend.

Regression tests of issue 33, items 2 and 14, through the frameworks' own surfaces (a LlamaIndex
``Memory`` with blocks, a LangChain selector and a ``create_agent`` middleware) on a real
SQLite file and a real PostgreSQL server.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.store.memory import InMemoryStore as GraphMemoryStore
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.session.conversation import ConversationPool
from ctxmgmt.store import InMemoryStore, SQLiteStore, open_store
from ctxmgmt.store.keys import HASHED, MAX_KEY_BYTES, bounded_key, compose_key
from langchain_ctxmgmt import KadaneDialMiddleware, KadaneDialSelector
from langchain_ctxmgmt._store import LangGraphStateStore
from llamaindex_ctxmgmt import KadaneDialBlock, flush_early
from tests.integration.test_langchain_agent import recording_model

PASSWORD = "hunter2-7731"


# -- the key rules ---------------------------------------------------------------------------------
def test_composed_keys_are_one_to_one_and_plain_parts_keep_todays_keys():
    assert compose_key("kadanedial", "block", "facts", "v2:alice") != compose_key(
        "kadanedial", "block", "facts:v2", "alice"
    )
    assert compose_key("kadanedial", "selector", "a", "b:c") != compose_key(
        "kadanedial", "selector", "a:b", "c"
    )
    # the escape character itself is escaped: a literal "%3A" is not a ":"
    assert compose_key("a", "b%3Ac") != compose_key("a", "b:c")
    assert compose_key("a%", "3Ab") != compose_key("a", "b")
    # parts without "%" or ":" give the plain join earlier versions stored
    for parts in [("kadanedial", "classic", "u1"), ("swin", "block", "facts", "thread-1 é/x\x00")]:
        assert compose_key(*parts) == ":".join(parts)


def test_pool_keys_are_todays_for_plain_parts_and_distinct_otherwise(hashing_embedder):
    from ctxmgmt import KadaneDialStrategy
    from ctxmgmt.session.conversation import Codec

    codec: Codec[Any] = Codec(to_core=lambda m: m, snapshot=None, memory_message=lambda m: m)

    def pool(name: str | None) -> ConversationPool[Any]:
        return ConversationPool(
            lambda: KadaneDialStrategy(embedder=hashing_embedder), codec, surface="selector", name=name
        )

    assert pool("a").get("t1").key == "kadanedial:selector:a:t1"
    assert pool(None).get("t1").key == "kadanedial:selector:t1"
    assert pool("a").get("b:c").key != pool("a:b").get("c").key


def test_bounded_key_limits_every_key_and_stays_one_to_one():
    long_a, long_b = "x" * 100_000 + "a", "x" * 100_000 + "b"
    assert bounded_key(long_a) != bounded_key(long_b)
    assert len(bounded_key(long_a).encode()) <= MAX_KEY_BYTES
    exact = "é" * (MAX_KEY_BYTES // 2)  # 1024 bytes: kept as it is
    assert bounded_key(exact) == exact and bounded_key(exact + "e").startswith(HASHED)
    assert bounded_key(bounded_key(long_a)) != bounded_key(long_a)  # a key shaped like a digest is hashed too
    assert bounded_key("a\x00b").startswith(HASHED) and bounded_key("u\udc80").startswith(HASHED)


# -- item 2: ":" in names through LlamaIndex Memory blocks ------------------------------------------
def _stores(tmp_path, request) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'keys.db'}"
    return request.getfixturevalue("pg_dsn")


@pytest.fixture(params=["sqlite", "postgres"])
def store_spec(tmp_path, request) -> str:
    return _stores(tmp_path, request)


def _stored_keys(spec: str) -> list[str]:
    """Every session key in the ``ctxmgmt_sessions`` table of ``spec``."""
    if spec.startswith("sqlite:///"):
        with sqlite3.connect(spec.removeprefix("sqlite:///")) as db:
            return [row[0] for row in db.execute("SELECT key FROM ctxmgmt_sessions")]
    with psycopg.connect(spec) as conn:
        return [row[0] for row in conn.execute("SELECT key FROM ctxmgmt_sessions")]


def _row_count(spec: str, sql: str) -> int:
    if spec.startswith("sqlite:///"):
        with sqlite3.connect(spec.removeprefix("sqlite:///")) as db:
            return int(db.execute(sql).fetchone()[0])
    with psycopg.connect(spec) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


async def _memory(spec: str, block_name: str, session_id: str) -> Memory:
    block = KadaneDialBlock(name=block_name, embed_model=HashingEmbedder(), store=spec)
    return Memory.from_defaults(
        session_id=session_id,
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(40),
    )


async def _chat(memory: Memory, turns: list[tuple[str, str]]) -> None:
    for user, answer in turns:
        await memory.aput_messages(
            [ChatMessage(role="user", content=user), ChatMessage(role="assistant", content=answer)]
        )


ALICE_TURNS = [
    (f"My vault password is {PASSWORD}, keep it safe.", "Noted."),
    ("I walk my dog Biscuit every morning.", "Biscuit must love that."),
    ("I am learning the cello.", "The cello has a warm sound."),
    ("I am planning a trip to Porto.", "Porto is lovely."),
    ("My favourite dish is bacalhau.", "A Portuguese classic."),
]


async def test_block_names_and_session_ids_with_colons_never_share_state(store_spec):
    """Block ``facts:v2`` / session ``alice`` and block ``facts`` / session ``v2:alice``: two stores."""
    owner = await _memory(store_spec, "facts:v2", "alice")
    await _chat(owner, ALICE_TURNS)
    (owner_block,) = owner.memory_blocks
    assert PASSWORD in str(owner_block.stored_messages("alice"))  # flushed and stored

    other = await _memory(store_spec, "facts", "v2:alice")  # another process's view, same store
    (other_block,) = other.memory_blocks
    assert other_block.stored_messages("v2:alice") == []
    await other.aput(ChatMessage(role="user", content="What is my vault password?"))
    sent = " ".join(str(m.content) for m in await other.aget())
    assert PASSWORD not in sent

    await _chat(other, [("I grow tomatoes.", "Nice."), ("I read sci-fi.", "Great.")] * 3)
    for memory in (owner, other):
        await memory.aput(ChatMessage(role="user", content="And my dog?"))
        await memory.aget()  # the blocks derive (and store) what was flushed to them
    keys = set(_stored_keys(store_spec))
    assert {
        "flushed:facts%3Av2:alice",
        "kadanedial:block:facts%3Av2:alice",
        "flushed:facts:v2%3Aalice",
        "kadanedial:block:facts:v2%3Aalice",
    } <= keys
    # a restart of the owner still finds its own messages, untouched by the other block
    restarted = KadaneDialBlock(name="facts:v2", embed_model=HashingEmbedder(), store=store_spec)
    assert [m.content for m in restarted.stored_messages("alice")][0] == ALICE_TURNS[0][0]
    assert "tomatoes" not in str(restarted.stored_messages("alice"))


# -- item 2: ":" in names through a LangChain selector and a create_agent middleware --------------
def _history(tag: str, turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages += [HumanMessage(f"{tag} question {i} about topic {i % 3}"), AIMessage(f"{tag} answer {i}")]
    return messages


def test_selector_names_and_thread_ids_with_colons_never_share_state(store_spec):
    """``name="a"`` + thread ``b:c`` and ``name="a:b"`` + thread ``c``: once one key, ``...:a:b:c``."""
    first = KadaneDialSelector(name="a", embedder=HashingEmbedder(), store=store_spec)
    second = KadaneDialSelector(name="a:b", embedder=HashingEmbedder(), store=store_spec)
    first.invoke([*_history("secret", 6), HumanMessage("q?")], {"configurable": {"thread_id": "b:c"}})
    second.invoke([*_history("other", 4), HumanMessage("q?")], {"configurable": {"thread_id": "c"}})
    first.invoke([*_history("secret", 6), HumanMessage("q?")], {"configurable": {"thread_id": "b:c"}})

    assert set(_stored_keys(store_spec)) == {"kadanedial:selector:a:b%3Ac", "kadanedial:selector:a%3Ab:c"}
    # each thread's stored turns are its own: neither truncated the other's
    store = open_store(store_spec)
    try:
        first_state = store.load("kadanedial:selector:a:b%3Ac")
        second_state = store.load("kadanedial:selector:a%3Ab:c")
        assert first_state is not None and len(first_state.chains) == 6
        assert second_state is not None and len(second_state.chains) == 4
    finally:
        store.close()


def test_middleware_names_and_thread_ids_with_colons_never_share_state(tmp_path):
    spec = f"sqlite:///{tmp_path / 'agent.db'}"
    runs = [("a", "b:c", "secret", 5), ("a:b", "c", "other", 3)]
    for name, thread, tag, turns in runs:
        middleware = KadaneDialMiddleware(name=name, embedder=HashingEmbedder(), store=spec)
        agent = create_agent(recording_model(["ok"]), [], middleware=[middleware])
        agent.invoke(
            {"messages": [*_history(tag, turns), HumanMessage("q?")]}, {"configurable": {"thread_id": thread}}
        )
    assert set(_stored_keys(spec)) == {"kadanedial:middleware:a:b%3Ac", "kadanedial:middleware:a%3Ab:c"}
    assert _row_count(spec, "SELECT COUNT(*) FROM ctxmgmt_turns") == 5 + 3


def test_plain_names_keep_the_keys_stored_by_earlier_versions(tmp_path, hashing_embedder):
    """A session stored under today's key (no ``:`` or ``%`` in its parts) loads without a rebuild."""
    spec = f"sqlite:///{tmp_path / 'old.db'}"
    selector = KadaneDialSelector(name="facts", embedder=hashing_embedder, store=spec)
    selector.invoke([*_history("t", 4), HumanMessage("q?")], {"configurable": {"thread_id": "user-1"}})
    assert _stored_keys(spec) == ["kadanedial:selector:facts:user-1"]  # f"{strategy}:{surface}:{name}:{id}"


# -- item 14: long thread ids are bounded on every backend -----------------------------------------
def _three_long_threads(store: Any, id_bytes: int, turns: int = 100) -> list[str]:
    selector = KadaneDialSelector(embedder=HashingEmbedder(), store=store)
    ids = [f"{i}" + "t" * (id_bytes - 1) for i in range(3)]
    for thread in ids:
        selector.invoke(
            [*_history("long", turns), HumanMessage("q?")], {"configurable": {"thread_id": thread}}
        )
    return ids


def test_long_thread_ids_cost_what_short_ones_cost_in_sqlite(tmp_path):
    """Three threads of 100 turns: 100 KB ids once took 311 MB (short ids: 1.25 MB)."""
    sizes = {}
    for label, id_bytes in (("short", 8), ("long", 100_000)):
        path = tmp_path / f"{label}.db"
        _three_long_threads(f"sqlite:///{path}", id_bytes)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            longest = max(
                db.execute(f"SELECT MAX(LENGTH(CAST(key AS BLOB))) FROM {table}").fetchone()[0]  # noqa: S608
                for table in ("ctxmgmt_sessions", "ctxmgmt_turns", "ctxmgmt_records")
            )
            assert db.execute("SELECT COUNT(*) FROM ctxmgmt_sessions").fetchone()[0] == 3
            assert db.execute("SELECT COUNT(*) FROM ctxmgmt_turns").fetchone()[0] == 300
        assert longest <= MAX_KEY_BYTES
        sizes[label] = os.path.getsize(path)
    assert sizes["long"] < 1.5 * sizes["short"] + 100_000, sizes


def test_long_thread_ids_are_bounded_on_postgres(pg_dsn):
    _three_long_threads(pg_dsn, 100_000, turns=20)
    with psycopg.connect(pg_dsn) as conn:
        for table in ("ctxmgmt_sessions", "ctxmgmt_turns", "ctxmgmt_records"):
            row = conn.execute(f"SELECT MAX(octet_length(key)) FROM {table}").fetchone()  # noqa: S608
            assert row is not None and row[0] <= MAX_KEY_BYTES
        count = conn.execute("SELECT COUNT(*) FROM ctxmgmt_sessions").fetchone()
        assert count is not None and count[0] == 3


@pytest.mark.parametrize("backend", ["memory", "sqlite", "langgraph"])
def test_every_backend_files_long_ids_under_bounded_distinct_keys(tmp_path, backend):
    """The same rule everywhere: two 100 KB ids that differ only at the end stay two sessions."""
    if backend == "memory":
        store: Any = InMemoryStore()
    elif backend == "sqlite":
        store = SQLiteStore(tmp_path / "b.db")
    else:
        store = LangGraphStateStore(GraphMemoryStore())
    selector = KadaneDialSelector(embedder=HashingEmbedder(), store=store)
    same_start = ["x" * 100_000 + "1", "x" * 100_000 + "2"]
    for thread, turns in zip(same_start, (3, 5), strict=True):
        selector.invoke([*_history("b", turns), HumanMessage("q?")], {"configurable": {"thread_id": thread}})
    for thread, turns in zip(same_start, (3, 5), strict=True):
        stored = store.load(compose_key("kadanedial", "selector", "KadaneDialSelector", thread))
        assert stored is not None and len(stored.chains) == turns
    if backend == "memory":
        assert all(len(key.encode()) <= MAX_KEY_BYTES for key in store._sessions)
    elif backend == "langgraph":
        spaces = {item.namespace for item in store.backend.search(("ctxmgmt",), limit=1000)}
        assert len(spaces) == 2 and all(len("".join(ns)) <= 200 for ns in spaces)
