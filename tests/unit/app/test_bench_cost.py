"""The cost replay of ``ctxmgmt bench --cost`` (ctxmgmt.app.bench.cost)."""

from __future__ import annotations

import pytest

from ctxmgmt import Message, Turn
from ctxmgmt.app.bench.baselines import Baseline, LastKStrategy
from ctxmgmt.app.bench.cost import CallCost, CostResult, _break_even, replay_costs, run_costs
from ctxmgmt.app.bench.data import Dialogue
from ctxmgmt.components.budget import message_tokens


def dialogue(n: int = 30, words: int = 40) -> Dialogue:
    body = " ".join(["word"] * words)
    turns = [
        Turn(i, (Message("user", f"question {i} {body}"), Message("assistant", f"answer {i} {body}")))
        for i in range(n)
    ]
    return Dialogue("d", turns)


def test_full_history_repeats_its_prefix() -> None:
    d = dialogue()
    full = replay_costs("full", None, [d], kind="full", min_prefix=0)
    assert len(full.calls) == len(d.turns)
    first, second = full.calls[0], full.calls[1]
    assert first.cached_tokens == 0  # nothing before the first call
    assert first.input_tokens == first.history_tokens
    # the second call repeats the system prompt and the first user message
    counter = LastKStrategy().token_counter
    system = message_tokens(counter, Message("system", "x")) - counter.count("x")
    assert second.prefix_tokens > first.input_tokens - system
    assert all(c.input_tokens == c.history_tokens for c in full.calls)
    assert full.billed(1.0) == pytest.approx(1.0)
    assert 0.0 < full.billed(0.1) < 0.3


def test_min_prefix_is_billed_in_full_below_it() -> None:
    d = dialogue(8)
    costly = replay_costs("full", None, [d], kind="full", min_prefix=10**6)
    assert all(c.cached_tokens == 0 for c in costly.calls)
    assert costly.billed(0.1) == pytest.approx(1.0)


def test_baselines_get_the_reference_inputs_per_call() -> None:
    d = dialogue(20)

    def last_k() -> LastKStrategy:
        return LastKStrategy()

    results = run_costs(
        [d],
        memories={"window": last_k},
        baselines=[Baseline("same window", last_k)],
        min_prefix=0,
    )
    full, memory, baseline = results
    assert [r.kind for r in results] == ["full", "memory", "baseline"]
    assert [c.input_tokens for c in memory.calls] == [c.input_tokens for c in full.calls]
    assert [c.input_tokens for c in baseline.calls] == [c.input_tokens for c in memory.calls]
    summary = memory.summary(full, (0.1, 0.5))
    assert summary["vs_full_0.1"] == pytest.approx(1.0)
    assert summary["break_even_0.1"]["turns"] is None  # never cheaper than itself


def test_break_even_is_where_the_bill_stays_below() -> None:
    assert _break_even([5.0] * 30, [1.0] * 30) is None
    cheaper_later = [1.0] * 40 + [0.0] * 60
    assert _break_even(cheaper_later, [0.5] * 100) == 31  # the first 20-call window whose mean is below 0
    assert _break_even([0.0] * 5, [1.0] * 5) == 0


def test_summary_shares() -> None:
    calls = [CallCost("d", i, 100, 50, 40, 30, 30 if i else 0) for i in range(4)]
    result = CostResult("m", calls=calls)
    summary = result.summary()
    assert summary["input_tokens_per_call"] == 50
    assert summary["cached_share"] == pytest.approx(90 / 200)
    assert summary["billed_0.1"] == pytest.approx((200 - 90 + 9) / 400)
