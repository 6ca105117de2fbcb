"""ConversationMemory: a lossless history plus a strategy, without a framework."""

from __future__ import annotations

import json
import threading

import pytest

from ctxmgmt import BudgetExceededError, ConfigurationError, ConversationMemory, KadaneDialStrategy, Message
from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.messages.exceptions import CtxMgmtError
from tests.helpers import TOPICS
from tests.unit.session.test_selection import SYSTEM, assert_topic_selected, conversation, pairs


def test_memory_add_and_select(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    memory.add_messages([SYSTEM, *pairs()])
    assert len(memory.history) == 1 + 2 * len(TOPICS)
    assert len(memory.strategy) == len(TOPICS) - 1  # the last turn is not closed yet
    memory.add_messages([Message("user", "car engine rattling exhaust mechanic")])
    assert len(memory.strategy) == len(TOPICS)  # closed by this user message, itself in progress
    context = memory.select()
    assert context.query == "car engine rattling exhaust mechanic"
    assert_topic_selected(context, 3, 5)
    assert context.blocks[0].kind == "system"
    assert context.blocks[-1].kind == "current"
    explicit = memory.select("python file dictionary list")
    assert_topic_selected(explicit, 9, 11)


def test_memory_budget(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder), budget=120)
    memory.add_messages(conversation())
    assert memory.select().tokens <= 120
    assert memory.select(budget=60).tokens <= 60
    with pytest.raises(BudgetExceededError):
        memory.select(budget=5)
    with pytest.raises(ConfigurationError):
        memory.select(budget=0)


@pytest.mark.parametrize("budget", [0, -5, 2.5, True])
def test_memory_invalid_budget(hashing_embedder, budget) -> None:
    with pytest.raises(ConfigurationError):
        ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder), budget=budget)


def test_memory_history_is_lossless(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder), budget=80)
    messages = conversation()
    memory.add_messages(messages)
    memory.select()
    assert memory.history.messages == tuple(messages)


def test_memory_clear(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    memory.add_messages(conversation())
    memory.clear()
    assert len(memory.history) == 0
    assert len(memory.strategy) == 0
    assert memory.select().blocks == []
    memory.add_messages(pairs()[:2])
    assert len(memory.strategy) == 0  # a turn is closed by the next user message
    memory.select()
    assert len(memory.strategy) == 1  # ... or brought in by a selection


def test_memory_state_round_trip(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder), budget=150)
    memory.add_messages(conversation())
    state = json.loads(json.dumps(memory.to_state()))
    assert state["budget"] == 150

    restored = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    restored.add_messages(pairs()[:2])  # stale content is replaced
    restored.load_state(state)
    assert restored.budget == 150
    assert restored.history.messages == memory.history.messages
    assert len(restored.strategy) == len(memory.strategy)
    a, b = memory.select(), restored.select()
    assert a.turn_indices == b.turn_indices
    assert a.messages() == b.messages()
    assert a.tokens == b.tokens


def test_memory_load_state_without_budget(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder), budget=99)
    memory.load_state({"history": [m.to_dict() for m in pairs()[:2]]})
    assert memory.budget is None
    assert len(memory.history) == 2


def test_memory_message_tokens(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    assert memory.message_tokens(Message("user", "hello world")) == 2 + MESSAGE_OVERHEAD


def test_system_messages_stay_in_the_history_but_never_reach_the_strategy(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    memory.add_messages([SYSTEM, *pairs()[:2], Message("system", "a second system message"), *pairs()[2:4]])
    assert len(memory.history) == 6
    assert len(memory.strategy) == 1  # the second turn is still open
    assert all(m.role != "system" for t in memory.strategy.turns for m in t.messages)


def test_messages_added_one_at_a_time_close_the_same_turns_as_at_once(hashing_embedder) -> None:
    at_once = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    at_once.add_messages(conversation())
    one_by_one = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    for message in conversation():
        one_by_one.add_messages(iter([message]))  # any iterable
    assert [t.messages for t in one_by_one.strategy.turns] == [t.messages for t in at_once.strategy.turns]
    assert one_by_one.select().turn_indices == at_once.select().turn_indices


def test_an_empty_memory_selects_nothing(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    memory.add_messages([])
    context = memory.select()
    assert context.blocks == [] and context.tokens == 0


def test_load_state_refuses_an_invalid_budget_as_a_ctxmgmt_error(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))
    with pytest.raises(ConfigurationError) as info:
        memory.load_state({"history": [], "budget": -1})
    assert isinstance(info.value, CtxMgmtError)


def test_concurrent_adds_keep_every_message(hashing_embedder) -> None:
    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder))

    def add(worker: int) -> None:
        for i in range(20):
            memory.add_messages([Message("user", f"w{worker} q{i}"), Message("assistant", f"w{worker} a{i}")])

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memory.history) == 160
    assert len(memory.strategy) == 79  # every turn but the last, still open
    memory.select()
    assert len(memory.strategy) == 80
