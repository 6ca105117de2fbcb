"""The shipped demo conversation (``ctxmgmt.app.data``)."""

from __future__ import annotations

import pytest

from ctxmgmt.app.data import DemoConversation, DemoQuestion, _parse, load_demo

TINY = {
    "title": "two short sessions",
    "sessions": [
        {
            "date": "2024-03-01",
            "turns": [{"user": "hi", "assistant": "hello"}, {"user": "a", "assistant": "b"}],
        },
        {"date": "2024-03-08", "turns": [{"user": "back", "assistant": "welcome back"}]},
    ],
    "questions": [{"question": "what did I say?", "answer": "hi", "evidence": [0], "kind": "single-hop"}],
}


def test_sessions_become_dated_messages_and_turns() -> None:
    demo = _parse(TINY)
    assert isinstance(demo, DemoConversation) and demo.title == "two short sessions"
    assert [m.role for m in demo.messages] == ["user", "assistant"] * 3
    assert demo.messages[4].timestamp == "2024-03-08" and demo.messages[4].metadata["session"] == 1
    assert len(demo.turns) == 3 and demo.session_starts == [0, 2]
    assert demo.questions == [DemoQuestion("what did I say?", "hi", (0,), "single-hop")]


def test_turns_map_to_their_sessions_and_dates() -> None:
    demo = _parse(TINY)
    assert [demo.session_of(i) for i in range(3)] == [0, 0, 1]
    assert demo.date_of(2) == "2024-03-08"
    for outside in (-1, 3):
        with pytest.raises(IndexError):
            demo.session_of(outside)


def test_the_shipped_conversation_loads_with_consistent_questions() -> None:
    demo = load_demo()
    turns = demo.turns
    assert len(turns) > 100 and len(demo.session_dates) == len(demo.session_starts) >= 2
    assert demo.session_starts == sorted(demo.session_starts) and demo.session_starts[0] == 0
    kinds = {q.kind for q in demo.questions}
    assert kinds <= {"single-hop", "multi-hop", "temporal", "follow-up"} and len(kinds) >= 3
    for question in demo.questions:
        assert question.evidence and all(0 <= i < len(turns) for i in question.evidence)
        evidence_text = " ".join(turns[i].text for i in question.evidence).lower()
        assert question.answer.lower() in evidence_text, question.question


def test_each_load_is_a_fresh_object() -> None:
    assert load_demo() is not load_demo()
