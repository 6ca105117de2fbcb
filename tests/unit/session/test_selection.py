"""build_context, query inference, budgeting and strategy sync."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxmgmt import (
    BudgetExceededError,
    ConfigurationError,
    KadaneDialStrategy,
    Message,
    build_context,
    group_turns,
)
from ctxmgmt.components.budget import check_budget, message_tokens, messages_tokens, turn_tokens
from ctxmgmt.components.tokens import MESSAGE_OVERHEAD
from ctxmgmt.session.selection import infer_query, split_current, sync_strategy
from tests.helpers import PROPERTY_WITH_FIXTURE, TOPICS

SYSTEM = Message("system", "You are a helpful assistant. Answer briefly.")


def pairs(topics=TOPICS) -> list[Message]:
    return [m for q, a in topics for m in (Message("user", q), Message("assistant", a))]


def assert_topic_selected(context, start: int, end: int) -> None:
    """The query's topic won the first KadaneDial pass and all its turns are shown."""
    first = context.details["spans"][0]
    assert start <= first[0] <= first[1] <= end
    assert set(range(start, end + 1)) <= set(context.turn_indices)


def conversation(current: str | None = "And what about the garden tomatoes again?") -> list[Message]:
    messages = [SYSTEM, *pairs()]
    if current is not None:
        messages.append(Message("user", current))
    return messages


@pytest.fixture
def strategy(hashing_embedder) -> KadaneDialStrategy:
    return KadaneDialStrategy(embedder=hashing_embedder)


# ---------------------------------------------------------------------------------------
# Layout: system first, current turn last, verbatim
# ---------------------------------------------------------------------------------------


def test_system_first_current_last_verbatim(strategy) -> None:
    messages = conversation()
    context = build_context(strategy, messages)
    assert context.blocks[0].kind == "system"
    assert context.blocks[0].messages == (SYSTEM,)
    assert context.blocks[-1].kind == "current"
    assert context.blocks[-1].messages == (messages[-1],)
    assert context.blocks[-1].turns == (len(TOPICS),)
    sent = context.messages()
    assert sent[0] is SYSTEM
    assert sent[-1] is messages[-1]
    assert all(b.kind == "turns" for b in context.blocks[1:-1])
    # Past turns are sent verbatim and whole.
    turns = group_turns(messages)
    for block in context.blocks[1:-1]:
        assert block.messages == tuple(m for i in block.turns for m in turns[i].messages)
    assert context.strategy == "kadanedial"


def test_current_turn_with_pending_tool_call_is_last(strategy) -> None:
    call = Message("assistant", "", tool_calls=({"id": "c1", "name": "search", "args": "tomato"},))
    result = Message("tool", "Tomatoes like sun.", tool_call_id="c1")
    question = Message("user", "Search how much sun garden tomatoes need")
    messages = [*conversation(None), question, call, result]
    context = build_context(strategy, messages)
    assert context.blocks[-1].kind == "current"
    assert context.blocks[-1].messages == (question, call, result)
    assert context.query == question.text
    assert len(strategy) == len(TOPICS)  # the turn in progress is not a past turn


def test_multiple_system_messages_come_first_in_order(strategy) -> None:
    second = Message("system", "Use metric units.")
    messages = [SYSTEM, *pairs()[:4], second, *pairs()[4:], Message("user", "pasta?")]
    context = build_context(strategy, messages)
    assert context.blocks[0].messages == (SYSTEM, second)
    assert [b.kind for b in context.blocks].count("system") == 1


def test_no_current_turn(strategy) -> None:
    context = build_context(strategy, conversation(None))
    assert all(b.kind != "current" for b in context.blocks)
    assert context.query == TOPICS[-1][0]


def test_only_the_current_turn(strategy) -> None:
    messages = [Message("user", "hello there")]
    context = build_context(strategy, messages)
    assert [b.kind for b in context.blocks] == ["current"]
    assert context.messages() == messages
    assert context.query == "hello there"


def test_empty_messages(strategy) -> None:
    context = build_context(strategy, [])
    assert context.blocks == []
    assert context.tokens == 0
    assert context.query == ""


def test_history_tokens_counts_everything(strategy) -> None:
    messages = conversation()
    context = build_context(strategy, messages)
    counter = strategy.token_counter
    assert context.history_tokens == messages_tokens(counter, messages)
    assert 0 < context.tokens <= context.history_tokens
    assert context.token_ratio == context.tokens / context.history_tokens


# ---------------------------------------------------------------------------------------
# Query inference
# ---------------------------------------------------------------------------------------


def test_explicit_query_wins(strategy) -> None:
    context = build_context(strategy, conversation(), query="python file dictionary list")
    assert context.query == "python file dictionary list"
    assert_topic_selected(context, 9, 11)


def test_blank_explicit_query_falls_back_to_newest_user_message(strategy) -> None:
    messages = conversation()
    assert build_context(strategy, messages, query="   ").query == messages[-1].text


def test_newest_user_message_is_the_query(strategy) -> None:
    messages = conversation("car engine rattling exhaust mechanic")
    context = build_context(strategy, messages)
    assert context.query == "car engine rattling exhaust mechanic"
    assert_topic_selected(context, 3, 5)


def test_newest_past_user_message_when_no_current_turn(strategy) -> None:
    messages = [*pairs(), Message("assistant", "Anything else?")]
    context = build_context(strategy, messages)
    assert context.query == TOPICS[-1][0]


def test_infer_query_unit() -> None:
    turns = group_turns([Message("assistant", "hi"), Message("user", "first"), Message("assistant", "x")])
    past, current = split_current(turns)
    assert current is None
    assert infer_query(past, current, None) == "first"
    assert infer_query(past, current, "explicit") == "explicit"
    assert infer_query(past[:1], None, None) == ""


def test_no_user_message_keeps_recent_turns(strategy) -> None:
    messages = [SYSTEM, Message("assistant", "Hello! I can help with cooking and cars.")]
    context = build_context(strategy, messages)
    assert context.query == ""
    assert [b.kind for b in context.blocks] == ["system", "turns"]
    assert context.blocks[1].messages == (messages[1],)
    assert "no query yet" in context.blocks[1].reason
    assert context.details == {}  # the strategy was not consulted


def test_no_user_message_respects_budget(strategy) -> None:
    messages = [Message("assistant", "Hello! I can help with cooking and cars.")]
    full = build_context(strategy, messages)
    assert build_context(strategy, messages, budget=full.tokens).tokens == full.tokens
    assert build_context(strategy, messages, budget=full.tokens - 1).blocks == []


# ---------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------


QUERIES = [None, "spaghetti pasta", "car engine rattling", "garden tomato plants", "python", "unrelated"]


@PROPERTY_WITH_FIXTURE
@given(
    budget=st.integers(min_value=1, max_value=700),
    query=st.sampled_from(QUERIES),
    current=st.sampled_from([None, "And the tomatoes?", "Tell me everything about pasta and cars " * 5]),
    keep_last=st.integers(0, 4),
    with_system=st.booleans(),
)
def test_budget_is_respected(hashing_embedder, budget, query, current, keep_last, with_system) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder, keep_last=keep_last)
    messages = conversation(current)
    if not with_system:
        messages = messages[1:]
    counter = strategy.token_counter
    turns = group_turns(messages)
    past, in_progress = split_current(turns)
    fixed = messages_tokens(counter, [m for m in messages if m.role == "system"])
    fixed += turn_tokens(counter, in_progress) if in_progress else 0
    if fixed > budget:
        with pytest.raises(BudgetExceededError):
            build_context(strategy, messages, query=query, budget=budget)
        return
    context = build_context(strategy, messages, query=query, budget=budget)
    assert context.tokens <= budget
    # Block token counts are honest.
    for block in context.blocks:
        assert block.tokens == messages_tokens(counter, block.messages)
    # Layout is kept under any budget.
    kinds = [b.kind for b in context.blocks]
    if with_system:
        assert kinds[0] == "system"
    if in_progress is not None:
        assert kinds[-1] == "current"
    indices = context.turn_indices
    assert indices == sorted(set(indices))


def test_budget_exceeded_by_the_current_turn_alone(strategy) -> None:
    long_question = Message("user", "Please explain " + "pasta " * 200)
    messages = [*pairs()[:4], long_question]
    needed = message_tokens(strategy.token_counter, long_question)
    with pytest.raises(BudgetExceededError) as info:
        build_context(strategy, messages, budget=needed - 1)
    assert isinstance(info.value, ValueError)
    context = build_context(strategy, messages, budget=needed)
    assert context.messages() == [long_question]


def test_budget_exceeded_by_system_plus_current(strategy) -> None:
    messages = conversation("short?")
    counter = strategy.token_counter
    fixed = message_tokens(counter, SYSTEM) + message_tokens(counter, messages[-1])
    with pytest.raises(BudgetExceededError):
        build_context(strategy, messages, budget=fixed - 1)
    context = build_context(strategy, messages, budget=fixed)
    assert [b.kind for b in context.blocks] == ["system", "current"]


@pytest.mark.parametrize("budget", [0, -1, 1.5, True, False, "100", 10.0])
def test_invalid_budget(strategy, budget) -> None:
    with pytest.raises(ConfigurationError):
        build_context(strategy, conversation(), budget=budget)


def test_check_budget() -> None:
    assert check_budget(None) is None
    assert check_budget(1) == 1
    with pytest.raises(ConfigurationError, match="max_tokens"):
        check_budget(0, name="max_tokens")


def test_message_tokens_include_overhead_and_tool_calls(strategy) -> None:
    counter = strategy.token_counter
    plain = Message("user", "hello world")
    assert message_tokens(counter, plain) == 2 + MESSAGE_OVERHEAD
    call = Message("assistant", "", tool_calls=({"id": "c1", "name": "search", "args": {"q": "x"}},))
    assert message_tokens(counter, call) > MESSAGE_OVERHEAD


# ---------------------------------------------------------------------------------------
# Purity
# ---------------------------------------------------------------------------------------


def test_raw_messages_are_never_modified(strategy) -> None:
    messages = conversation()
    before = list(messages)
    dicts = copy.deepcopy([m.to_dict() for m in messages])
    for budget in (None, 10_000, 300, 60):
        for query in (None, "pasta", "car"):
            build_context(strategy, messages, query=query, budget=budget)
    assert len(messages) == len(before)
    assert all(a is b for a, b in zip(messages, before, strict=True))
    assert [m.to_dict() for m in messages] == dicts


def test_accepts_a_tuple_of_messages(strategy) -> None:
    messages = tuple(conversation())
    assert build_context(strategy, messages).blocks[-1].kind == "current"


# ---------------------------------------------------------------------------------------
# sync_strategy
# ---------------------------------------------------------------------------------------


def test_sync_appends_incrementally_each_turn_embedded_once(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    calls = hashing_embedder.calls
    messages: list[Message] = [SYSTEM]
    for k, (question, answer) in enumerate(TOPICS):
        messages.append(Message("user", question))
        before = len(calls)
        build_context(strategy, messages)
        # Turn k is in progress: nothing new to embed, only the query.
        assert calls[before:] == ([1] if k else [])  # no past turns yet -> no query embedding
        assert len(strategy) == k
        messages.append(Message("assistant", answer))
        before = len(calls)
        build_context(strategy, messages)
        # Turn k just completed: exactly one new turn embedded; the query (the same newest
        # user message as in the previous call) reuses its cached embedding.
        assert calls[before:] == ([1] if k else [1, 1])  # k=0: the query was never embedded
        assert len(strategy) == k + 1
    # Every turn embedded exactly once overall, every distinct query once.
    n = len(TOPICS)
    queries = n
    assert sum(calls) == n + queries
    assert [t.fingerprint for t in strategy.turns] == [t.fingerprint for t in group_turns(messages)]


def test_sync_batches_many_new_turns(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    build_context(strategy, pairs()[:4])
    assert hashing_embedder.calls == [2, 1]
    build_context(strategy, pairs())
    assert hashing_embedder.calls == [2, 1, len(TOPICS) - 2, 1]


def test_sync_resets_on_a_diverging_history(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    messages = pairs()
    build_context(strategy, messages)
    calls = hashing_embedder.calls
    assert calls == [len(TOPICS), 1]

    # An edited first turn: reset, and only the new turn content is embedded (cache).
    edited = list(messages)
    edited[0] = Message("user", "How long should I boil penne?")
    before = len(calls)
    build_context(strategy, edited)
    assert calls[before:] == [1]  # the edited turn; the query is unchanged and cached
    assert [t.fingerprint for t in strategy.turns] == [t.fingerprint for t in group_turns(edited)]
    assert [t.index for t in strategy.turns] == list(range(len(TOPICS)))

    # An edited last known turn (answer regenerated): reset again.
    regenerated = edited[:-1] + [Message("assistant", "Use pathlib.Path.read_text().")]
    before = len(calls)
    build_context(strategy, regenerated)
    assert calls[before:] == [1]  # the regenerated turn; the query is unchanged and cached
    assert strategy.turns[-1].messages[-1].text == "Use pathlib.Path.read_text()."

    # A shorter, different conversation (another thread): reset to it.
    other = [Message("user", "Tell me about jazz"), Message("assistant", "Jazz began in New Orleans.")]
    before = len(calls)
    build_context(strategy, other)
    assert calls[before:] == [1, 1]
    assert [t.fingerprint for t in strategy.turns] == [t.fingerprint for t in group_turns(other)]

    # Back to the first conversation: every turn is cached already.
    before = len(calls)
    build_context(strategy, messages)
    assert calls[before:] == [1]
    assert len(strategy) == len(TOPICS)


def test_sync_strategy_unit(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    turns = group_turns(pairs())
    sync_strategy(strategy, turns[:3])
    sync_strategy(strategy, turns[:3])  # nothing new
    sync_strategy(strategy, turns)
    assert hashing_embedder.calls == [3, len(turns) - 3]
    assert [t.messages for t in strategy.turns] == [t.messages for t in turns]
    sync_strategy(strategy, [])
    assert len(strategy) == 0
