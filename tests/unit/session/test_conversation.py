"""Conversation and ConversationPool: one object per conversation, every operation written once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import ctxmgmt.session.backlog as backlog_module
import ctxmgmt.session.conversation as conversation_module
from ctxmgmt import BudgetExceededError, InvalidMessageError, KadaneDialStrategy, SWinStrategy
from ctxmgmt.messages.types import Message, chain_hashes
from ctxmgmt.session.conversation import Codec, Conversation, ConversationPool
from ctxmgmt.store.memory import InMemoryStore


@dataclass(eq=False)
class Note:
    """A framework-style message: mutable, compared by identity."""

    role: str
    text: str


def to_core(note: Note) -> Message:
    if not note.text:
        raise InvalidMessageError("empty")
    return Message(note.role, note.text)


CODEC: Codec[Note] = Codec(
    to_core=to_core, snapshot=lambda n: (n.role, n.text), memory_message=lambda m: Note(m.role, m.text)
)


def chat(n: int, topic: str = "cats") -> list[Note]:
    out = [Note("system", "be brief")]
    for i in range(n):
        out += [Note("user", f"question {i} about {topic}"), Note("assistant", f"answer {i} about {topic}")]
    return out


def kadane(hashing_embedder: Any) -> Conversation[Note]:
    return Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC)


def test_select_returns_the_callers_objects_system_first_and_the_turn_in_progress_last(hashing_embedder):
    conversation = kadane(hashing_embedder)
    history = [*chat(6), Note("user", "what about cats?")]
    selection = conversation.select(history)
    assert selection.messages[0] is history[0]
    assert selection.messages[-1] is history[-1]
    assert all(any(m is h for h in history) for m in selection.messages)
    assert selection.context is conversation.last_context
    assert [b.kind for b in selection.context.blocks][0] == "system"
    assert selection.context.blocks[-1].kind == "current"
    assert len(conversation.strategy) == 6  # the completed turns only


def test_index_derives_completed_turns_and_a_later_select_sees_an_edit_in_place(hashing_embedder):
    conversation = kadane(hashing_embedder)
    history = chat(3)
    conversation.index(history)
    assert len(conversation.strategy) == 3  # each turn ends with its answer: complete
    history[1].text = "my locker code is [redacted]"
    history.append(Note("user", "what is my locker code?"))
    conversation.select(history)
    assert all("question 0" not in t.text for t in conversation.strategy.turns)


def test_a_long_history_is_derived_in_batches_with_progress(hashing_embedder, monkeypatch):
    monkeypatch.setattr(conversation_module, "CATCH_UP_BATCH", 16)
    monkeypatch.setattr(conversation_module, "INDEX_SECONDS", None)  # no time limit: steps of 16
    seen: list[tuple[int, int]] = []
    batched = kadane(hashing_embedder)
    batched.index(chat(40), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(16, 40), (32, 40), (40, 40)]
    whole = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC)
    whole.state.sync(list(batched.history.turns[:40]))
    assert batched.state.chains == whole.state.chains == chain_hashes(batched.history.turns[:40])
    assert batched.strategy.to_state() == whole.strategy.to_state()


def test_flushed_messages_have_no_turn_in_progress_and_no_system_block(hashing_embedder):
    conversation = kadane(hashing_embedder)
    history = chat(4)
    selection = conversation.select(history, query="question 3 about cats", flushed=True)
    assert len(conversation.strategy) == 4
    assert {b.kind for b in selection.context.blocks} <= {"turns"}
    assert history[0] not in selection.messages


def test_budget_errors_and_bad_messages_surface_as_ctxmgmt_errors(hashing_embedder):
    conversation = kadane(hashing_embedder)
    with pytest.raises(BudgetExceededError):
        conversation.select([*chat(2), Note("user", "word " * 200)], budget=20)
    with pytest.raises(InvalidMessageError):
        conversation.select([*chat(2), Note("user", "")])


def test_turn_in_progress_and_clear(hashing_embedder):
    conversation = kadane(hashing_embedder)
    history = [*chat(2), Note("user", "and now?")]
    assert conversation.turn_in_progress(history) == [history[-1]]
    assert conversation.turn_in_progress(chat(2)) == []
    conversation.select(history)
    conversation.clear()
    assert len(conversation.strategy) == 0 and conversation.last_context is None


def test_carry_over_keeps_the_swin_memory_and_drops_the_turns():
    conversation = Conversation("s", SWinStrategy(window=2, overlap=0), CODEC)
    conversation.carry_over(chat(5))
    assert len(conversation.strategy) == 0
    assert conversation.strategy.to_state()["items"]  # what the closed conversation taught it


def test_pool_keys_name_the_strategy_surface_and_conversation_and_evict_the_oldest(hashing_embedder):
    store = InMemoryStore()
    pool: ConversationPool[Note] = ConversationPool(
        lambda: KadaneDialStrategy(embedder=hashing_embedder),
        CODEC,
        surface="classic",
        store=store,
        max_conversations=2,
    )
    a = pool.get("a")
    assert a.key == "kadanedial:classic:a" and pool.get(None).key == "kadanedial:classic:default"
    assert pool.get("a") is a and pool.most_recent() is a
    pool.get("b")
    assert "default" not in pool and len(pool) == 2
    a.index(chat(3))
    assert store.load("kadanedial:classic:a") is not None


def test_a_pool_without_a_store_takes_the_one_given_per_call(hashing_embedder):
    pool: ConversationPool[Note] = ConversationPool(
        lambda: KadaneDialStrategy(embedder=hashing_embedder), CODEC, surface="middleware"
    )
    agent_store = InMemoryStore()
    plain = pool.get("t")
    assert plain.store is None
    stored = pool.get("t", store=agent_store)
    assert stored is not plain and stored.store is agent_store
    assert pool.get("t", store=agent_store) is stored


class Clock:
    """A monotonic clock that moves ``tick`` seconds every time it is read."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_call_derives_what_fits_in_its_time_and_chooses_among_the_waiting_turns_at_once(
    hashing_embedder, monkeypatch
):
    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(0.2))
    capped = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, index_seconds=0.5)
    history = [*chat(60, "dogs"), Note("user", "question 37 about dogs")]
    history[75:77] = [Note("user", "my bike lock code is 4417"), Note("assistant", "noted: 4417")]  # turn 37
    selection = capped.select([*history[:-1], Note("user", "what is my bike lock code?")])
    assert 0 < len(capped.strategy) < 37 and capped.backlog == 60 - len(capped.strategy)
    chosen = {t for b in selection.context.blocks if b.kind == "turns" for t in b.turns}
    assert 37 in chosen  # a waiting turn the question needs, chosen by KadaneDial's fast twin
    details = selection.context.details
    assert details["partial"] and details["backlog"] == capped.backlog
    assert details["answered_by"] == "fast KadaneDial"  # one selection over every turn
    history[-1] = Note("user", "question 59 about dogs")
    selection = capped.select(history)
    assert selection.messages[-3:] == history[-3:]  # the turn it asks about (the newest), then it
    full = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, index_seconds=None)
    assert selection.context.history_tokens == full.select(history).context.history_tokens
    for _ in range(60):  # each later call goes on deriving; the backlog only shrinks
        before = capped.backlog
        capped.select(history)
        assert capped.backlog < before or capped.backlog == 0
        if not capped.backlog:
            break
    assert capped.backlog == 0 and capped.strategy.to_state() == full.strategy.to_state()
    assert capped.select(history).context.blocks == full.select(history).context.blocks


def test_the_backlog_of_a_discourse_tree_is_chosen_by_its_fast_twin(hashing_embedder, monkeypatch):
    from ctxmgmt import DiscourseTreeStrategy

    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(0.2))
    strategy = DiscourseTreeStrategy(embedder=hashing_embedder, recall_topics=2)
    capped = Conversation("d", strategy, CODEC, index_seconds=0.5)
    history = [*chat(30, "dogs"), Note("user", "my bike lock code is 4417")]
    history += [Note("assistant", "noted: 4417"), *chat(20, "tea")[1:]]
    history.append(Note("user", "what is my bike lock code?"))
    selection = capped.select(history)
    index = capped._backlog_index
    assert index is not None and index.twin and isinstance(index.strategy, DiscourseTreeStrategy)
    assert index.strategy.config == strategy.config and len(index.strategy) == 51
    # the twin holds every turn: it answers alone, over the whole history (swapped when all is derived)
    details = selection.context.details
    assert details["answered_by"] == "fast DiscourseTree"
    assert 30 in {t for b in selection.context.blocks if b.kind == "turns" for t in b.turns}
    assert details["partial"] and details["backlog"] == capped.backlog > 0
    while capped.backlog:  # later calls derive the rest; then the strategy's own answer
        selection = capped.select(history)
    assert "answered_by" not in selection.context.details and not selection.context.details.get("partial")


def test_the_twins_time_limit_is_read_at_each_call(hashing_embedder, monkeypatch):
    from ctxmgmt import DiscourseTreeStrategy

    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(0.2))
    monkeypatch.setattr(backlog_module, "TWIN_STEP", 8)
    capped = Conversation("d", DiscourseTreeStrategy(embedder=hashing_embedder), CODEC, index_seconds=0.5)
    monkeypatch.setattr(backlog_module, "INDEX_SECONDS", 0.0)  # set after the conversation was made
    capped.select([*chat(50, "dogs"), Note("user", "what about dogs?")])
    index = capped._backlog_index
    assert index is not None and index.twin and len(index.strategy) == 8  # one step, then out of time


def test_waiting_turns_take_at_most_their_share_of_the_budget_left(hashing_embedder, monkeypatch):
    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(1.0))
    capped = Conversation("k", SWinStrategy(), CODEC, index_seconds=0.5)  # no twin: the fast index
    history = [*chat(40), Note("user", "question 3 about cats")]
    context = capped.select(history, budget=60).context
    waiting = [b for b in context.blocks if "not derived yet" in b.reason]
    left = 60 - context.blocks[-1].tokens - context.blocks[0].tokens
    assert waiting and sum(b.tokens for b in waiting) <= left * context.details["backlog"] // 40
    assert context.tokens <= 60
    twinned = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, index_seconds=0.5)
    context = twinned.select(history, budget=60).context  # a twin answers alone, within the budget
    assert context.details["answered_by"] == "fast KadaneDial" and context.tokens <= 60


def test_a_time_limited_call_on_a_store_resumes_from_the_stored_prefix(hashing_embedder, monkeypatch):
    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(0.4))
    store = InMemoryStore()
    first = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, store, index_seconds=0.5)
    history = chat(50)
    first.index(history)
    derived = len(first.strategy)
    assert 0 < derived < 50 and store.load("k").chains == chain_hashes(first.history.turns[:derived])
    restarted = Conversation(
        "k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, store, index_seconds=None
    )
    restarted.index(history)  # a new process: restores the stored prefix, derives the rest
    assert restarted.backlog == 0 and restarted.state.chains == chain_hashes(restarted.history.turns)


def test_carrying_over_derives_every_turn_whatever_the_time_limit(monkeypatch):
    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive here
    monkeypatch.setattr(conversation_module, "_monotonic", Clock(10.0))
    capped = Conversation("s", SWinStrategy(window=2, overlap=0), CODEC, index_seconds=0.1)
    capped.carry_over(chat(40))
    whole = Conversation("s", SWinStrategy(window=2, overlap=0), CODEC, index_seconds=None)
    whole.carry_over(chat(40))
    assert capped.strategy.to_state() == whole.strategy.to_state()


def test_a_backlog_is_derived_in_the_background_between_calls(hashing_embedder, tmp_path):
    from ctxmgmt.store import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db")
    conversation = Conversation(
        "k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, store, index_seconds=0.0
    )
    assert conversation.in_background
    history = [*chat(120), Note("user", "question 7 about cats")]
    conversation.select(history)  # over LEAVE_TO_WORKER new turns: the call derives none
    assert conversation.backlog > 0
    assert conversation.wait_derived(timeout=60)  # the worker derives the rest, with no call
    full = Conversation("k2", KadaneDialStrategy(embedder=hashing_embedder), CODEC, index_seconds=None)
    expected = full.select(history).context.blocks
    assert conversation.strategy.to_state() == full.strategy.to_state()
    assert store.load("k").chains == chain_hashes(conversation.history.turns[:120])  # written as it went
    assert conversation.select(history).context.blocks == expected


@pytest.mark.parametrize(("turns", "in_call"), [(10, True), (64, True), (65, False), (300, False)])
def test_a_long_history_for_a_strategy_with_a_twin_is_left_to_the_worker(
    hashing_embedder, monkeypatch, turns, in_call
):
    """Defaults: a call that brings over LEAVE_TO_WORKER (64) new turns derives none; the twin answers."""
    monkeypatch.setattr(conversation_module, "INDEX_SECONDS", 0.25)  # the shipped default, not the suite's
    queued: list[Conversation[Note]] = []
    monkeypatch.setattr(conversation_module._WORKER, "submit", queued.append)  # stepped by hand below
    monkeypatch.setattr(conversation_module._WORKER, "holds", lambda c: any(c is q for q in queued))
    conversation = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC)
    history = [*chat(turns), Note("user", "question 7 about cats")]
    context = conversation.select(history).context
    if in_call:  # a few turns: derived in the call, the strategy answers
        assert len(conversation.strategy) > 0 and "answered_by" not in context.details
    else:
        assert len(conversation.strategy) == 0 and conversation.backlog == turns
        assert context.details["answered_by"] == "fast KadaneDial" and context.details["partial"]
        assert queued == [conversation]
        while conversation.derive_backlog_step():
            pass
        assert conversation.backlog == 0 and len(conversation.strategy) == turns
    swin = Conversation("s", SWinStrategy(), CODEC)  # no twin: derives in the call as before
    swin.select(history)
    assert len(swin.strategy) == turns


def test_while_the_worker_has_a_backlog_in_hand_a_call_only_answers(hashing_embedder, monkeypatch):
    queued: list[Conversation[Note]] = []
    monkeypatch.setattr(conversation_module._WORKER, "submit", queued.append)  # stepped by hand below
    monkeypatch.setattr(conversation_module._WORKER, "holds", lambda c: any(c is q for q in queued))
    conversation = Conversation("k", KadaneDialStrategy(embedder=hashing_embedder), CODEC, index_seconds=0.0)
    history = [*chat(60), Note("user", "question 7 about cats")]
    conversation.select(history)
    derived, backlog = len(conversation.strategy), conversation.backlog
    assert queued == [conversation] and backlog == 60 - derived > 0
    history[-1:] = [Note("user", "question 7 about cats"), Note("assistant", "yes"), Note("user", "and 8?")]
    context = conversation.select(history).context
    assert len(conversation.strategy) == derived and conversation.backlog == backlog + 1  # nothing derived
    assert context.blocks[-1].messages[0].text == "and 8?"
    while conversation.derive_backlog_step():
        pass
    assert conversation.backlog == 0 and len(conversation.strategy) == 61


def test_a_time_limited_call_leaves_acms_entities_to_the_worker_and_says_its_answer_is_partial():
    from ctxmgmt import ACMStrategy
    from ctxmgmt.components.entities import Entity

    class Capitalised:  # entities of one text never depend on the others (as spaCy's)
        per_text = True

        def extract(self, texts: list[str]) -> list[list[Entity]]:
            return [[Entity(w, "GPE") for w in text.split() if w.istitle()] for text in texts]

    def acm() -> ACMStrategy:
        return ACMStrategy(
            token_budget=150, token_counter=lambda t: len(t.split()), entity_extractor=Capitalised()
        )

    history = [*chat(80, "Paris and Lyon"), Note("user", "what about Paris?")]
    conversation = Conversation("k", acm(), CODEC, index_seconds=3.0)
    context = conversation.select(history).context
    assert conversation.backlog == 0 and len(conversation.strategy) == 80  # every turn derived...
    assert context.details["partial"] and context.details["entities_pending"] > 0  # ...but entities
    assert conversation.wait_derived(timeout=60)  # the worker extracts them, with no call
    full = Conversation("k2", acm(), CODEC, index_seconds=None)
    expected = full.select(history).context
    assert not expected.details.get("partial") and "entities_pending" not in expected.details
    assert conversation.strategy.to_state() == full.strategy.to_state()
    again = conversation.select(history).context
    assert again.blocks == expected.blocks and not again.details.get("partial")
