"""The benchmark's metrics and aggregation, on small hand-computed cases."""

from __future__ import annotations

import math

import pytest

from ctxmgmt.app.bench.data import Dialogue, Question
from ctxmgmt.app.bench.metrics import answer_contained, evidence_recall, mean, percentile
from ctxmgmt.app.bench.runner import (
    FULL_HISTORY,
    MemoryResult,
    QuestionRecord,
    budgets_of,
    run_memory,
    to_json,
)
from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.strategies.base import Strategy


def test_evidence_recall_is_share_of_gold_turns_shown():
    assert evidence_recall([1, 2, 3, 4], [2, 4, 7]) == 0.5
    assert evidence_recall([5], [5]) == 1.0
    assert evidence_recall([5], []) == 0.0
    assert evidence_recall([1, 1, 2], [1]) == 0.5  # duplicates count once
    assert evidence_recall([], [1, 2]) is None


def test_a_turn_shown_as_its_user_message_counts_only_for_gold_in_that_message():
    gold_user, gold_reply = ((0,), (1,))
    user_only = {3: 1, 5: 1}  # turns 3 and 5: their user message alone
    assert evidence_recall([3, 5], [], user_only, [gold_user, gold_reply]) == 0.5
    assert evidence_recall([3, 5], [5], user_only, [gold_user, gold_reply]) == 1.0  # 5 also whole
    assert evidence_recall([3], [], user_only) == 0.0  # gold messages unknown: only the whole turn counts
    assert evidence_recall([3], [], user_only, [(0, 1)]) == 0.0  # one of two gold messages shown


def test_answer_containment_ignores_case_and_spacing():
    assert answer_contained("25 mg", "He takes 25  MG\ntwice a day") is True
    assert answer_contained("25 mg", "He takes 2.5 mg") is False
    assert answer_contained("  ", "anything") is None
    assert answer_contained("", "anything") is None


def test_percentile_interpolates_linearly():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0], 95) == 10.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 100) == 4.0
    # (n - 1) * 0.95 = 3.8 -> 4 + 0.8 * (5 - 4)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert math.isnan(percentile([], 50))


def test_mean_skips_none():
    assert mean([1.0, None, 0.0]) == 0.5
    assert math.isnan(mean([None, None]))


def record(category: str, recall: float | None, contained: bool | None, tokens: int, total: int, ms: float):
    return QuestionRecord("m", "d", category, recall, contained, tokens, total, ms)


def test_summary_and_categories_by_hand():
    result = MemoryResult(
        "m",
        questions=[
            record("1", 1.0, True, 10, 100, 2.0),
            record("1", 0.0, None, 30, 100, 4.0),
            record("2", None, False, 20, 50, 6.0),
        ],
        add_ms=[1.0, 3.0],
        llm_calls=3,
        turns=6,
        query_llm_calls=3,
    )
    s = result.summary()
    assert s["questions"] == 3
    assert s["evidence_recall"] == 0.5  # (1 + 0) / 2, the None is skipped
    assert s["answer_containment"] == 0.5  # (1 + 0) / 2
    assert s["token_ratio"] == pytest.approx((0.1 + 0.3 + 0.4) / 3)
    assert s["add_ms_p50"] == 2.0
    assert s["add_ms_p95"] == pytest.approx(1.0 + 0.95 * 2.0)
    assert s["select_ms_p50"] == 4.0
    assert s["llm_calls_per_turn"] == 0.5
    assert s["llm_calls_per_query"] == 1.0
    by = result.by_category()
    assert math.isnan(by["1"].pop("session_recall"))  # no gold sessions in this data
    assert by["1"] == {"questions": 2, "evidence_recall": 0.5, "answer_containment": 1.0, "token_ratio": 0.2}
    assert by["2"]["token_ratio"] == 0.4
    assert math.isnan(by["2"]["evidence_recall"])
    assert budgets_of(result) == {"d": [10, 30, 20]}
    payload = to_json([result], data=["x.json"], notes=["n"])
    assert payload["data"] == ["x.json"] and payload["notes"] == ["n"]
    assert payload["memories"][0]["summary"]["memory"] == "m"
    assert len(payload["memories"][0]["questions"]) == 3


class FixedStrategy(Strategy):
    """Shows fixed turns, remembers the budgets it was given, counts a fake LLM call per add."""

    name = "fixed"

    def __init__(self, shown: list[int], budget: int | None = None) -> None:
        super().__init__(token_counter=lambda text: len(text.split()))
        self.shown = shown
        self.budgets: list[int | None] = []
        self.made_with = budget

    def _on_add(self, turns: list[Turn]) -> None:
        self._llm_calls += len(turns)

    def _on_reset(self) -> None:
        return None

    def select(self, query: str, *, budget: int | None = None) -> Context:
        self.budgets.append(budget)
        self._llm_calls += 1
        ctx = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        shown = [i for i in self.shown if i < len(self._turns)]
        ctx.blocks.append(
            Block(
                kind="turns",
                turns=tuple(shown),
                messages=tuple(m for i in shown for m in self._turns[i].messages),
                tokens=self.tokens_of(shown),
            )
        )
        return ctx


def dialogue() -> Dialogue:
    messages = []
    for i in range(4):
        messages += [Message("user", f"u{i} alpha"), Message("assistant", f"a{i}")]
    return Dialogue(
        "d1",
        group_turns(messages),
        [Question("q one", "u1 ALPHA", (1, 2), "x"), Question("q two", "u3", (3,), "y")],
    )


def test_run_memory_measures_by_hand():
    made: list[FixedStrategy] = []

    def factory() -> FixedStrategy:
        made.append(FixedStrategy([1]))
        return made[-1]

    steps: list[int] = []
    result = run_memory("fixed", factory, [dialogue()], on_step=steps.append)
    # tokens per turn: "u0 alpha" = 2 + 4 overhead, "a0" = 1 + 4 -> 11; four turns -> 44
    assert [q.tokens for q in result.questions] == [11, 11]
    assert [q.history_tokens for q in result.questions] == [44, 44]
    assert [q.recall for q in result.questions] == [0.5, 0.0]
    assert [q.contained for q in result.questions] == [True, False]
    assert result.llm_calls == 4 and result.query_llm_calls == 2 and result.turns == 4
    assert len(result.add_ms) == 4
    assert sum(steps) == 4 + 2
    assert made[0].budgets == [None, None]
    assert result.summary()["token_ratio"] == 0.25


def test_run_memory_passes_budgets_per_question_or_per_dialogue():
    made: list[FixedStrategy] = []

    def factory(budget: int | None = None) -> FixedStrategy:
        made.append(FixedStrategy([0], budget))
        return made[-1]

    run_memory("q", factory, [dialogue()], budgets={"d1": [7, 9]}, budget_mode="question")
    assert made[-1].budgets == [7, 9] and made[-1].made_with is None
    run_memory("d", factory, [dialogue()], budgets={"d1": [7, 10]}, budget_mode="dialogue")
    assert made[-1].budgets == [None, None] and made[-1].made_with == 8  # round(8.5) == 8
    run_memory("none", factory, [dialogue()], budgets=None, budget_mode="question")
    assert made[-1].budgets == [None, None]


def test_full_history_sees_everything():
    result = run_memory(FULL_HISTORY, None, [dialogue()])
    assert [q.recall for q in result.questions] == [1.0, 1.0]
    assert [q.contained for q in result.questions] == [True, True]
    assert result.summary()["token_ratio"] == 1.0


def test_session_recall_counts_sessions_with_any_turn_shown():
    from ctxmgmt.app.bench.metrics import session_recall

    assert session_recall([(0, 1), (5, 6, 7)], [1, 9]) == 0.5
    assert session_recall([], [1]) is None


def test_dated_question_is_asked_as_the_turn_in_progress_and_fixed_budget_reaches_every_row():
    from ctxmgmt.app.bench.baselines import Baseline, TopKBM25Strategy
    from ctxmgmt.app.bench.runner import run_all

    made: list[FixedStrategy] = []

    def factory() -> FixedStrategy:
        made.append(FixedStrategy([1, 2]))
        return made[-1]

    base = dialogue()
    dated = Dialogue(
        "d2", base.turns, [Question("q", "", (1,), "t", date="2023-06-10", sessions=((0,), (2, 3)))]
    )
    results = run_all(
        [dated],
        memories={"fixed": factory},
        baselines=[Baseline("bm25", lambda: TopKBM25Strategy(token_counter=lambda t: len(t.split())))],
        budget=30,
    )
    full, memory, bm25 = results
    asked = Turn(4, (Message("user", "q", timestamp="2023-06-10"),))
    question_tokens = turn_tokens(made[0].token_counter, asked)
    # as an adapter asks it: never a past turn, sent last, its tokens taken from the budget
    assert len(made[0].turns) == 4 and made[0].budgets == [30 - question_tokens]
    assert memory.questions[0].tokens == made[0].tokens_of([1, 2]) + question_tokens
    assert memory.questions[0].sessions == 0.5 and full.questions[0].sessions == 1.0
    assert memory.questions[0].history_tokens == 44  # the question's own turn is not history
    assert bm25.questions[0].tokens <= 30
