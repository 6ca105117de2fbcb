"""Message, Turn and split_system (grouping and History: test_history.py)."""

from __future__ import annotations

import json

import pytest

from ctxmgmt import CtxMgmtError, InvalidMessageError, Message, Turn
from ctxmgmt.messages.types import split_system
from tests.helpers import CALL, assistant, tool_call, tool_result, user

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
# Turn
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


def test_split_system_keeps_order() -> None:
    s1, s2 = Message("system", "one"), Message("system", "two")
    messages = [s1, user("a"), s2, assistant("A")]
    assert split_system(messages) == ([s1, s2], [messages[1], messages[3]])


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
