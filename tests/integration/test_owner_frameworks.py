"""One owner for a conversation's state, through the frameworks and on real SQLite (issue 33).

Items 3 (``clear_session`` undone by an evicted conversation), 5 (``erase(redact_with=...)`` of an
older message rewrites the store at once), 10 (queued background work bounded by
``max_sessions``) and 11 (``new_session`` during a backlog keeps the carried memory). The
background worker is held inside a step by a gated embedder, so nothing depends on timing.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

import ctxmgmt.session.conversation as conversation_module
from ctxmgmt.app.testing import HashingEmbedder
from llamaindex_ctxmgmt import (
    KadaneDialBlock,
    SWinSummaryBlock,
    TopicThreadBlock,
    erase_from_blocks,
    flush_early,
)
from tests.helpers import GatedEmbedder, passes_in_forked_child

SECRET = "4417-2290"


@pytest.fixture
def one_turn_per_call(monkeypatch):
    """Calls derive a few turns and leave the rest to the background worker (a slow machine)."""
    now = [0.0]

    def clock() -> float:
        now[0] += 10.0
        return now[0]

    monkeypatch.setattr(conversation_module, "INDEX_SECONDS", 0.01)
    monkeypatch.setattr(conversation_module, "_monotonic", clock)


def rows_with(path: Any, text: str) -> int:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT data FROM ctxmgmt_records").fetchall()
    return sum(text.encode() in bytes(r[0]) for r in rows)


def session_rows(path: Any) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM ctxmgmt_records").fetchone()[0]


def turns(n: int, secret_at: int = 3) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(n):
        text = f"My PIN is {SECRET}." if i == secret_at else f"note {i} about topic {i % 9}"
        out += [ChatMessage(role="user", content=text), ChatMessage(role="assistant", content=f"ok {i}")]
    return out


async def test_clear_session_is_not_undone_by_an_evicted_conversation(tmp_path, one_turn_per_call):
    embedder = GatedEmbedder()
    block = KadaneDialBlock(embed_model=embedder, store=f"sqlite:///{tmp_path / 'b.db'}", max_sessions=2)
    await block.aput(turns(60), session_id="victim")
    await block.aget([ChatMessage(role="user", content="what is my PIN?")], session_id="victim")
    assert embedder.waiting.wait(10)  # the worker is inside a step of the victim
    for other in ("a", "b"):  # two other sessions evict the victim
        await block.aput(turns(2), session_id=other)
        await block.aget([ChatMessage(role="user", content="hi")], session_id=other)
    block.clear_session("victim")
    assert rows_with(tmp_path / "b.db", SECRET) == 0
    embedder.gate.set()
    time.sleep(1.0)  # the step under way ends; the evicted copy must not write it back
    assert rows_with(tmp_path / "b.db", SECRET) == 0
    assert "victim" not in block._conversations()


@pytest.mark.parametrize("block_class", [SWinSummaryBlock, TopicThreadBlock])
async def test_redacting_an_older_message_rewrites_the_store_at_once(tmp_path, block_class):
    path = tmp_path / "r.db"
    kwargs: dict[str, Any] = {"store": f"sqlite:///{path}"}
    if block_class is TopicThreadBlock:
        kwargs["embed_model"] = HashingEmbedder()
    else:
        kwargs.update(window=2, overlap=0)
    memory = Memory.from_defaults(
        session_id="u1",
        memory_blocks=[block_class(**kwargs)],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(40),
    )
    history = turns(8, secret_at=1)
    for k in range(0, len(history), 2):
        await memory.aput_messages(history[k : k + 2])
    await memory.aput(ChatMessage(role="user", content="What is my PIN?"))
    await memory.aget()
    assert rows_with(path, SECRET) > 0
    assert await erase_from_blocks(memory, SECRET, redact_with="[redacted]") == 1
    assert rows_with(path, SECRET) == 0  # before any further get
    block = memory.memory_blocks[0]
    assert SECRET not in str(block.conversation("u1").strategy.to_state())
    assert SECRET not in str([m.text for t in block.conversation("u1").history.turns for m in t.messages])


def test_queued_background_work_counts_against_max_sessions(one_turn_per_call):
    from langchain_ctxmgmt import KadaneDialSelector

    embedder = GatedEmbedder()
    selector = KadaneDialSelector(embedder=embedder, max_sessions=3)
    history = [m for i in range(40) for m in (HumanMessage(f"note {i}"), AIMessage(f"ok {i}"))]
    try:
        for user in range(10):
            selector.invoke(
                [*history, HumanMessage("what about note 3?")], {"configurable": {"thread_id": f"u{user}"}}
            )
        worker = conversation_module._WORKER
        with worker._cond:
            queued = list(worker._queue)
        assert len(queued) <= 3 and not any(c.closed for c in queued)  # evicted ones were dropped
    finally:
        embedder.gate.set()


def test_new_session_during_a_backlog_keeps_the_carried_memory(one_turn_per_call, monkeypatch):
    from ctxmgmt import SWinStrategy
    from langchain_ctxmgmt import SWinSummaryBuffer

    monkeypatch.setattr(SWinStrategy, "derive_turns", 0)  # a backlog of 60 turns (else: over 1,000)

    def memory_with_history(derive_all: bool) -> SWinSummaryBuffer:
        memory = SWinSummaryBuffer(window=2, overlap=0)
        if derive_all:
            memory._conversation().index_seconds = None
        for i in range(60):  # a long history already in the chat history (a restart)
            memory.chat_memory.add_messages(
                [HumanMessage(f"I visited city number {i} on my trip"), AIMessage(f"city {i} noted")]
            )
        memory.load_memory_variables({"input": "where did I go?"})
        return memory

    waited = memory_with_history(derive_all=True)
    waited.new_session()
    memory = memory_with_history(derive_all=False)
    conversation = memory._conversation()
    assert conversation.backlog > 0
    memory.new_session()
    carried = conversation.strategy.to_state()
    assert carried == waited._conversation().strategy.to_state()  # as if it had waited first
    assert conversation.wait_derived(timeout=10) and conversation.backlog == 0
    assert conversation.strategy.to_state() == carried and len(conversation.strategy) == 0


def test_a_forked_worker_answers_with_the_real_model_while_the_parent_derives(default_embedder, monkeypatch):
    """gunicorn-style: a process with a backlog (the worker inside torch) forks; the child answers,
    derives the rest with its own worker and exits cleanly (torch's thread pool does not survive a
    fork: the child runs it on one thread)."""
    from llamaindex_ctxmgmt import KadaneDialMemory

    monkeypatch.setattr(conversation_module, "INDEX_SECONDS", 0.0)
    memory = KadaneDialMemory.from_defaults(embed_model=default_embedder, token_limit=10**6)
    memory.put_messages(turns(40))
    memory.get(input="what is my PIN?")
    conversation = memory._conversation()
    assert conversation.backlog > 0

    def child() -> bool:
        text = " ".join(str(m.content) for m in memory.get(input="what is my PIN?"))
        return conversation.wait_derived(timeout=60) and SECRET in text

    assert passes_in_forked_child(child)


EXIT_SCRIPT = """
import sys, time
import ctxmgmt.session.conversation as cm
from ctxmgmt.store import SQLiteStore
from llama_index.core.base.llms.types import ChatMessage
from llamaindex_ctxmgmt import {memory}
memory = {memory}.from_defaults(store=SQLiteStore(sys.argv[1]))
memory._conversation().index_seconds = 0.0  # the rest is left to the background worker (a slow machine)
history = []
for i in range(300):  # delivered at once: ACM's entities take the worker about 2 s
    history += [ChatMessage(role="user", content=f"Note {{i}} about Topic {{i % 7}} in Paris"),
                ChatMessage(role="assistant", content=f"ok {{i}}")]
memory.put_messages(history)
memory.get(input="what about topic 3?")
conversation = memory._conversation()  # turns to derive, or (ACM) their entities to extract
deadline = time.monotonic() + 60  # KadaneDial's call leaves all 300 to the worker: let it store some
while len(conversation.strategy) == 0 and time.monotonic() < deadline:
    time.sleep(0.02)
assert conversation.backlog > 0 or conversation.strategy.pending_work() > 0
print("last statement", flush=True)
"""


@pytest.mark.model  # the script's memories load MiniLM or spaCy (in a subprocess)
@pytest.mark.parametrize("memory", ["KadaneDialMemory", "ACMTieredBuffer"])
def test_a_process_that_exits_while_the_worker_derives_exits_cleanly(memory, tmp_path):
    """The worker is inside torch or spaCy when the script ends: the process exits with 0
    (before: a daemon thread in native code while the interpreter finalised could abort it)."""
    import subprocess
    import sys

    path = tmp_path / "exit.db"
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT.format(memory=memory), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "last statement" in done.stdout
    with sqlite3.connect(path) as db:
        assert (
            db.execute("SELECT count(*) FROM ctxmgmt_records").fetchone()[0] > 0
        )  # what was derived is kept


def test_a_deleted_message_under_eviction_is_gone_from_the_store_without_a_livelock(
    tmp_path, one_turn_per_call, caplog
):
    """Item 4: a thread evicted while the worker derives it, then the secret turn deleted (as
    ``RemoveMessage`` does): one rewind, the backlog moves, no row keeps the secret."""
    from langchain_ctxmgmt import SWinSummarySelector

    path = tmp_path / "d.db"
    selector = SWinSummarySelector(window=2, overlap=0, store=f"sqlite:///{path}", max_sessions=1)
    history: list[Any] = []
    for i in range(300):
        text = f"My PIN is {SECRET}." if i == 2 else f"I visited city number {i}"
        history += [HumanMessage(text), AIMessage(f"noted {i}")]
    a, b = {"configurable": {"thread_id": "a"}}, {"configurable": {"thread_id": "b"}}
    selector.invoke([*history, HumanMessage("where did I go?")], a)
    selector.invoke([HumanMessage("hi"), AIMessage("hello"), HumanMessage("and?")], b)  # evicts "a"
    assert rows_with(path, SECRET) > 0
    del history[4:6]  # the secret turn is deleted
    with caplog.at_level("WARNING"):
        for _ in range(3):
            selector.invoke([*history, HumanMessage("where did I go?")], a)
            selector.invoke([HumanMessage("hi"), AIMessage("hello"), HumanMessage("and?")], b)
        selector.invoke([*history, HumanMessage("where did I go?")], a)
        conversation = selector.conversation("a")
        assert conversation.wait_derived(timeout=60)
    assert rows_with(path, SECRET) == 0
    rebuilt = [r for r in caplog.records if "rebuilt" in r.getMessage()]
    assert len(rebuilt) <= 4  # one rewind per call that found the deletion, never a loop
