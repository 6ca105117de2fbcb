"""Conversations that survive, through the real frameworks.

LangGraph threads each get their own state (and LLM calls do not depend on how threads
interleave); a restarted middleware, classic memory, LlamaIndex memory or ``Memory`` block
continues from SQLite, PostgreSQL or the agent's own LangGraph store without embedding or
summarising again; an erased message leaves no derived trace.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore as LangGraphMemoryStore
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store import SimpleChatStore

from ctxmgmt.app.testing import HashingEmbedder
from langchain_ctxmgmt import KadaneDialMemory as LCKadaneDialMemory
from langchain_ctxmgmt import KadaneDialMiddleware, SWinSummaryMiddleware, TopicThreadMiddleware
from langchain_ctxmgmt.testing import RecordingListChatModel
from llamaindex_ctxmgmt import KadaneDialBlock, KadaneDialMemory, SWinSummaryBuffer
from tests.integration.test_langchain_agent import (
    SYSTEM_PROMPT,
    get_weather,
    recording_model,
)

FACTS = [
    ("My grey cat is called Miso.", "Miso is a lovely name."),
    ("I bake sourdough every Sunday.", "Sunday sourdough sounds great."),
    ("My bank PIN is 4417-2290, keep it safe.", "I will not repeat it."),
    ("The car engine rattles when cold.", "Check the heat shield."),
    ("I am planning a trip to Kyoto in April.", "Book hotels early for April."),
    ("My sister Ana lives in Porto.", "Porto is beautiful."),
]


def facts(n: int, tag: str = "") -> list[tuple[str, str]]:
    return [(f"{tag}{q} ({i})", f"{a} ({i})") for i in range(n) for q, a in [FACTS[i % len(FACTS)]]]


def agent_with(middleware, *, replies: int = 200, store=None, checkpointer=None):
    model = recording_model([f"Answer {k}." for k in range(replies)])
    agent = create_agent(
        model,
        [get_weather],
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
        checkpointer=checkpointer or InMemorySaver(),
        store=store,
    )
    return model, agent


def say(agent, thread: str, text: str) -> None:
    agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


# -- LangGraph threads --------------------------------------------------------------------------
@pytest.mark.parametrize("middleware_class", [SWinSummaryMiddleware, TopicThreadMiddleware])
def test_alternating_threads_make_as_many_llm_calls_as_sequential_ones(middleware_class):
    def run(order: list[tuple[str, str]]) -> int:
        summariser = RecordingListChatModel(responses=["- The user shared a fact."])
        kwargs = {"embedder": HashingEmbedder()} if middleware_class is TopicThreadMiddleware else {}
        middleware = middleware_class(llm=summariser, **kwargs)
        _, agent = agent_with(middleware)
        for thread, text in order:
            say(agent, thread, text)
        return len(summariser.prompts)

    a = [("a", q) for q, _ in facts(16, "A: ")]
    b = [("b", q) for q, _ in facts(16, "B: ")]
    sequential = run(a + b)
    alternating = run([turn for pair in zip(a, b, strict=True) for turn in pair])
    assert sequential > 0 and alternating == sequential


def test_threads_never_see_each_others_turns():
    middleware = KadaneDialMiddleware(embedder=HashingEmbedder())
    model, agent = agent_with(middleware)
    for q, _ in facts(6, "alice: "):
        say(agent, "alice", q)
    say(agent, "bob", "What is my cat called?")
    received = model.received[-1]
    assert all("alice" not in str(m.content) for m in received)
    assert set(middleware._pool._conversations) >= {"alice", "bob"}


def test_a_restarted_middleware_continues_from_sqlite_without_embedding(tmp_path):
    store = f"sqlite:///{tmp_path / 'memories.db'}"
    checkpointer = InMemorySaver()  # the raw history survives in the checkpointer
    first = HashingEmbedder()
    _, agent = agent_with(KadaneDialMiddleware(embedder=first, store=store), checkpointer=checkpointer)
    for q, _ in facts(12):
        say(agent, "t1", q)
    second = HashingEmbedder()
    model, agent = agent_with(KadaneDialMiddleware(embedder=second, store=store), checkpointer=checkpointer)
    say(agent, "t1", "What is my grey cat called?")
    assert second.calls and sum(second.calls) <= 3  # the new turn and the query, not the history
    assert any("Miso" in str(m.content) for m in model.received[-1][1:-1])


def test_the_agents_langgraph_store_is_used_when_none_is_given():
    lg_store = LangGraphMemoryStore()
    middleware = KadaneDialMiddleware(embedder=HashingEmbedder())
    _, agent = agent_with(middleware, store=lg_store)
    for q, _ in facts(4):
        say(agent, "t1", q)
    namespaces = lg_store.list_namespaces(prefix=("ctxmgmt",))
    assert namespaces and any("t1" in "/".join(ns) for ns in namespaces)


def test_a_removed_message_leaves_no_derived_trace(tmp_path):
    path = tmp_path / "memories.db"
    summariser = RecordingListChatModel(responses=["- The user shared facts (nothing secret)."])
    middleware = SWinSummaryMiddleware(llm=summariser, store=f"sqlite:///{path}")
    _, agent = agent_with(middleware)
    config = {"configurable": {"thread_id": "t1"}}
    for q, _ in facts(14):
        say(agent, "t1", q)
    with sqlite3.connect(path) as db:
        before = db.execute("SELECT COUNT(*) FROM ctxmgmt_turns").fetchone()[0]
    assert before > 0
    pins = [m for m in agent.get_state(config).values["messages"] if "4417" in str(m.content)]
    assert len(pins) == 2
    agent.update_state(config, {"messages": [RemoveMessage(id=m.id) for m in pins]})
    say(agent, "t1", "What do I bake on Sundays?")
    assert "4417" not in str(middleware.conversation("t1").strategy.to_state())
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT data FROM ctxmgmt_records").fetchall()
    assert not any(b"4417" in bytes(r[0]) for r in rows)


# -- classic memory ------------------------------------------------------------------------------
def test_classic_memory_restarts_from_the_store(tmp_path):
    store = f"sqlite:///{tmp_path / 'm.db'}"
    first = LCKadaneDialMemory(embedder=HashingEmbedder(), store=store, session_id="u1")
    for q, a in facts(10):
        first.save_context({"input": q}, {"output": a})
    embedder = HashingEmbedder()
    again = LCKadaneDialMemory(embedder=embedder, store=store, session_id="u1", chat_memory=first.chat_memory)
    history = again.load_memory_variables({"input": "What is my cat called?"})["history"]
    assert "Miso" in history and sum(embedder.calls) <= 2


# -- LlamaIndex ------------------------------------------------------------------------------------
def test_llamaindex_memory_restarts_from_the_store(tmp_path):
    store = f"sqlite:///{tmp_path / 'm.db'}"
    chat_store = SimpleChatStore()
    first = KadaneDialMemory.from_defaults(
        embed_model=HashingEmbedder(), chat_store=chat_store, chat_store_key="user-7", store=store
    )
    for q, a in facts(10):
        first.put_messages([ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)])
    first.get(input="warm up")
    embedder = HashingEmbedder()
    again = KadaneDialMemory.from_defaults(
        embed_model=embedder, chat_store=chat_store, chat_store_key="user-7", store=store
    )
    selected = again.get(input="What is my cat called?")
    assert any("Miso" in (m.content or "") for m in selected) and sum(embedder.calls) <= 2


def test_llamaindex_swin_with_an_llm_does_not_summarise_again_after_restart(tmp_path):
    from llamaindex_ctxmgmt.testing import PromptRecordingLLM

    store = f"sqlite:///{tmp_path / 'm.db'}"
    chat_store = SimpleChatStore()
    llm = PromptRecordingLLM()
    first = SWinSummaryBuffer.from_defaults(llm=llm, chat_store=chat_store, store=store, token_limit=3000)
    for q, a in facts(14):
        first.put_messages([ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)])
    first.get()
    calls = len(llm.prompts)
    assert calls > 0
    again = SWinSummaryBuffer.from_defaults(llm=llm, chat_store=chat_store, store=store, token_limit=3000)
    again.get()
    assert len(llm.prompts) == calls


def test_memory_block_keeps_flushed_turns_across_a_restart(tmp_path):
    store = f"sqlite:///{tmp_path / 'blocks.db'}"

    def memory(embedder):
        return Memory.from_defaults(
            session_id="user-1",
            token_limit=400,
            chat_history_token_ratio=0.3,
            token_flush_size=100,
            memory_blocks=[KadaneDialBlock(embed_model=embedder, store=store)],
        )

    first = memory(HashingEmbedder())
    for q, a in facts(12):
        asyncio.run(
            first.aput_messages(
                [ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)]
            )
        )
    block = first.memory_blocks[0]
    flushed = block.stored_messages("user-1")
    assert flushed, "Memory flushed turns into the block"

    restarted = KadaneDialBlock(embed_model=HashingEmbedder(), store=store)
    assert [m.content for m in restarted.stored_messages("user-1")] == [m.content for m in flushed]
    content = asyncio.run(
        restarted.aget(
            messages=[ChatMessage(role="user", content="What is my grey cat called?")], session_id="user-1"
        )
    )
    assert any("Miso" in (m.content or "") for m in content)


# -- PostgreSQL ------------------------------------------------------------------------------------
def test_middleware_on_postgres_restarts_without_embedding(postgres_dsn):
    from ctxmgmt.store import PostgresStore

    store = PostgresStore(postgres_dsn)
    try:
        checkpointer = InMemorySaver()
        _, agent = agent_with(
            KadaneDialMiddleware(embedder=HashingEmbedder(), store=store), checkpointer=checkpointer
        )
        for q, _ in facts(8):
            say(agent, "pg-thread", q)
        embedder = HashingEmbedder()
        model, agent = agent_with(
            KadaneDialMiddleware(embedder=embedder, store=store), checkpointer=checkpointer
        )
        say(agent, "pg-thread", "What is my grey cat called?")
        assert sum(embedder.calls) <= 3
        assert any("Miso" in str(m.content) for m in model.received[-1][1:-1])
    finally:
        store.close()


def test_async_agent_with_a_store(tmp_path):
    middleware = KadaneDialMiddleware(embedder=HashingEmbedder(), store=f"sqlite:///{tmp_path / 'a.db'}")
    model, agent = agent_with(middleware)

    async def talk() -> None:
        for q, _ in facts(5):
            await agent.ainvoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "x"}})

    asyncio.run(talk())
    assert len(middleware.conversation("x").strategy) == 4
    assert isinstance(model.received[-1][-1], HumanMessage)
    assert not isinstance(model.received[-1][-1], AIMessage)


def test_memory_block_forgets_a_session_everywhere(tmp_path):
    path = tmp_path / "blocks.db"
    block = KadaneDialBlock(embed_model=HashingEmbedder(), store=f"sqlite:///{path}")
    messages = [
        ChatMessage(role="user", content=q, additional_kwargs={"session_id": "u9"}) for q, _ in facts(4)
    ]
    asyncio.run(block.aput(messages))
    asyncio.run(block.aget(messages=[ChatMessage(role="user", content="cat?")], session_id="u9"))
    asyncio.run(block.aclear_session("u9"))
    assert block.stored_messages("u9") == []
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM ctxmgmt_records").fetchone()[0] == 0
    restarted = KadaneDialBlock(embed_model=HashingEmbedder(), store=f"sqlite:///{path}")
    assert restarted.stored_messages("u9") == []


def test_store_accepts_a_keyword_conninfo(postgres_dsn):
    middleware = KadaneDialMiddleware(embedder=HashingEmbedder(), store=postgres_dsn)
    _, agent = agent_with(middleware)
    say(agent, "kw", "My grey cat is called Miso.")
    say(agent, "kw", "What is my cat called?")
    assert len(middleware.conversation("kw").strategy) == 1


# -- edits in place ----------------------------------------------------------------------------------
def test_llamaindex_message_redacted_in_place_leaves_no_derived_trace(tmp_path, caplog):
    """A stored message whose text block is rewritten in place (same object) is re-read."""
    chat_store = SimpleChatStore()
    memory = SWinSummaryBuffer.from_defaults(
        chat_store=chat_store, chat_store_key="u", store=f"sqlite:///{tmp_path / 'm.db'}"
    )
    for q, a in facts(14):
        memory.put_messages([ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)])
    memory.get(input="warm up")
    assert "4417" in str(memory.strategy.to_state())
    for message in chat_store.get_messages("u"):
        for block in message.blocks:
            if "4417" in getattr(block, "text", ""):
                block.text = "[redacted]"
    with caplog.at_level("WARNING", logger="ctxmgmt.session.stored_state"):
        selected = memory.get(input="What do I bake on Sundays?")
    assert "history changed at turn" in caplog.text
    assert "4417" not in str(memory.strategy.to_state())
    assert not any("4417" in (m.content or "") for m in selected)


def test_langchain_message_content_reassigned_in_place_is_re_read():
    """Assigning new content to a message of the classic memory's history (same object) is seen."""
    memory = LCKadaneDialMemory(embedder=HashingEmbedder())
    for q, a in facts(10):
        memory.save_context({"input": q}, {"output": a})
    memory.load_memory_variables({"input": "warm up"})
    for message in memory.chat_memory.messages:
        if "4417" in str(message.content):
            message.content = "[redacted]"
    history = memory.load_memory_variables({"input": "What is my PIN?"})["history"]
    assert "4417" not in history
    assert "4417" not in str(memory.strategy.to_state())
