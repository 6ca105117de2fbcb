"""group_turns, opens_turn (a session the assistant opens) and History."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmgmt import History, InvalidMessageError, Message, group_turns
from ctxmgmt.messages.history import SESSION_GAP, opens_turn
from ctxmgmt.session.converted import ConvertedHistory
from tests.helpers import assistant, tool_call, tool_result, user

# ---------------------------------------------------------------------------------------
# group_turns
# ---------------------------------------------------------------------------------------


def test_group_turns_basic() -> None:
    messages = [user("a"), assistant("A"), user("b"), assistant("B")]
    turns = group_turns(messages)
    assert [t.index for t in turns] == [0, 1]
    assert [t.messages for t in turns] == [tuple(messages[:2]), tuple(messages[2:])]
    assert [t.query for t in turns] == ["a", "b"]


def test_tool_call_and_result_stay_in_one_turn() -> None:
    messages = [
        user("weather in Paris?"),
        tool_call(),
        tool_result(),
        assistant("It is 18C."),
        user("thanks"),
        assistant("You're welcome"),
    ]
    turns = group_turns(messages)
    assert len(turns) == 2
    assert turns[0].messages == tuple(messages[:4])
    assert turns[1].messages == tuple(messages[4:])


def test_leading_assistant_messages_form_turn_zero() -> None:
    messages = [assistant("Hello! How can I help?"), assistant("I can check weather."), user("hi")]
    turns = group_turns(messages)
    assert len(turns) == 2
    assert turns[0].index == 0
    assert turns[0].messages == tuple(messages[:2])
    assert turns[0].query == ""
    assert turns[1].messages == (messages[2],)


def test_system_messages_are_skipped() -> None:
    system = Message("system", "be helpful")
    messages = [system, user("a"), Message("system", "mid-conversation note"), assistant("A")]
    turns = group_turns(messages)
    assert len(turns) == 1
    assert turns[0].messages == (messages[1], messages[3])
    assert all(m.role != "system" for t in turns for m in t.messages)
    assert group_turns([system]) == []
    assert group_turns([]) == []


def dated(role: str, text: str, when: str | None) -> Message:
    return Message(role, text, timestamp=when)


def test_an_assistant_message_that_opens_a_later_session_starts_a_turn() -> None:
    messages = [
        dated("user", "Book a table for Friday.", "2023/05/20 (Sat) 02:21"),
        dated("assistant", "Booked for 8 pm.", "2023/05/20 (Sat) 02:21"),
        dated("assistant", "Good morning! Your table is at 8 pm tonight.", "2023/05/26 (Fri) 09:00"),
        dated("user", "Thanks, can you move it to 9?", "2023/05/26 (Fri) 09:00"),
        dated("assistant", "Moved to 9 pm.", "2023/05/26 (Fri) 09:00"),
    ]
    turns = group_turns(messages)
    assert [t.messages for t in turns] == [tuple(messages[:2]), (messages[2],), tuple(messages[3:])]
    assert turns[1].query == "" and turns[1].is_complete


@pytest.mark.parametrize(
    ("before", "after", "opens"),
    [
        ("2023-05-20T10:00", "2023-05-20T10:29", False),  # an answer sent in parts
        ("2023-05-20T10:00", "2023-05-20T10:30", True),  # SESSION_GAP: 30 minutes
        ("2023-05-20T10:00", "2023-05-19T10:00", True),  # sessions out of order (LongMemEval has some)
        ("2023-05-20T10:00", None, False),  # no time: no session to tell
        (None, "2023-05-20T10:00", False),
        ("2023-05-20T10:00", "not a time", False),
        ("2023-05-20T10:00Z", "2023-05-21T10:00", False),  # aware against naive: not comparable
    ],
)
def test_opens_turn_needs_two_readable_times_a_session_gap_apart(before, after, opens) -> None:
    assert SESSION_GAP.total_seconds() == 30 * 60
    previous = dated("assistant", "Done.", before)
    assert opens_turn(previous, dated("assistant", "Anything else?", after)) is opens


def test_only_an_assistant_message_after_a_final_answer_opens_a_turn() -> None:
    early, late = "2023-05-20T10:00", "2023-05-22T10:00"
    assert opens_turn(None, dated("assistant", "Hello!", late))  # the first message
    assert opens_turn(dated("assistant", "x", early), dated("user", "hi", early))  # every user message
    call = Message("assistant", "", tool_calls=({"id": "c1", "name": "search", "args": {}},), timestamp=early)
    result = Message("tool", "found", tool_call_id="c1", timestamp=early)
    assert not opens_turn(call, dated("assistant", "late answer", late))  # a call waits for its answer
    assert not opens_turn(result, dated("assistant", "late answer", late))  # a tool result too
    assert not opens_turn(dated("user", "q", early), dated("assistant", "late answer", late))
    late_result = Message("tool", "r", tool_call_id="c1", timestamp=late)
    assert not opens_turn(dated("assistant", "x", early), late_result)


def test_a_flat_list_read_message_by_message_groups_as_group_turns_does() -> None:
    stamps = ["2023-05-20T10:00", "2023-05-20T10:00", "2023-05-21T09:00", "2023-05-21T09:05"]
    stamps.append("2023-05-21T09:06")
    roles = ["user", "assistant", "assistant", "user", "assistant"]
    messages = [dated(r, f"m{k}", s) for k, (r, s) in enumerate(zip(roles, stamps, strict=True))]
    history: ConvertedHistory[Message] = ConvertedHistory(lambda m: m, None)
    for k in range(1, len(messages) + 1):  # as a chat store grows
        history.update(messages[:k])
    assert history.turns == group_turns(messages) and len(history.turns) == 3


@st.composite
def conversations(draw) -> list[Message]:
    kinds = draw(st.lists(st.sampled_from(["user", "assistant", "call", "tool", "system"]), max_size=30))
    out = []
    for k, kind in enumerate(kinds):
        text = f"m{k}"
        if kind == "call":
            out.append(tool_call(text, {"id": f"c{k}"}))
        elif kind == "tool":
            out.append(Message("tool", text, tool_call_id=f"c{k}"))
        else:
            out.append(Message(kind, text))
    return out


@settings(database=None, max_examples=200, deadline=None)
@given(messages=conversations())
def test_group_turns_is_a_lossless_partition(messages: list[Message]) -> None:
    turns = group_turns(messages)
    flat = [m for t in turns for m in t.messages]
    assert flat == [m for m in messages if m.role != "system"]
    assert [t.index for t in turns] == list(range(len(turns)))
    for k, turn in enumerate(turns):
        assert turn.messages
        users = [m for m in turn.messages if m.role == "user"]
        # Exactly one user message, first; only turn 0 may lack one.
        assert len(users) <= 1
        if users:
            assert turn.messages[0].role == "user"
        else:
            assert k == 0


# ---------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------


def test_history_append_only_and_lossless() -> None:
    messages = [Message("system", "sys"), user("a"), tool_call(), tool_result(), assistant("A")]
    history = History()
    for m in messages:
        history.append(m)
    assert len(history) == len(messages)
    assert history.messages == tuple(messages)
    assert list(history) == messages
    assert not hasattr(history, "pop") and not hasattr(history, "remove")
    # The exposed messages are a snapshot; mutating it cannot change the history.
    snapshot = history.messages
    assert isinstance(snapshot, tuple)
    listed = list(history)
    listed.clear()
    assert len(history) == len(messages)
    history.extend([user("b"), assistant("B")])
    assert history.messages[: len(messages)] == tuple(messages)
    assert len(history) == len(messages) + 2
    assert [t.index for t in history.turns()] == [0, 1]


def test_history_from_iterable_and_iteration_is_a_snapshot() -> None:
    history = History([user("a"), assistant("A")])
    seen = []
    for m in history:
        seen.append(m)
        if len(history) < 4:
            history.append(user("more"))
    assert seen == [user("a"), assistant("A")]


@pytest.mark.parametrize("bad", [{"role": "user", "text": "hi"}, "hi", None, ("user", "hi")])
def test_history_rejects_non_messages(bad) -> None:
    history = History()
    with pytest.raises(InvalidMessageError):
        history.append(bad)
    with pytest.raises(InvalidMessageError):
        History([user("a"), bad])
    assert len(history) == 0


def test_history_state_round_trip() -> None:
    messages = [
        Message("system", "sys", metadata={"a": 1}),
        Message("user", "weather?", name="Ann", timestamp="t1"),
        tool_call(),
        tool_result(),
        assistant("sunny"),
    ]
    history = History(messages)
    state = json.loads(json.dumps(history.to_state()))
    again = History.from_state(state)
    assert again.messages == history.messages
    assert [m.metadata for m in again] == [m.metadata for m in history]
    assert [t.fingerprint for t in again.turns()] == [t.fingerprint for t in history.turns()]
    assert History.from_state([]).messages == ()
