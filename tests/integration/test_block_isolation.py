"""Isolation of ``Memory`` blocks: between users sharing one block, and between blocks of one ``Memory``.

- A block shared by every user hands ``Memory`` a selection per call; what ``Memory`` passes
  back to ``atruncate`` must only ever be selected again for the session it was selected for.
  LlamaIndex passes a fresh ``[]`` for a block that returned nothing, and CPython often gives it
  the address of a list freed earlier (issue 33, item 1: another user's turns in the LLM input).
- A block that fails (its embedder raises, its stored log is corrupt) logs a warning naming the
  block and the session and contributes nothing; ``Memory``'s queue and its other blocks still
  reach the LLM, through ``get`` (whose ``asyncio_run`` turns any ``RuntimeError`` into
  "Detected nested async") and ``aget`` alike (item 12).
"""

from __future__ import annotations

import copy
import logging
import pickle
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.storage.chat_store.sql import MessageStatus

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.store.message_log import MessageLog
from llamaindex_ctxmgmt import KadaneDialBlock, TopicThreadBlock
from tests.integration.test_llamaindex_engines import RecordingLLM

STATIC = "The assistant's name is Ada."


def secret_turns(user: str, n: int) -> list[ChatMessage]:
    """``n`` turns, each naming ``user`` and a secret only that user has."""
    out: list[ChatMessage] = []
    for i in range(n):
        out.append(
            ChatMessage(role="user", content=f"{user} secret code {i} is {user}-{i:04d} please keep it")
        )
        out.append(ChatMessage(role="assistant", content=f"Kept {user}'s code {i}."))
    return out


def text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    return "\n".join(str(m.content or "") for m in messages or ())


def memory(session: str, blocks: list[Any], **kwargs: Any) -> Memory:
    settings: dict[str, Any] = {
        "token_limit": 3000,
        "chat_history_token_ratio": 0.2,
        "token_flush_size": 200,
        **kwargs,
    }
    return Memory.from_defaults(
        session_id=session,
        memory_blocks=blocks,
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **settings,
    )


# -- item 1: one user's turns never reach another user -------------------------------------------


async def test_a_fresh_list_at_a_freed_selections_address_selects_nothing(hashing_embedder):
    """``atruncate([], n)`` right after another session's ``aget``, at the very address CPython
    freed: the old lookup by ``id()`` selected that session's turns again, for the caller."""
    block = KadaneDialBlock(embed_model=hashing_embedder)
    collisions = 0
    for k in range(30):
        user = f"user{k}"
        await block.aput(secret_turns(user, 6), session_id=user)
        content = await block.aget([ChatMessage(role="user", content=f"{user} secret code")], session_id=user)
        assert f"{user} secret" in text(content)
        freed = id(content)
        drained = [[] for _ in range(100)]  # CPython's free list of lists, emptied: room for `content`
        fresh: list[Any] = [None] * 100
        del content
        for i in range(len(fresh)):  # held alive, so each has its own address; one may be `freed`
            fresh[i] = []
        reused = next((x for x in fresh if id(x) == freed), fresh[0])
        collisions += id(reused) == freed
        assert await block.atruncate(reused, 5) is None, f"{user}'s turns returned for a fresh []"
        del drained, fresh
    assert collisions  # CPython did give a fresh [] the freed address (else the test shows nothing)


async def test_truncation_selects_again_only_for_the_block_and_session_of_the_content(hashing_embedder):
    block, other = (
        KadaneDialBlock(embed_model=hashing_embedder),
        KadaneDialBlock(embed_model=hashing_embedder),
    )
    for user in ("alice", "bob"):
        await block.aput(secret_turns(user, 8), session_id=user)
    content = await block.aget([ChatMessage(role="user", content="alice secret code 3")], session_id="alice")
    assert isinstance(content, list) and content == list(content)  # an ordinary list to Memory
    full = block.last_context.tokens  # type: ignore[union-attr]
    assert await block.atruncate(content, 0) is content
    assert await other.atruncate(content, 10) is None  # another block's content
    for copied in (
        list(content),
        copy.copy(content),
        copy.deepcopy(content),
        pickle.loads(pickle.dumps(content)),
    ):
        assert type(copied) is list and copied == content  # copies are plain lists (no block inside)
        assert await block.atruncate(copied, 10) is None  # and carry nothing to select again
    for _ in range(2):  # the same content truncates the same way each time
        truncated = await block.atruncate(content, full // 2)
        assert truncated and "alice" in text(truncated) and "bob" not in text(truncated)
        assert block.last_context.tokens <= full - full // 2  # type: ignore[union-attr]
    # a truncated selection truncates further, still for alice
    again = await block.atruncate(truncated, 1)
    assert again is None or ("alice" in text(again) and "bob" not in text(again))


@pytest.mark.parametrize("output", ["messages", "text"])
async def test_new_users_whose_first_message_overflows_never_see_another_users_turns(monkeypatch, output):
    """One block shared by every user (priority 1) beside a ``StaticMemoryBlock`` (priority 2):
    a new user's first message overflows ``token_limit``, so ``Memory`` truncates the blocks and
    hands the shared block a fresh ``[]``, right after established users' selections were freed."""
    block = KadaneDialBlock(embed_model=HashingEmbedder(), priority=1, output=output)
    static = StaticMemoryBlock(name="core_info", static_content=STATIC, priority=2)
    truncated_plain = 0
    original = KadaneDialBlock.atruncate

    async def counting(self: KadaneDialBlock, content: Any, tokens: int) -> Any:
        nonlocal truncated_plain
        truncated_plain += type(content) is list and not content
        return await original(self, content, tokens)

    monkeypatch.setattr(KadaneDialBlock, "atruncate", counting)
    established = [memory(f"old{i}", [block, static]) for i in range(4)]
    for i, m in enumerate(established):
        await m.aput_messages(secret_turns(f"OLD{i}X", 60))
        assert block.stored_messages(f"old{i}")  # their early turns are in the shared block
    leaks = []
    for k in range(60):
        i = k % 4
        assert f"OLD{i}X" in text(await established[i].aget(input=f"OLD{i}X secret code {k % 60}"))
        llm = RecordingLLM()
        new = memory(f"new{k}", [block, static])
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=new)
        await engine.achat(f"new{k} asks: " + "what do you know about me? " * 450)
        (sent,) = llm.received
        assert sent[-1].content.startswith(f"new{k} asks")  # alone over token_limit: blocks dropped
        leaks += [k] if "OLD" in text(sent) else []
    assert truncated_plain >= 60  # Memory truncated with the shared block given a fresh []
    assert leaks == []


# -- item 12: a failing block logs and contributes nothing --------------------------------------


class DownEmbedding(MockEmbedding):
    """A LlamaIndex embedding whose service is unreachable."""

    def _get_text_embedding(self, text: str) -> list[float]:
        raise ConnectionError("embedding service unreachable")

    def _get_query_embedding(self, query: str) -> list[float]:
        raise ConnectionError("embedding service unreachable")

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedding service unreachable")


def failing_and_healthy(session: str) -> Memory:
    blocks = [
        StaticMemoryBlock(name="core_info", static_content=STATIC, priority=0),
        TopicThreadBlock(embed_model=DownEmbedding(embed_dim=8), priority=1),
        KadaneDialBlock(embed_model=HashingEmbedder(), priority=1),
    ]
    return memory(session, blocks, chat_history_token_ratio=0.05)


def failure_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.levelno == logging.WARNING and r.name == "llamaindex_ctxmgmt._block"
    ]


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_a_block_whose_embedder_raises_logs_and_the_healthy_blocks_reach_the_llm(caplog, call):
    mem = failing_and_healthy("carol")
    await mem.aput_messages(secret_turns("carol", 40))
    assert "carol-0002" not in text(await mem.aget_all(status=MessageStatus.ACTIVE))  # flushed
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=mem)
    question = "What is carol secret code 2?"
    with caplog.at_level(logging.WARNING):
        if call == "sync":  # Memory.get through asyncio_run: no "Detected nested async"
            engine.chat(question)
        else:
            await engine.achat(question)
    (sent,) = llm.received
    assert sent[-1].role == MessageRole.USER and sent[-1].content == question
    assert STATIC in text(sent)  # the static block
    assert "carol-0002" in text(sent)  # KadaneDial's selection of a flushed turn
    (record,) = failure_records(caplog)
    message = record.getMessage()
    assert "TopicThreadBlock" in message and "'topic_threads'" in message and "'carol'" in message
    assert "embedding service unreachable" in message


def test_sync_memory_get_with_a_failing_block_returns_the_rest(caplog):
    mem = failing_and_healthy("dave")
    mem.put_messages(secret_turns("dave", 40))
    with caplog.at_level(logging.WARNING):
        result = mem.get(input="What is dave secret code 5?")
    assert STATIC in text(result) and "dave-0005" in text(result)
    assert len(failure_records(caplog)) == 1


async def test_a_corrupt_stored_log_fails_only_that_block(tmp_path, caplog):
    """A block whose stored log does not load neither aborts ``Memory``'s flush nor its ``get``."""
    store = f"sqlite:///{tmp_path / 'blocks.db'}"
    corrupt = KadaneDialBlock(embed_model=HashingEmbedder(), store=store, name="corrupt")
    corrupt_store = corrupt._conversations().store
    assert corrupt_store is not None
    MessageLog(corrupt_store, "flushed:corrupt:erin").append([{"role": 42, "blocks": "not blocks"}])
    restarted = KadaneDialBlock(embed_model=HashingEmbedder(), store=store, name="corrupt")
    healthy = KadaneDialBlock(embed_model=HashingEmbedder())
    mem = memory(
        "erin",
        [StaticMemoryBlock(name="core_info", static_content=STATIC), restarted, healthy],
        chat_history_token_ratio=0.05,
    )
    with caplog.at_level(logging.WARNING):
        await mem.aput_messages(secret_turns("erin", 40))  # flushes into both blocks
        result = await mem.aget(input="What is erin secret code 4?")
    assert healthy.stored_messages("erin") and "erin-0004" in text(result) and STATIC in text(result)
    messages = [r.getMessage() for r in failure_records(caplog)]
    assert any("flushed messages" in m and "'corrupt'" in m and "'erin'" in m for m in messages)
    assert any("to select" in m and "'corrupt'" in m for m in messages)
