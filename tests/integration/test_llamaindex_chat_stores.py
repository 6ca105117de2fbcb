"""The chat stores LlamaIndex users pass: ``BaseChatStore`` s as they are, ``SQLAlchemyChatStore`` bridged."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import time
from collections.abc import Callable

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ctxmgmt import ConfigurationError
from llamaindex_ctxmgmt import KadaneDialMemory, SWinSummaryBuffer


def sql_store(tmp_path) -> SQLAlchemyChatStore:
    return SQLAlchemyChatStore(
        table_name="chats", async_database_uri=f"sqlite+aiosqlite:///{tmp_path}/chat.db"
    )


def test_sqlalchemy_chat_store_keeps_the_history_across_memories(tmp_path, hashing_embedder):
    memory = KadaneDialMemory.from_defaults(
        chat_store=sql_store(tmp_path), chat_store_key="u1", embed_model=hashing_embedder
    )
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    for question in ["My cat is called Miso.", "I drive a red car.", "What is my cat called?"]:
        engine.chat(question)
    assert len(memory.get_all()) == 6
    assert "Miso" in " ".join(m.content or "" for m in memory.get("What is my cat called?"))

    restarted = SWinSummaryBuffer.from_defaults(chat_store=sql_store(tmp_path), chat_store_key="u1")
    assert [m.content for m in restarted.get_all()] == [m.content for m in memory.get_all()]


async def test_sqlalchemy_chat_store_from_async_engines(tmp_path, hashing_embedder):
    memory = KadaneDialMemory.from_defaults(
        chat_store=sql_store(tmp_path), chat_store_key="u2", embed_model=hashing_embedder
    )
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    await engine.achat("My cat is called Miso.")
    await engine.achat("What is my cat called?")
    assert len(await memory.aget_all()) == 4
    assert (await memory.aget())[-1].content is not None
    await memory.areset()
    assert await memory.aget_all() == []


def test_a_saved_memory_asks_for_its_database_store_again(tmp_path, hashing_embedder):
    memory = KadaneDialMemory.from_defaults(chat_store=sql_store(tmp_path), embed_model=hashing_embedder)
    memory.put_messages([])
    data = memory.to_dict()
    assert data["custom_components"]["chat_store"] == "DBChatStoreBridge"
    with pytest.raises(ConfigurationError, match="chat_store"):
        KadaneDialMemory.from_dict(data, embed_model=hashing_embedder)
    again = KadaneDialMemory.from_dict(data, embed_model=hashing_embedder, chat_store=sql_store(tmp_path))
    assert again.get_all() == []


def test_anything_else_is_refused_with_what_to_use():
    with pytest.raises(ConfigurationError, match="SQLAlchemyChatStore"):
        KadaneDialMemory(chat_store={"not": "a store"})


async def test_flush_early_lets_a_block_see_a_short_chat(hashing_embedder):
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory import Memory

    from llamaindex_ctxmgmt import KadaneDialBlock, flush_early

    block = KadaneDialBlock(embed_model=hashing_embedder)
    memory = Memory.from_defaults(
        session_id="early",
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(60),
    )
    turns = [
        ("My cat is called Miso and she is grey.", "Miso is a lovely name."),
        ("I am learning to bake sourdough bread.", "Sourdough needs a starter."),
        ("My car engine rattles at low speed.", "It may be a loose heat shield."),
        ("I want to visit Lisbon in spring.", "Spring is a good time for Lisbon."),
    ]
    for user, answer in turns:
        await memory.aput_messages(
            [ChatMessage(role="user", content=user), ChatMessage(role="assistant", content=answer)]
        )
    await memory.aput(ChatMessage(role="user", content="What is my cat called?"))
    sent = await memory.aget()
    assert block.stored_messages("early")  # the block saw the chat after a few turns
    assert "Miso" in " ".join(str(m.content) for m in sent)
    with pytest.raises(ConfigurationError):
        flush_early(0)
    await memory.sql_store._engine.dispose() if hasattr(memory.sql_store, "_engine") else None


# -- fork (gunicorn, multiprocessing) --------------------------------------------------------------
def in_forked_child(work: Callable[[], str], timeout: float = 20.0) -> str:
    """``work()`` run in a forked child; what it returned (or raised), or ``"timeout"``.

    The child reports through a pipe; a child that does not report within ``timeout`` is killed,
    so a hang fails the test instead of stalling the suite.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            try:
                result = work()
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                result = f"error: {type(exc).__name__}: {exc}"
            os.write(write, result.encode()[:60000])
        finally:
            os._exit(0)
    os.close(write)
    ready: list[int] = []
    try:
        ready, _, _ = select.select([read], [], [], timeout)
        return os.read(read, 65536).decode() if ready else "timeout"
    finally:
        os.close(read)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_uses_bridged_sqlalchemy_chat_stores(tmp_path, hashing_embedder):
    # The parent has used the bridge: its loop thread runs and the engine holds aiosqlite
    # connections, whose threads do not exist in a child.
    parent = KadaneDialMemory.from_defaults(
        chat_store=sql_store(tmp_path), chat_store_key="parent", embed_model=hashing_embedder
    )
    parent.put(ChatMessage(role="user", content="My cat is called Miso."))
    assert len(parent.get_all()) == 1

    def child() -> str:
        began = time.monotonic()
        # the parent's memory, its engine inherited
        parent.put(ChatMessage(role="assistant", content="Noted."))
        inherited = len(parent.get_all())
        # a new store and a new memory, sync and async
        fresh = SWinSummaryBuffer.from_defaults(chat_store=sql_store(tmp_path), chat_store_key="child")
        fresh.put(ChatMessage(role="user", content="I drive a red car."))

        async def more() -> int:
            await fresh.aput(ChatMessage(role="assistant", content="A red car."))
            return len(await fresh.aget_all())

        counted = asyncio.run(more())
        selected = " ".join(m.content or "" for m in parent.get("What is my cat called?"))
        took = time.monotonic() - began
        return f"{inherited} {len(fresh.get_all())} {counted} {'Miso' in selected} {took:.2f}"

    report = in_forked_child(child)
    assert report.split()[:4] == ["2", "2", "2", "True"], report
    assert float(report.split()[4]) < 10, report
    # the child never closed the parent's connections: the parent goes on as before
    parent.put(ChatMessage(role="assistant", content="Miso, noted."))
    assert [m.content for m in parent.get_all()][-1] == "Miso, noted."
    assert len(sql_store_messages(tmp_path, "parent")) == 3  # the child's put is in the file too


def sql_store_messages(tmp_path, key: str) -> list[ChatMessage]:
    return asyncio.run(sql_store(tmp_path).get_messages(key))
