"""``ctxmgmt bench --cost`` with every baseline, the framework ones included, on a short dialogue."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy, Message, Turn
from ctxmgmt.app.bench.baselines import baselines
from ctxmgmt.app.bench.cost import run_costs
from ctxmgmt.app.bench.data import Dialogue


def test_every_baseline_replays_as_a_chat(hashing_embedder) -> None:
    turns = [
        Turn(i, (Message("user", f"question {i} about topic {i % 3}"), Message("assistant", f"answer {i}")))
        for i in range(12)
    ]
    rows = baselines(embedder=hashing_embedder, frameworks=True)
    results = run_costs(
        [Dialogue("d", turns)],
        memories={"KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder)},
        baselines=rows,
        min_prefix=0,
    )
    assert [r.memory for r in results[2:]] == [b.name for b in rows]
    full = results[0]
    for result in results:
        assert len(result.calls) == len(turns)
        summary = result.summary(full)
        assert 0.0 < summary["billed_0.1"] <= 1.0
