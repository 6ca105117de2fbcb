"""Message dates travel through the LlamaIndex interface: SWin anchors them as the core does.

Runs ``benchmarks/swin_dates_llamaindex.py`` on a small LoCoMo-format conversation written
here (two dated sessions; a fact said "yesterday" in the first), so no shared data is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_benchmark

FILLER = [
    ("How was your week at the studio?", "Busy, we finished the mural for the library downtown."),
    ("Did the kids like the painting class?", "They loved it, Mia painted a purple dragon."),
    ("Are you still running on Sundays?", "Yes, I ran twelve kilometres along the river."),
    ("What are you reading these days?", "A novel about a lighthouse keeper in Norway."),
    ("Any plans for the summer holidays?", "We are thinking of a camping trip to the lakes."),
    ("How is your sister doing?", "She started a new job as a nurse in Leeds."),
]


def _session(first: tuple[str, str]) -> list[dict[str, str]]:
    lines = []
    for i, (said, reply) in enumerate([first, *FILLER, *FILLER]):
        lines += [
            {"speaker": "Caroline", "dia_id": f"D{i}:1", "text": said},
            {"speaker": "Melanie", "dia_id": f"D{i}:2", "text": reply},
        ]
    return lines


def _conversation(path: Path) -> Path:
    sample = {
        "sample_id": "synthetic",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": _session(
                (
                    "I adopted a beagle puppy named Biscuit from the Riverside shelter yesterday!",
                    "Congratulations on Biscuit, what a lovely name for a beagle puppy.",
                )
            ),
            "session_2_date_time": "10:00 am on 2 June, 2023",
            "session_2": _session(("Good morning, Melanie!", "Good morning, Caroline, how are you?")),
        },
        "qa": [
            {
                "question": "When did Caroline adopt Biscuit?",
                "answer": "7 May 2023",
                "evidence": ["D0:1"],
                "category": 2,
            },
            {
                "question": "What did Mia paint?",
                "answer": "purple dragon",
                "evidence": ["D2:2"],
                "category": 4,
            },
        ],
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("swin_dates_llamaindex")


def test_dated_messages_anchor_through_llamaindex_as_in_the_core(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    assert bench.main([str(_conversation(tmp_path / "locomo.json")), "--json", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    core, dated, undated = (row["answer_containment"] for row in result["rows"])
    assert result["containment_differs"] == 0
    assert core == dated == 1.0  # "yesterday (7 May 2023)" reaches the model through LlamaIndex
    assert undated == 0.5  # without the date, "yesterday" stays unanchored


def test_undated_messages_are_anchored_to_when_the_memory_first_saw_them(tmp_path, monkeypatch):
    """No timestamp: "yesterday" is anchored to the day the memory first saw the message, and
    the stamp survives a restart (it is kept with the derived state, not in the raw history)."""
    import datetime as dt

    from langchain_core.messages import AIMessage, HumanMessage

    from ctxmgmt.messages.dates import format_date
    from langchain_ctxmgmt import SWinSummarySelector

    store = f"sqlite:///{tmp_path / 'state.db'}"
    history = [HumanMessage("I adopted a beagle named Biscuit yesterday!"), AIMessage("Lovely!")]
    for user, answer in FILLER[:4]:
        history += [HumanMessage(user), AIMessage(answer)]
    history.append(HumanMessage("When did I adopt Biscuit?"))
    yesterday = format_date(dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1))

    first = SWinSummarySelector(window=2, overlap=0, store=store)
    first.invoke(history, {"configurable": {"thread_id": "dog"}})
    turns = first.conversation("dog").strategy.turns
    seen = turns[0].messages[0].seen
    assert seen is not None and turns[0].messages[0].timestamp is None
    assert yesterday in str(first.conversation("dog").strategy.to_state())

    import ctxmgmt.session.conversation

    later = dt.date(2031, 1, 1)  # the restart happens much later
    monkeypatch.setattr(ctxmgmt.session.conversation, "_utc_now", lambda: later)
    restarted = SWinSummarySelector(window=2, overlap=0, store=store)
    restarted.invoke(history, {"configurable": {"thread_id": "dog"}})
    assert restarted.conversation("dog").strategy.turns[0].messages[0].seen == seen
