"""The turn in progress and the question: split_current, newest_query, infer_query."""

from __future__ import annotations

from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.session.query import infer_query, newest_query, split_current


def turns(*messages: tuple[str, str]) -> list[Turn]:
    return group_turns([Message(role, text) for role, text in messages])


def test_the_last_turn_is_in_progress_until_a_final_answer_closes_it() -> None:
    done = turns(("user", "a"), ("assistant", "b"))
    assert split_current(done) == (done, None)
    asked = turns(("user", "a"), ("assistant", "b"), ("user", "c"))
    past, current = split_current(asked)
    assert past == asked[:1] and current is asked[1]
    assert split_current([]) == ([], None)


def test_a_pending_tool_call_keeps_its_turn_in_progress() -> None:
    calling = Message("assistant", "", tool_calls=({"id": "c", "name": "f", "args": {}},))
    history = group_turns([Message("user", "weather?"), calling])
    past, current = split_current(history)
    assert past == [] and current is history[0]


def test_newest_query_is_the_first_text_that_is_not_empty() -> None:
    assert newest_query(["", "newest", "older"]) == "newest"
    assert newest_query(["", ""]) == ""
    assert newest_query(iter([])) == ""


def test_newest_query_stops_at_the_first_text() -> None:
    seen: list[str] = []

    def texts():
        for text in ["", "b", "c"]:
            seen.append(text)
            yield text

    assert newest_query(texts()) == "b"
    assert seen == ["", "b"]


def test_infer_query_prefers_the_given_query_then_the_turn_in_progress_then_the_newest_user_turn() -> None:
    history = turns(("user", "first"), ("assistant", "x"), ("user", "second"), ("assistant", "y"))
    asked = turns(("user", "now"))[0]
    assert infer_query(history, asked, "given") == "given"
    assert infer_query(history, asked, None) == "now"
    assert infer_query(history, None, "   ") == "second"  # a blank query is no query
    assert infer_query(history, None, None) == "second"
    assert infer_query([], None, None) == ""


def test_a_user_message_without_text_gives_way_to_an_older_one() -> None:
    image_only = Message("user", "", media=("image",))
    history = group_turns([Message("user", "cats?"), Message("assistant", "yes"), image_only])
    past, current = split_current(history)
    assert infer_query(past, current, None) == "cats?"


def test_a_given_query_is_cleaned_like_message_text() -> None:
    assert infer_query([], None, "cat \ud83d") == "cat \ufffd"
