"""Replaying dialogues through memories and measuring them (``ctxmgmt.app.bench.runner``)."""

from __future__ import annotations

import io
import json

import pytest

from ctxmgmt.app.bench.baselines import Baseline, LastKStrategy
from ctxmgmt.app.bench.data import Dialogue, Question
from ctxmgmt.app.bench.runner import (
    FULL_HISTORY,
    LineProgress,
    MemoryResult,
    QuestionRecord,
    budgets_of,
    run_all,
    run_memory,
    to_json,
)
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy

TOPICS = ["beagle vet visit", "lisbon flight booking", "sourdough starter feeding", "monthly budget"]


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_line_progress_writes_a_line_per_row_and_every_few_seconds():
    stream, clock = io.StringIO(), Clock()
    progress = LineProgress(2, stream, every=5.0, clock=clock)
    step = progress("KadaneDialMemory", 10)
    for _ in range(4):
        clock.now += 2.0
        step(1)
    step = progress("last-k turns", 10)
    assert progress.elapsed() == pytest.approx(8.0)
    assert stream.getvalue().splitlines() == [
        "bench: 1/2 KadaneDialMemory: 0/10 steps, 0 s",
        "bench: 1/2 KadaneDialMemory: 3/10 steps, 6 s",  # 6 s after the row's first line
        "bench: 2/2 last-k turns: 0/10 steps, 8 s",
    ]


def dialogue(name: str = "d0", n: int = 12) -> Dialogue:
    turns = [
        Turn(i, (Message("user", f"turn {i} about the {TOPICS[i % 4]}"), Message("assistant", f"ok {i}")))
        for i in range(n)
    ]
    questions = [
        Question("what did the vet say about the beagle?", "beagle", (0, 4, 8), "1"),
        Question("when is the lisbon flight?", "lisbon", (1,), "2"),
    ]
    return Dialogue(name, turns, questions)


@pytest.fixture
def kadanedial(hashing_embedder):
    return lambda: KadaneDialStrategy(embedder=hashing_embedder)


def test_the_full_history_sends_every_turn(kadanedial) -> None:
    result = run_memory(FULL_HISTORY, None, [dialogue()], kind="full")
    assert result.turns == 12 and len(result.questions) == 2
    assert all(q.recall == 1.0 and q.tokens == q.history_tokens for q in result.questions)
    assert result.add_ms == []
    assert result.summary()["token_ratio"] == 1.0


def test_a_memory_is_timed_per_turn_and_scored_per_question(kadanedial) -> None:
    steps: list[int] = []
    result = run_memory("KadaneDialMemory", kadanedial, [dialogue()], on_step=steps.append)
    assert len(result.add_ms) == 12 and sum(steps) == 12 + 2
    assert [q.category for q in result.questions] == ["1", "2"]
    assert all(0 < q.tokens <= q.history_tokens for q in result.questions)
    summary = result.summary()
    assert summary["questions"] == 2 and summary["kind"] == "memory"
    assert set(result.by_category()) == {"1", "2"}


def test_per_question_budgets_cap_the_context(kadanedial) -> None:
    data = [dialogue()]
    result = run_memory("k", kadanedial, data, budgets={"d0": [40, 40]}, budget_mode="question")
    assert all(q.tokens <= 40 for q in result.questions)


def test_budgets_of_are_the_tokens_sent_per_dialogue() -> None:
    result = MemoryResult("m")
    for dialogue_id, tokens in (("a", 10), ("a", 20), ("b", 5)):
        result.questions.append(QuestionRecord("m", dialogue_id, "1", 1.0, True, tokens, 100, 1.0))
    assert budgets_of(result) == {"a": [10, 20], "b": [5]}


def test_run_all_orders_rows_and_gives_baselines_the_first_memorys_budgets(kadanedial) -> None:
    seen: list[int | None] = []

    class Recording(LastKStrategy):
        def select(self, query: str, *, budget: int | None = None) -> Context:
            seen.append(budget)
            return super().select(query, budget=budget)

    baseline = Baseline("recording", Recording, "question")
    results = run_all([dialogue()], memories={"first": kadanedial}, baselines=[baseline])
    assert [r.memory for r in results] == [FULL_HISTORY, "first", "recording"]
    assert [r.kind for r in results] == ["full", "memory", "baseline"]
    assert seen == [q.tokens for q in results[1].questions]


def test_a_fixed_budget_is_given_to_every_row(kadanedial) -> None:
    results = run_all([dialogue()], memories={"first": kadanedial}, full_history=False, budget=30)
    assert all(q.tokens <= 30 for q in results[0].questions)


def test_to_json_is_json_with_a_summary_per_row(kadanedial) -> None:
    result = run_memory("k", kadanedial, [dialogue()])
    payload = to_json([result], data=["tiny.jsonl"], notes=["a note"])
    text = json.dumps(payload)  # plain JSON data (NaN stands for a metric without data)
    assert json.loads(text)["memories"][0]["questions"] == payload["memories"][0]["questions"]
    (row,) = payload["memories"]
    assert row["summary"]["memory"] == "k" and len(row["questions"]) == 2
    assert payload["data"] == ["tiny.jsonl"] and payload["notes"] == ["a note"]
