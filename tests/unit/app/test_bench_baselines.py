"""Framework-free baselines of the benchmark (``ctxmgmt.app.bench.baselines``).

The framework baselines are tested in ``test_bench_framework_baselines.py`` and, replayed on
data, in ``tests/integration/test_bench_baselines.py``.
"""

from __future__ import annotations

from ctxmgmt.app.bench.baselines import (
    Baseline,
    LastKStrategy,
    TopKBM25Strategy,
    TopKDenseStrategy,
    baselines,
    framework_baselines,
    turn_blocks,
)
from ctxmgmt.app.bench.framework_baselines import has_langchain, has_llamaindex
from ctxmgmt.messages.types import Message, Turn

TOPICS = ["beagle vet visit", "lisbon flight booking", "sourdough starter feeding", "monthly budget"]


def turns(n: int = 8) -> list[Turn]:
    return [
        Turn(i, (Message("user", f"question {i} about the {TOPICS[i % 4]}"), Message("assistant", f"ok {i}")))
        for i in range(n)
    ]


def test_turn_blocks_are_one_block_per_run_of_turns() -> None:
    strategy = LastKStrategy()
    strategy.add_many(turns())
    blocks = turn_blocks(strategy, [0, 1, 2, 5], "why")
    assert [b.turns for b in blocks] == [(0, 1, 2), (5,)]
    assert all(b.kind == "turns" and b.reason == "why" for b in blocks)


def test_last_k_sends_the_newest_turns_that_fit() -> None:
    strategy = LastKStrategy()
    strategy.add_many(turns())
    assert strategy.select("anything").turn_indices == list(range(8))
    budget = strategy.tokens_of([5, 6, 7])
    assert strategy.select("anything", budget=budget).turn_indices == [5, 6, 7]
    assert strategy.select("anything", budget=budget - 1).turn_indices == [6, 7]


def test_top_k_bm25_sends_the_best_matching_turns_in_order() -> None:
    strategy = TopKBM25Strategy(k=2)
    strategy.add_many(turns())
    context = strategy.select("how was the lisbon flight booking?")
    assert context.turn_indices == [1, 5]
    assert len(context.details["scores"]) == 8
    assert TopKBM25Strategy().select("empty").blocks == []


def test_top_k_dense_ranks_by_cosine_within_the_budget(hashing_embedder) -> None:
    strategy = TopKDenseStrategy(embedder=hashing_embedder, k=3)
    strategy.add_many(turns())
    assert len(strategy.select("sourdough starter feeding").turn_indices) == 3
    one = strategy.tokens_of([2])
    context = strategy.select("sourdough starter feeding", budget=one)
    assert context.tokens <= one and len(context.turn_indices) == 1


def test_baselines_are_listed_in_display_order_without_frameworks() -> None:
    listed = baselines(frameworks=False)
    assert [b.name for b in listed] == [
        "last-k turns (equal tokens)",
        "top-k dense turns (equal tokens)",
        "top-k BM25 turns (equal tokens)",
    ]
    assert all(isinstance(b, Baseline) and b.budget_mode == "question" for b in listed)
    assert isinstance(listed[0].factory(), LastKStrategy)


def test_framework_baselines_follow_what_is_installed() -> None:
    names = [b.name for b in framework_baselines()]
    assert ("LlamaIndex ChatMemoryBuffer" in names) == has_llamaindex()
    assert ("LangChain trim_messages" in names) == has_langchain()
    modes = {b.name: b.budget_mode for b in framework_baselines()}
    assert all(mode == "dialogue" for name, mode in modes.items() if "Summar" in name)
