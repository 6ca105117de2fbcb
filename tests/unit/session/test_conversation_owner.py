"""One owner for a conversation's state: the call, the background worker, or nobody (issue 33).

Eviction, clearing, carry-over and fork against the background worker, with a fake clock and a
slowed embedder so nothing depends on machine speed.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

import ctxmgmt.session.conversation as conversation_module
from ctxmgmt import KadaneDialStrategy, SWinStrategy
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.messages.types import Message
from ctxmgmt.session.conversation import Conversation, ConversationPool
from ctxmgmt.store import SQLiteStore
from tests.helpers import GatedEmbedder, passes_in_forked_child
from tests.unit.session.test_conversation import CODEC, Note, chat


def stored_chains(store: SQLiteStore, key: str) -> list[str]:
    stored = store.load(key)
    return [] if stored is None else list(stored.chains)


def with_backlog(embedder: Any, store: SQLiteStore | None = None, key: str = "k") -> Conversation[Note]:
    conversation = Conversation(key, KadaneDialStrategy(embedder=embedder), CODEC, store, index_seconds=0.0)
    conversation.select([*chat(80), Note("user", "question 3 about cats")])
    assert conversation.backlog > 0
    return conversation


def test_an_evicted_conversation_is_never_stepped_or_written_again(tmp_path):
    embedder = GatedEmbedder()
    store = SQLiteStore(tmp_path / "s.db")
    pool: ConversationPool[Note] = ConversationPool(
        lambda: KadaneDialStrategy(embedder=embedder), CODEC, surface="t", store=store, max_conversations=1
    )
    victim = pool.get("victim")
    victim.index_seconds = 0.0
    victim.select([*chat(80), Note("user", "question 3 about cats")])
    assert embedder.waiting.wait(10)  # the worker is inside a step of the victim, outside its lock
    written = stored_chains(store, victim.key)
    pool.get("other")  # evicts the victim
    assert victim.closed
    embedder.gate.set()
    time.sleep(0.3)
    assert stored_chains(store, victim.key) == written  # the step under way committed nothing
    assert not conversation_module._WORKER.holds(victim)
    assert not victim.derive_backlog_step()


def test_clear_while_the_worker_prepares_leaves_nothing_stored(tmp_path):
    embedder = GatedEmbedder()
    store = SQLiteStore(tmp_path / "s.db")
    conversation = with_backlog(embedder, store)
    assert embedder.waiting.wait(10)
    conversation.clear()
    assert store.load("k") is None
    embedder.gate.set()
    time.sleep(0.3)
    assert store.load("k") is None and len(conversation.strategy) == 0  # nothing came back
    assert not conversation_module._WORKER.holds(conversation)


def test_carry_over_during_a_backlog_keeps_the_carried_memory():
    conversation = Conversation("s", SWinStrategy(window=2, overlap=0), CODEC, index_seconds=0.0)
    history = chat(60)
    conversation.index(history)
    assert conversation.backlog > 0
    conversation.carry_over(history)
    memory = conversation.strategy.to_state()
    assert not conversation.derive_backlog_step()  # the worker has nothing left to re-add
    assert conversation.strategy.to_state() == memory and len(conversation.strategy) == 0
    assert conversation.backlog == 0


def test_the_background_never_makes_a_call_wait_for_a_batch():
    embedder = GatedEmbedder()
    conversation = with_backlog(embedder)
    assert embedder.waiting.wait(10)  # the worker is embedding its next batch
    start = time.monotonic()
    selection = conversation.select([*chat(80), Note("user", "question 7 about cats")])
    waited = time.monotonic() - start
    embedder.gate.set()
    assert selection.context.details["partial"] and waited < 5  # answered while the worker was stuck


def test_a_stopping_worker_ends_its_step_between_two_turns_and_commits_nothing(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    embedder = HashingEmbedder()
    conversation = Conversation("k", KadaneDialStrategy(embedder=embedder), CODEC, store, index_seconds=0.0)
    conversation.in_background = False
    conversation.select([*chat(80), Note("user", "question 3 about cats")])
    derived, stored = len(conversation.strategy), stored_chains(store, "k")
    asked: list[int] = []

    def stopping() -> bool:  # the process starts to exit after the first turn's pass
        asked.append(1)
        return len(asked) > 1

    assert conversation.derive_backlog_step(stopping)  # the backlog is left for later
    assert len(asked) == 2 and len(conversation.strategy) == derived
    assert stored_chains(store, "k") == stored
    assert conversation.derive_backlog_step() and len(conversation.strategy) > derived  # it goes on


class LockWatchingEmbedder(HashingEmbedder):
    """Counts the texts it embeds while the watched conversation's lock is held by its thread."""

    def __init__(self) -> None:
        super().__init__()
        self.watched: Conversation[Note] | None = None
        self.under_lock = 0

    def embed(self, texts: Any) -> Any:
        if self.watched is not None and self.watched.lock._is_owned():  # type: ignore[attr-defined]
            self.under_lock += len(texts)
        return super().embed(texts)


def test_a_worker_step_that_loses_the_store_to_another_process_reloads_and_embeds_nothing_under_the_lock(
    tmp_path,
):
    """A forked parent and child deriving one stored conversation: the loser of a compare-and-set
    reloads what the winner stored and leaves the next turns to its next step (their forward
    passes run outside the lock, where an exiting process stops between two turns)."""
    store = SQLiteStore(tmp_path / "s.db")
    history = [*chat(80), Note("user", "question 3 about cats")]
    embedder = LockWatchingEmbedder()
    loser = Conversation("k", KadaneDialStrategy(embedder=embedder), CODEC, store, index_seconds=0.0)
    winner = Conversation(
        "k", KadaneDialStrategy(embedder=LockWatchingEmbedder()), CODEC, store, index_seconds=0.0
    )
    for conversation in (loser, winner):
        conversation.in_background = False
    loser.select(history)
    winner.select(history)  # loads the loser's turns and stores more: a newer version
    assert winner.derive_backlog_step()
    stored = stored_chains(store, "k")
    assert len(stored) > len(loser.state.chains)
    embedder.watched = loser
    assert loser.derive_backlog_step()  # prepares its batch, loses the compare-and-set, reloads
    assert embedder.under_lock == 0
    assert loser.state.chains == stored == stored_chains(store, "k")  # the winner's turns, nothing lost
    assert loser.derive_backlog_step()  # the next step goes on from the stored turns
    assert embedder.under_lock == 0
    assert len(stored_chains(store, "k")) > len(stored) and loser.state.chains == stored_chains(store, "k")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_derives_its_backlog_and_never_deadlocks():
    embedder = GatedEmbedder()
    conversation = with_backlog(embedder)
    assert embedder.waiting.wait(10)  # fork while the worker is inside a step

    def child() -> bool:  # answer, then finish the backlog with its own worker
        embedder.gate.set()
        conversation.select([*chat(80), Note("user", "question 7 about cats")])
        return conversation.wait_derived(timeout=60) and len(conversation.strategy) == 80

    assert passes_in_forked_child(child, meanwhile=embedder.gate.set)
    assert conversation.wait_derived(timeout=60)


def test_the_same_question_finds_its_turn_asked_at_once_and_after_catch_up():
    """Same selection whatever the speed: the turn a question needs is sent either way."""
    history = [*chat(120, "dogs"), Note("user", "what is my bike lock code?")]
    history[41:43] = [Note("user", "my bike lock code is 4417"), Note("assistant", "noted, 4417")]  # turn 20
    at_once = Conversation("a", KadaneDialStrategy(embedder=HashingEmbedder()), CODEC, index_seconds=0.0)
    at_once.in_background = False
    first = at_once.select(history).context
    assert first.details["partial"]
    caught_up = Conversation("b", KadaneDialStrategy(embedder=HashingEmbedder()), CODEC, index_seconds=None)
    later = caught_up.select(history).context
    assert "partial" not in later.details
    for context in (first, later):
        assert 20 in {t for b in context.blocks if b.kind == "turns" for t in b.turns}
        assert any("4417" in m.text for b in context.blocks for m in b.messages)
    assert Message("user", "my bike lock code is 4417") in [m for b in first.blocks for m in b.messages]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_the_worker_thread_lowers_its_own_priority_only() -> None:
    import threading

    seen: list[int] = []

    def run() -> None:
        conversation_module._lower_priority(conversation_module.WORKER_NICE)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [min(19, main + conversation_module.WORKER_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main
