"""The chat stores LlamaIndex users pass: ``BaseChatStore`` s as they are, ``SQLAlchemyChatStore`` bridged."""

from __future__ import annotations

import pytest
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
