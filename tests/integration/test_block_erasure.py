"""Per-message erasure for ``Memory`` blocks: a secret flushed into blocks never reaches the model again."""

from __future__ import annotations

import sqlite3

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from ctxmgmt import ConfigurationError
from ctxmgmt.app.testing import HashingEmbedder
from llamaindex_ctxmgmt import (
    ACMTieredBlock,
    DiscourseTreeBlock,
    KadaneDialBlock,
    SWinSummaryBlock,
    TopicThreadBlock,
    erase_from_blocks,
    flush_early,
)
from tests.adapters.test_acm_contract import CapitalisedExtractor

SECRET = "4417-2290"
TURNS = [
    (f"My bank PIN is {SECRET}, please remember it.", "I will keep it in mind."),
    ("My cat is called Miso.", "Miso is a lovely name."),
    ("I bake sourdough on Sundays.", "Sourdough takes patience."),
    ("My car engine rattles.", "Check the heat shield."),
    ("I plan a trip to Lisbon.", "Lisbon is lovely in spring."),
]


def blocks(store: str) -> list:
    emb = HashingEmbedder()
    return [
        KadaneDialBlock(embed_model=emb, store=store),
        SWinSummaryBlock(window=2, overlap=0, store=store),
        ACMTieredBlock(entity_extractor=CapitalisedExtractor(), store=store),
        DiscourseTreeBlock(embed_model=emb, store=store),
        TopicThreadBlock(embed_model=emb, store=store),
    ]


async def chat(memory: Memory) -> None:
    for user, answer in TURNS:
        await memory.aput_messages(
            [ChatMessage(role="user", content=user), ChatMessage(role="assistant", content=answer)]
        )


@pytest.mark.parametrize("redact_with", [None, "[redacted]"], ids=["delete", "redact"])
async def test_erasure_reaches_every_block_its_store_and_a_restart(tmp_path, redact_with):
    store = f"sqlite:///{tmp_path / 'blocks.db'}"
    memory = Memory.from_defaults(
        session_id="u1",
        memory_blocks=blocks(store),
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(40),
    )
    await chat(memory)
    await memory.aput(ChatMessage(role="user", content="What is my bank PIN?"))
    assert SECRET in " ".join(str(m.content) for m in await memory.aget())  # it was flushed and selected

    erased = await erase_from_blocks(memory, SECRET, redact_with=redact_with)
    assert erased == 5  # one message in each of the five blocks
    await memory.areset()
    await memory.aput(ChatMessage(role="user", content="What is my bank PIN?"))
    assert SECRET not in " ".join(str(m.content) for m in await memory.aget())
    for block in memory.memory_blocks:
        assert SECRET not in str(block.stored_messages("u1"))
        assert SECRET not in str(block.conversation("u1").strategy.to_state())
    with sqlite3.connect(tmp_path / "blocks.db") as db:
        rows = db.execute("SELECT data FROM ctxmgmt_records").fetchall()
    assert rows and not any(SECRET.encode() in bytes(r[0]) for r in rows)

    restarted = blocks(store)  # a new process on the same store
    for block in restarted:
        assert SECRET not in str(block.stored_messages("u1"))
    if redact_with:
        assert any("[redacted]" in str(m.content) for m in restarted[0].stored_messages("u1"))


def test_erase_needs_something_to_match():
    with pytest.raises(ConfigurationError):
        KadaneDialBlock(embed_model=HashingEmbedder()).erase("")
    assert KadaneDialBlock(embed_model=HashingEmbedder()).erase("nothing here") == 0


async def test_a_block_on_a_store_that_is_down_keeps_working_in_process(caplog):
    """Memory's flush and get never fail while the block's store is down (the log is skipped)."""
    from ctxmgmt.store import InMemoryStore, StoreError

    class Down(InMemoryStore):
        def load(self, key, *, turns=None):
            raise StoreError("database is down")

        def append(self, key, entries, **kwargs):
            raise StoreError("database is down")

    block = KadaneDialBlock(embed_model=HashingEmbedder(), store=Down())
    memory = Memory.from_defaults(
        session_id="u1",
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **flush_early(40),
    )
    await chat(memory)
    await memory.aput(ChatMessage(role="user", content="What is my bank PIN?"))
    sent = await memory.aget()
    assert block.stored_messages("u1") and SECRET in " ".join(str(m.content) for m in sent)
    assert "database is down" in caplog.text
