"""``benchmarks/adapter_overhead.py --quick`` on tiny sizes: every surface and memory, the output's shape.

The hashing embedder stands in for MiniLM (no model load); timings are not checked, only that
each row holds what the README reports (cold start, p50/p95/p99 per call) and that the
adapters' strategies really hold the conversation that was loaded and grown.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("adapter_overhead")


@pytest.mark.model  # every memory with its default components
def test_quick_run_reports_every_surface_and_memory(bench: ModuleType, tmp_path: Path) -> None:
    out, png = tmp_path / "rows.json", tmp_path / "overhead.png"
    rows = bench.main(
        [
            "--quick",
            "--turns",
            "12",
            "--calls",
            "2",
            "--embedder",
            "hash",
            "--plot",
            str(png),
            "--json",
            str(out),
        ]
    )
    assert {(r["surface"], r["memory"]) for r in rows} == {
        (s, m) for s in bench.SURFACES for m in bench.MEMORIES
    }
    for row in rows:
        assert row["turns"] == 12 and row["calls"] == 2
        assert row["cold_start_s"] > 0 and row["cold_turns_per_s"] > 0
        assert row["cold_vectors_reused"] == 0
        for kind in ("first", "get", "repeat"):
            assert set(row[kind]) == {"p50", "p95", "p99", "max"}
            assert 0 < row[kind]["p50"] <= row[kind]["p95"] <= row[kind]["p99"] <= row[kind]["max"]
        assert (row["add"] is not None) == (row["surface"] == "langchain_classic")
        # The strategy holds the stored turns plus the two added ones (the block only what
        # Memory flushed into it, at least the stored turns).
        if row["surface"] == "llamaindex_block":
            assert row["strategy_turns"] >= 12
        else:
            assert row["strategy_turns"] == 14
        assert len(row["load_average"]) == 3
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(rows))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
