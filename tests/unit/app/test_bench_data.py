"""Loaders of LoCoMo, MT-Bench+ and generic JSONL data, on small inline fixtures."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.app.bench.data import load_dialogues, load_jsonl, load_locomo, load_mtbenchplus
from ctxmgmt.messages.exceptions import ConfigurationError

LOCOMO = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1 May 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely! What's her name?"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Her name is Miso."},
            ],
            "session_2_date_time": "9 May 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I went hiking.", "blip_caption": "a mountain"},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Where?"},
            ],
        },
        "qa": [
            {"question": "What is the cat called?", "answer": "Miso", "evidence": ["D1:3"], "category": 4},
            {"question": "When?", "answer": 2023, "evidence": ["D1:1; D2:2"], "category": 2},
            {"question": "Trick?", "adversarial_answer": "x", "evidence": [], "category": 5},
        ],
    }
]


def test_locomo_turns_are_utterance_pairs_per_session(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    [d] = load_locomo(path)
    assert d.id == "conv-x"
    # session 1: (D1:1, D1:2), (D1:3); session 2: (D2:1, D2:2)
    assert [[m.metadata["dia_id"] for m in t.messages] for t in d.turns] == [
        ["D1:1", "D1:2"],
        ["D1:3"],
        ["D2:1", "D2:2"],
    ]
    assert [m.role for m in d.turns[0].messages] == ["user", "assistant"]
    assert d.turns[2].messages[0].name == "Bob"
    assert d.turns[2].messages[0].timestamp == "9 May 2023"
    assert d.turns[2].messages[0].text == "I went hiking. [shares a photo of a mountain]"
    assert len(d.questions) == 2  # category 5 is left out
    q1, q2 = d.questions
    assert (q1.text, q1.answer, q1.evidence, q1.category) == ("What is the cat called?", "Miso", (1,), "4")
    assert q2.answer == "2023" and q2.evidence == (0, 2)  # packed ids are split
    assert q1.evidence_messages == ((0,),)  # D1:3, the first utterance of its turn
    assert q2.evidence_messages == ((0,), (1,))  # D1:1 opens turn 0; D2:2 answers in turn 2
    assert load_dialogues(path)[0].questions == d.questions


MTBENCH = [
    {
        "id": 7,
        "type": "mixed",
        "conversations": [
            {"from": "human", "value": "Write a poem about rain.", "turn-info": "writing-81-1"},
            {"from": "chatbot", "value": "", "turn-info": "writing-81-1"},
            {"from": "human", "value": "Make it shorter.", "turn-info": "writing-81-2"},
            {"from": "chatbot", "value": "", "turn-info": "writing-81-2"},
            {"from": "human", "value": "Solve 2x+1=5.", "turn-info": "math-111-1"},
            {"from": "chatbot", "value": "x = 2", "turn-info": "math-111-1"},
            {"from": "human", "value": "What was my first request?", "turn-info": "writing-81-Q"},
        ],
    }
]


def test_mtbenchplus_probe_is_the_question(tmp_path):
    path = tmp_path / "mt.json"
    path.write_text(json.dumps(MTBENCH))
    [d] = load_mtbenchplus(path)
    assert d.id == "7"
    assert [t.messages[0].text for t in d.turns] == [
        "Write a poem about rain.",
        "Make it shorter.",
        "Solve 2x+1=5.",
    ]
    assert d.turns[0].messages[1].text == "(no reply)"  # empty chatbot replies are kept as placeholders
    assert d.turns[2].messages[1].text == "x = 2"
    [q] = d.questions
    assert q.text == "What was my first request?"
    assert q.evidence == (0, 1) and q.category == "probe" and q.answer == ""
    assert q.evidence_messages == ((0,), (0,))  # the human messages
    assert load_dialogues(path)[0].questions == d.questions


def test_mtbenchplus_probe_with_two_topics(tmp_path):
    data = json.loads(json.dumps(MTBENCH))
    data[0]["conversations"][-1]["turn-info"] = "writing-81-math-111-Q"
    path = tmp_path / "mt2.json"
    path.write_text(json.dumps(data))
    assert load_mtbenchplus(path)[0].questions[0].evidence == (0, 1, 2)


def test_generic_jsonl(tmp_path):
    lines = [
        {
            "id": "a",
            "turns": [
                {"user": "hi", "assistant": "hello", "date": "2024-01-01"},
                {"user": "my code is 42"},
            ],
            "questions": [{"question": "code?", "answer": "42", "evidence": [1], "category": "single"}],
        },
        {"turns": [{"user": "x", "assistant": "y"}]},
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    a, b = load_jsonl(path)
    assert a.id == "a" and len(a.turns) == 2
    assert [m.role for m in a.turns[0].messages] == ["user", "assistant"]
    assert a.turns[0].messages[0].timestamp == "2024-01-01"
    assert [m.text for m in a.turns[1].messages] == ["my code is 42"]
    [q] = a.questions
    assert (q.text, q.answer, q.evidence, q.category) == ("code?", "42", (1,), "single")
    assert b.id == "1" and b.questions == []
    assert [d.id for d in load_dialogues(path)] == ["a", "1"]


def test_load_dialogues_rejects_missing_and_unknown(tmp_path):
    with pytest.raises(ConfigurationError):
        load_dialogues(tmp_path / "nope.json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"something": 1}]))
    with pytest.raises(ConfigurationError):
        load_dialogues(other)


LONGMEMEVAL = [
    {
        "question_id": "q1",
        "question_type": "temporal-reasoning",
        "question": "When did I buy the red bike?",
        "question_date": "2023/06/10 (Sat) 09:00",
        "answer": "on 2 May",
        "answer_session_ids": ["s2"],
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 11:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Hi there", "has_answer": False},
                {"role": "assistant", "content": "Hello!"},
            ],
            [
                {"role": "assistant", "content": "Welcome back."},
                {"role": "user", "content": "I bought a red bike today.", "has_answer": True},
                {"role": "assistant", "content": "Enjoy it."},
                {"role": "user", "content": "Thanks."},
            ],
        ],
    },
    {
        "question_id": "q2_abs",
        "question_type": "single-session-user",
        "question": "What is my cat called?",
        "question_date": "2023/06/10 (Sat) 09:00",
        "answer": "You did not mention a cat.",
        "answer_session_ids": [],
        "haystack_session_ids": ["s3"],
        "haystack_dates": ["2023/05/03 (Wed) 10:00"],
        "haystack_sessions": [[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]],
    },
]


def test_longmemeval_sessions_dates_evidence_and_gzip(tmp_path):
    import gzip

    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as stream:
        json.dump(LONGMEMEVAL, stream)
    first, second = load_dialogues(path)
    # a turn starts at each user message and at each session start (s2 opens with the assistant)
    assert [[m.role for m in t.messages] for t in first.turns] == [
        ["user", "assistant"],
        ["assistant"],
        ["user", "assistant"],
        ["user"],
    ]
    assert [t.messages[0].timestamp for t in first.turns] == [
        "2023/05/01 (Mon) 10:00",
        "2023/05/02 (Tue) 11:00",
        "2023/05/02 (Tue) 11:00",
        "2023/05/02 (Tue) 11:00",
    ]
    (question,) = first.questions
    assert question.evidence == (2,) and question.sessions == ((1, 2, 3),)
    assert question.evidence_messages == ((0,),)  # the user message holds the answer, not the reply
    assert question.date == "2023/06/10 (Sat) 09:00" and question.category == "temporal-reasoning"
    assert question.answer == "on 2 May"
    # abstention items have no gold answer string to look for; no evidence either
    assert second.id == "q2_abs" and second.questions[0].answer == "" and second.questions[0].evidence == ()
