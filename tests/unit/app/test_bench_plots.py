"""The benchmark's pictures and the scaling benchmark script, on tiny inputs."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.types import Message
from tests.helpers import load_benchmark

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_context_any_memory(tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt.messages.plot import plot_context

    context = Context(
        query="what did we book?",
        strategy="x",
        history_tokens=100,
        blocks=[
            Block(kind="summary", turns=(0, 1, 2), text="earlier: planning", tokens=5),
            Block(kind="entities", text="Lisbon", tokens=2),
            Block(kind="turns", turns=(5, 6), messages=(Message("user", "booked"),), tokens=9),
        ],
    )
    path = plot_context(context, tmp_path / "a" / "ctx.png", n_turns=10, evidence=[6])
    assert path.read_bytes().startswith(PNG)


def test_plot_tradeoff_skips_undefined_metrics(tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt.app.bench.plots import plot_tradeoff

    summaries = [
        {"memory": "full history", "kind": "full", "token_ratio": 1.0, "evidence_recall": 1.0},
        {
            "memory": "m",
            "kind": "memory",
            "token_ratio": 0.1,
            "evidence_recall": 0.9,
            "answer_containment": 0.2,
        },
        {"memory": "b", "kind": "baseline", "token_ratio": 0.1, "evidence_recall": float("nan")},
    ]
    assert plot_tradeoff(summaries, tmp_path / "t.png").read_bytes().startswith(PNG)


@pytest.mark.model  # the script builds memories with their default components (real weights)
def test_scaling_script_runs_every_memory(tmp_path, monkeypatch, hashing_embedder):
    pytest.importorskip("matplotlib")
    import ctxmgmt.components.embedder as embedder_module
    from ctxmgmt.strategies.registry import MEMORIES

    monkeypatch.setattr(embedder_module, "default_embedder", lambda: hashing_embedder)
    scaling = load_benchmark("scaling")
    turns = scaling.conversation(300)
    assert len({t.fingerprint for t in turns}) == 300  # repeats are made distinct
    out = tmp_path / "rows.json"
    rows = scaling.main(
        ["--turns", "8", "20", "--queries", "2", "--timed-adds", "4", "--baselines"]
        + ["--plot", str(tmp_path / "s.png"), "--json", str(out)]
    )
    names = {r["memory"] for r in rows}
    assert set(MEMORIES) <= names and "last-k turns (equal tokens)" in names
    assert {r["turns"] for r in rows} == {8, 20}
    assert all(r["add_ms_p50"] >= 0 and r["select_ms_p95"] >= r["select_ms_p50"] for r in rows)
    assert (tmp_path / "s.png").read_bytes().startswith(PNG)
    assert json.loads(out.read_text()) == rows
