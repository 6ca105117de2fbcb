"""ConvertedHistory: each framework message converted once, the same turns as a full regrouping."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctxmgmt import InvalidMessageError
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, chain_hashes, split_system
from ctxmgmt.session.converted import ConvertedHistory, utc_today


@dataclass(eq=False)
class FrameworkMessage:
    """A mutable framework-style message (as LangChain's and LlamaIndex's are)."""

    role: str
    content: Any
    conversions: list[int] = field(default_factory=lambda: [0])


def convert(message: FrameworkMessage) -> Message:
    message.conversions[0] += 1
    if not message.content:
        raise InvalidMessageError("empty")
    return Message(message.role, message.content)


def expected(messages: list[FrameworkMessage]) -> tuple[list[Message], list[tuple[str, ...]]]:
    core = [Message(m.role, m.content) for m in messages]
    system, rest = split_system(core)
    return system, [tuple(x.text for x in t.messages) for t in group_turns(rest)]


def check(view: ConvertedHistory[FrameworkMessage], messages: list[FrameworkMessage]) -> None:
    view.update(messages)
    system, turns = expected(messages)
    assert view.system == system
    assert [tuple(x.text for x in t.messages) for t in view.turns] == turns
    assert [t.index for t in view.turns] == list(range(len(turns)))
    assert [[o.content for o in os] for os in view.turn_originals] == [list(t) for t in turns]
    assert [o.content for o in view.system_originals] == [m.text for m in system]


def chat(n: int) -> list[FrameworkMessage]:
    out = [FrameworkMessage("system", "be brief")]
    for i in range(n):
        out += [FrameworkMessage("user", f"question {i}"), FrameworkMessage("assistant", f"answer {i}")]
    return out


def test_growing_history_converts_each_message_once_and_reuses_turn_objects() -> None:
    view = ConvertedHistory(convert, lambda m: m.content)
    messages = chat(5)
    check(view, messages)
    first_turns = list(view.turns)
    for i in range(5, 8):
        messages += [FrameworkMessage("user", f"question {i}")]
        check(view, messages)
        messages += [FrameworkMessage("assistant", f"answer {i}")]
        check(view, messages)
    assert all(m.conversions[0] == 1 for m in messages)
    assert all(a is b for a, b in zip(first_turns[:-1], view.turns, strict=False))  # not regrouped


def test_replaced_deleted_inserted_and_reassigned_messages_are_seen() -> None:
    view = ConvertedHistory(convert, lambda m: m.content)
    messages = chat(6)
    check(view, messages)
    messages[5] = FrameworkMessage("user", "a replaced question")  # LangGraph: same id, new object
    check(view, messages)
    del messages[3:5]  # RemoveMessage
    check(view, messages)
    messages.insert(1, FrameworkMessage("system", "a second system message"))
    check(view, messages)
    messages[2].content = "edited in place by assignment"
    check(view, messages)
    check(view, messages[:4])  # truncated in the middle of a turn
    check(view, [])


def test_a_bad_message_raises_and_leaves_the_view_unchanged() -> None:
    view = ConvertedHistory(convert, lambda m: m.content)
    messages = chat(3)
    check(view, messages)
    before = list(view.turns)
    with pytest.raises(InvalidMessageError):
        view.update([*messages, FrameworkMessage("user", "")])
    assert view.turns == before
    check(view, messages)


def test_kept_chain_hashes_equal_fresh_ones_after_appends_and_edits():
    """The view's chain hashes are exactly those of its turns, whatever changed since the last call."""
    history = [
        Message("user" if i % 2 == 0 else "assistant", f"message {i} about {'cats' if i % 3 else 'fish'}")
        for i in range(20)
    ]
    view = ConvertedHistory(lambda m: m, lambda m: (m.role, m.text))
    for originals in (
        history[:7],  # ends on a user message: the last turn grows next time
        history[:8],
        history[:20],
        [*history[:4], Message("user", "[redacted]"), *history[5:20]],  # edited in place of turn 2
        history[:11],  # deleted from turn 5 on
        history[:14],
    ):
        view.update(originals)
        for count in (len(view.turns), len(view.turns) - 1, 0):
            assert view.chains(count) == chain_hashes(view.turns[:count])


def test_without_snapshots_messages_are_compared_by_identity_only() -> None:
    """``snapshot=None`` (a block's own copies): a replaced object is converted again, nothing else."""
    messages = chat(3)
    view = ConvertedHistory(convert, None)
    view.update(messages)
    conversions = [m.conversions[0] for m in messages]
    view.update(messages)
    assert [m.conversions[0] for m in messages] == conversions  # nothing converted again
    messages[3] = FrameworkMessage("user", "question 1, reworded")
    check(view, messages)
    assert messages[3].conversions[0] == 1


def test_an_unchecked_update_converts_only_appended_messages_and_the_next_check_sees_edits() -> None:
    """``check=False`` (an add): the earlier messages are not read; the next checked update finds edits."""
    reads: list[int] = []

    def content_of(message: FrameworkMessage) -> Any:
        reads.append(id(message))
        return message.content

    messages = chat(4)
    view = ConvertedHistory(convert, content_of)
    view.update(messages)
    messages[3].content = "edited in place before the add"
    messages += [FrameworkMessage("user", "question 4"), FrameworkMessage("assistant", "answer 4")]
    reads.clear()

    view.update(messages, check=False)

    assert reads == [id(m) for m in messages[-2:]]  # only the appended messages' snapshots
    assert view.turns[1].messages[0].text == "question 1"  # the edit is not seen yet
    assert messages[-1].conversions[0] == 1
    check(view, messages)  # a checked update (a selection) sees the edit and regroups from it
    assert view.turns[1].messages[0].text == "edited in place before the add"


def test_an_unchecked_update_of_a_history_that_does_not_extend_the_last_checks_everything() -> None:
    messages = chat(4)
    view = ConvertedHistory(convert, lambda m: m.content)
    view.update(messages)
    replaced = [*messages[:-1], FrameworkMessage("assistant", "answer 3, regenerated")]
    view.update(replaced, check=False)
    assert view.turns[-1].messages[-1].text == "answer 3, regenerated"
    view.update(replaced[:3], check=False)  # shorter: compared like a checked update
    assert [t.messages[0].text for t in view.turns] == ["question 0"]


def test_equal_new_objects_keep_their_conversion_and_take_the_old_ones_place() -> None:
    view = ConvertedHistory(convert, lambda m: (m.role, m.content))
    messages = chat(4)
    view.update(messages)
    rebuilt = [FrameworkMessage(m.role, m.content) for m in messages]  # a checkpointer's fresh copies
    turns_before = list(view.turns)
    check(view, rebuilt)
    assert all(m.conversions[0] == 0 for m in rebuilt)  # nothing converted again
    assert view.turns == turns_before and all(a is b for a, b in zip(view.turns, turns_before, strict=True))
    assert view.originals == rebuilt and view.turn_originals[1][0] is rebuilt[3]
    assert view.system_originals[0] is rebuilt[0]
    edited = [FrameworkMessage(m.role, m.content) for m in rebuilt]
    edited[5].content = "answer 1, corrected"
    check(view, edited)  # a new object with other content is converted again, from there on
    assert edited[5].conversions[0] == 1 and edited[4].conversions[0] == 0


def test_without_a_snapshot_only_the_same_object_is_reused() -> None:
    view = ConvertedHistory(convert, None)
    messages = chat(2)
    view.update(messages)
    rebuilt = [FrameworkMessage(m.role, m.content) for m in messages]
    check(view, rebuilt)
    assert all(m.conversions[0] == 1 for m in rebuilt)


def test_read_gives_the_turn_in_progress_the_question_and_the_chains_in_one_call():
    view: ConvertedHistory[FrameworkMessage] = ConvertedHistory(convert, None)
    messages = [
        FrameworkMessage("system", "be brief"),
        FrameworkMessage("user", "cats?"),
        FrameworkMessage("assistant", "yes"),
        FrameworkMessage("user", "and dogs?"),
    ]
    reading = view.read(messages)
    assert [t.query for t in reading.past] == ["cats?"]
    assert reading.current is not None and reading.current.query == "and dogs?"
    assert reading.question == "and dogs?"
    assert reading.chains == chain_hashes(reading.past)
    assert reading.system == view.system and reading.system_originals == [messages[0]]
    assert reading.turn_originals[1] == [messages[3]]
    assert view.read(messages, query="birds").question == "birds"


def test_a_flushed_read_has_no_system_and_no_turn_in_progress():
    view: ConvertedHistory[FrameworkMessage] = ConvertedHistory(convert, None)
    messages = [FrameworkMessage("system", "s"), FrameworkMessage("user", "a"), FrameworkMessage("user", "b")]
    reading = view.read(messages, flushed=True)
    assert reading.system == () and reading.current is None
    assert [t.query for t in reading.past] == ["a", "b"]
    assert reading.chains == chain_hashes(reading.past)


def test_a_clock_stamps_messages_without_a_time_when_first_converted() -> None:
    days = iter([dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)])
    view = ConvertedHistory(convert, lambda m: (m.role, m.content), clock=lambda: next(days))
    messages = chat(1)
    view.update(messages)
    assert [m.seen for m in view.messages] == ["2026-01-01"] * 3  # the day, ISO
    messages += [FrameworkMessage("user", "question 1")]
    view.update(messages)
    assert view.messages[-1].seen == "2026-01-02" and view.messages[0].seen == "2026-01-01"
    messages[2] = FrameworkMessage("assistant", "answer 0")  # rebuilt, equal: keeps its conversion
    messages[3].content = "question 1, edited"  # converted again: a new day
    view.update(messages)
    assert [m.seen for m in view.messages] == ["2026-01-01"] * 3 + ["2026-01-03"]


def test_without_a_clock_nothing_is_stamped() -> None:
    view = ConvertedHistory(convert, None)
    view.update(chat(2))
    assert all(m.seen is None for m in view.messages)


def test_utc_today_is_todays_date_in_utc() -> None:
    before = dt.datetime.now(dt.UTC).date()
    today = utc_today()
    assert isinstance(today, dt.date) and not isinstance(today, dt.datetime)
    assert before <= today <= dt.datetime.now(dt.UTC).date()


def test_clear_forgets_every_message_and_the_next_update_converts_again() -> None:
    view = ConvertedHistory(convert, lambda m: m.content)
    messages = chat(2)
    view.update(messages)
    view.chains(2)
    view.clear()
    assert view.originals == view.messages == view.turns == view.system == []
    assert view.turn_originals == view.system_originals == [] and view.chains(0) == []
    check(view, messages)
    assert all(m.conversions[0] == 2 for m in messages)
    assert view.chains(2) == chain_hashes(view.turns)


def test_an_unchanged_history_returns_the_same_view_without_reading_anything_again() -> None:
    view = ConvertedHistory(convert, lambda m: m.content)
    messages = chat(2)
    assert view.update(messages) is view
    turns = list(view.turns)
    assert view.update(list(messages)) is view
    assert all(a is b for a, b in zip(view.turns, turns, strict=True))
    assert all(m.conversions[0] == 1 for m in messages)
