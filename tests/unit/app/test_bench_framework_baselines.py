"""The LangChain and LlamaIndex baselines of the benchmark (``ctxmgmt.app.bench.framework_baselines``).

Replays on data, and the check that importing the module imports no framework, are in
``tests/integration/test_bench_baselines.py``.
"""

from __future__ import annotations

import pytest

from ctxmgmt.app.bench import framework_baselines as fb
from ctxmgmt.app.bench.baselines import LastKStrategy
from ctxmgmt.messages.types import Message, Turn


def turns(n: int = 6) -> list[Turn]:
    return [
        Turn(i, (Message("user", f"question {i} about dogs"), Message("assistant", f"answer {i}")))
        for i in range(n)
    ]


def test_framework_notes_name_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(fb, "_installed", lambda module: False)
    assert not fb.has_llamaindex() and not fb.has_langchain()
    assert fb.framework_notes() == [
        "LlamaIndex baselines skipped: pip install llama-index-core",
        "LangChain baselines skipped: pip install langchain",
    ]
    monkeypatch.setattr(fb, "_installed", lambda module: True)
    assert fb.framework_notes() == []


def test_a_missing_parent_package_is_not_installed() -> None:
    assert fb._installed("no_such_package_xyz.sub") is False


def test_framework_output_maps_back_to_whole_turns_partial_turns_and_summaries() -> None:
    strategy = LastKStrategy()
    strategy.add_many(turns())
    items = [
        (None, None, "system", "Summary so far."),
        (2, 0, "user", "question 2 about dogs"),
        (2, 1, "assistant", "answer 2"),
        (3, 0, "user", "question 3 about dogs"),
        (3, 1, "assistant", "answer 3"),
        (5, 1, "assistant", "answer 5"),
    ]
    context = fb._build_context(strategy, "dogs?", items, "kept")
    kinds = [(b.kind, b.turns, b.reason) for b in context.blocks]
    assert kinds == [
        ("summary", (), "summary written by the framework (fake model)"),
        ("turns", (2, 3), "kept"),  # two whole adjacent turns, one block
        ("turns", (), "kept (part of turn 5)"),  # sent, but no provenance: recall ignores it
    ]
    assert context.turn_indices == [2, 3]
    assert context.blocks[1].tokens == strategy.tokens_of([2, 3])


def test_langchain_trim_keeps_the_newest_turns_within_the_budget() -> None:
    pytest.importorskip("langchain_core")
    strategy = fb.LangChainTrimStrategy()
    strategy.add_many(turns())
    assert strategy.select("dogs?").turn_indices == list(range(6))
    budget = strategy.tokens_of([4, 5])
    assert strategy.select("dogs?", budget=budget).turn_indices == [4, 5]


def test_llamaindex_buffer_keeps_the_newest_messages() -> None:
    pytest.importorskip("llama_index.core")
    strategy = fb.LlamaIndexBufferStrategy()
    strategy.add_many(turns())
    context = strategy.select("dogs?", budget=strategy.tokens_of([4, 5]))
    kept = context.turn_indices
    assert kept and kept == list(range(kept[0], 6)) and kept[0] > 0  # the newest turns, not all
