"""Message, Turn, group_turns and History."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmgmt import CtxMgmtError, History, InvalidMessageError, Message, Turn, group_turns
from ctxmgmt.messages.types import split_system

CALL = {"id": "call_1", "name": "weather", "args": {"city": "Paris"}}


def user(text: str) -> Message:
    return Message("user", text)


def assistant(text: str) -> Message:
    return Message("assistant", text)


def tool_call(text: str = "", call: dict | None = None) -> Message:
    return Message("assistant", text, tool_calls=(call or CALL,))


def tool_result(text: str = "18C and sunny", call_id: str = "call_1") -> Message:
    return Message("tool", text, tool_call_id=call_id)


# ---------------------------------------------------------------------------------------
# Message validation
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["bot", "User", "", "function", None])
def test_unknown_role(role) -> None:
    with pytest.raises(InvalidMessageError):
        Message(role, "hello")


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
@pytest.mark.parametrize("text", [None, "", "   ", "\n\t"])
def test_none_or_empty_content(role: str, text) -> None:
    with pytest.raises(InvalidMessageError):
        Message(role, text)


@pytest.mark.parametrize("text", [42, 1.5, b"bytes", ["a", "b"], {"type": "text", "text": "hi"}])
def test_non_string_content(text) -> None:
    with pytest.raises(InvalidMessageError):
        Message("user", text)


def test_invalid_message_error_is_a_value_error() -> None:
    assert issubclass(InvalidMessageError, ValueError)
    assert issubclass(InvalidMessageError, CtxMgmtError)
    with pytest.raises(ValueError):
        Message("user", "")
    with pytest.raises(ValueError):
        Message("robot", "hi")


def test_assistant_with_tool_calls_may_have_empty_text() -> None:
    message = tool_call("")
    assert message.text == ""
    assert message.tool_calls == (CALL,)
    assert not message.is_final_answer


def test_tool_message_may_have_empty_text() -> None:
    assert Message("tool", "", tool_call_id="call_1").text == ""


def test_none_content_is_rejected_even_with_tool_calls() -> None:
    with pytest.raises(InvalidMessageError):
        Message("assistant", None, tool_calls=(CALL,))


def test_is_final_answer() -> None:
    assert assistant("done").is_final_answer
    assert not user("hi").is_final_answer
    assert not tool_call().is_final_answer
    assert not tool_result().is_final_answer


def test_message_is_frozen() -> None:
    message = user("hi")
    with pytest.raises(AttributeError):
        message.text = "changed"  # type: ignore[misc]


def test_render() -> None:
    message = Message("user", "hello", name="Caroline", timestamp="1:56 pm on 8 May, 2023")
    assert message.render() == "[1:56 pm on 8 May, 2023] Caroline: hello"
    assert user("hi").render() == "user: hi"
    rendered = tool_call("let me check").render()
    assert rendered.startswith("assistant: let me check <call weather(")
    assert "Paris" in rendered


# ---------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------


FULL = Message(
    "assistant",
    "checking",
    name="bot",
    tool_calls=(CALL, {"id": "call_2", "name": "time", "args": {}}),
    tool_call_id=None,
    timestamp="2024-01-01T10:00:00",
    metadata={"source": "test", "n": [1, 2]},
)


@pytest.mark.parametrize(
    "message",
    [
        user("hi"),
        FULL,
        tool_result("42", "call_9"),
        Message("system", "be brief", metadata={"k": "v"}),
    ],
)
def test_to_dict_from_dict_round_trip(message: Message) -> None:
    data = message.to_dict()
    assert isinstance(data["tool_calls"], list)
    again = Message.from_dict(json.loads(json.dumps(data)))
    assert again == message
    assert again.metadata == message.metadata
    assert again.tool_calls == message.tool_calls
    assert isinstance(again.tool_calls, tuple)


def test_from_dict_with_missing_optional_fields() -> None:
    assert Message.from_dict({"role": "user", "text": "hi"}) == user("hi")
    assert Message.from_dict({"role": "user", "text": "hi", "tool_calls": None}) == user("hi")


def test_from_dict_validates() -> None:
    with pytest.raises(InvalidMessageError):
        Message.from_dict({"role": "user", "text": ""})
    with pytest.raises(InvalidMessageError):
        Message.from_dict({"role": "nobody", "text": "hi"})


def test_to_dict_does_not_alias_tool_calls() -> None:
    # Mutating the JSON form must not change the (frozen) message, its text or fingerprint.
    message = Message("assistant", "checking", tool_calls=({"id": "c1", "name": "weather"},))
    fingerprint = Turn(0, (message,)).fingerprint
    data = message.to_dict()
    data["tool_calls"][0]["name"] = "mutated"
    assert message.tool_calls[0]["name"] == "weather"
    assert Turn(0, (message,)).fingerprint == fingerprint


# ---------------------------------------------------------------------------------------
# group_turns and Turn
# ---------------------------------------------------------------------------------------


def test_media_only_message_is_valid_and_marked_in_render() -> None:
    message = Message("user", "", media=("image", "image"))
    assert message.render() == "user: [image] [image]"
    assert Message("user", "look", media=["file"]).media == ("file",)  # lists become tuples
    assert Message("user", "look", media=("image",)).render() == "user: look [image]"
    assert Message("user", "look").render() == "user: look"  # text-only unchanged
    state = json.loads(json.dumps(message.to_dict()))
    assert state["media"] == ["image", "image"]
    assert Message.from_dict(state) == message


@pytest.mark.parametrize("media", [("hologram",), "image", 3])
def test_bad_media_is_rejected(media) -> None:
    with pytest.raises(InvalidMessageError):
        Message("user", "look", media=media)


def test_media_changes_the_fingerprint() -> None:
    plain = Turn(0, (user("look"), assistant("a cat")))
    with_image = Turn(0, (Message("user", "look", media=("image",)), assistant("a cat")))
    assert plain.fingerprint != with_image.fingerprint


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


def test_split_system_keeps_order() -> None:
    s1, s2 = Message("system", "one"), Message("system", "two")
    messages = [s1, user("a"), s2, assistant("A")]
    assert split_system(messages) == ([s1, s2], [messages[1], messages[3]])


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


def test_turn_is_complete() -> None:
    assert Turn(0, (user("q"), assistant("a"))).is_complete
    assert Turn(0, (user("q"), tool_call(), tool_result(), assistant("a"))).is_complete
    assert not Turn(0, (user("q"),)).is_complete
    assert not Turn(0, (user("q"), tool_call())).is_complete
    assert not Turn(0, (user("q"), tool_call(), tool_result())).is_complete
    assert Turn(0, (assistant("greeting"),)).is_complete


def test_turn_text() -> None:
    turn = Turn(3, (user("a"), assistant("b")))
    assert turn.text == "user: a\nassistant: b"


def test_fingerprint_is_stable_and_content_keyed() -> None:
    a = Turn(0, (user("I adopted a cat"), assistant("Nice!")))
    b = Turn(7, (Message("user", "I adopted a cat"), Message("assistant", "Nice!")))
    c = Turn(0, (user("I adopted a dog"), assistant("Nice!")))
    assert a.fingerprint == b.fingerprint  # index does not matter
    assert a.fingerprint != c.fingerprint
    assert len(a.fingerprint) == 40 and all(ch in "0123456789abcdef" for ch in a.fingerprint)
    # Stable across processes: a plain hash of the rendered text.
    import hashlib

    assert a.fingerprint == hashlib.sha1(b"user: I adopted a cat\nassistant: Nice!").hexdigest()
    # Metadata is not part of the content.
    d = Turn(0, (Message("user", "I adopted a cat", metadata={"x": 1}), assistant("Nice!")))
    assert d.fingerprint == a.fingerprint


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
