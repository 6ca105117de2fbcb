"""The persistence benchmarks on tiny sizes, so CI runs every code path of each.

``benchmarks/restart.py``, ``thread_alternation.py``, ``concurrent_workers.py``,
``kill_recovery.py``, ``resident_memory.py`` and ``store_overhead.py``.

The hashing embedder stands in for MiniLM (no model load); PostgreSQL is the test session's
throwaway server (``postgres_dsn``). The figures are not checked, only the invariants the
benchmark reports: nothing re-derived on restart, equal LLM calls whatever the thread order,
no lost / leaked / duplicated records, no mismatch after kill -9, a bounded pool.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import load_benchmark


@pytest.mark.model  # the benchmark's memories load MiniLM and spaCy
def test_restart_rederives_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    bench = load_benchmark("restart")
    rows = bench.measure(
        turns=24,
        reps=1,
        variants=("DiscourseTreeMemory+llm",),
        pg=postgres_dsn,
        embedder="hash",
        workdir=tmp_path,
        adds=1,
    )
    (row,) = rows
    for backend in ("sqlite", "postgres"):
        restart = row[backend]
        assert restart["turns_held"] == 24
        assert restart["embed_calls"] == restart["llm_calls"] == restart["spacy_calls"] == 0
        assert restart["select_llm_calls"] == row["live_select_llm_calls"]  # the query's own decisions
        assert restart["add_p50_ms_store"] > 0
    assert row["today"]["embedded_texts"] >= 24 and row["today"]["llm_calls"] > 0
    assert row["sqlite_bytes"] > 0 and row["record_rows"] > 0
    assert bench.report(rows).startswith("restart: first sync + select")


def test_thread_alternation_makes_the_same_llm_calls() -> None:
    rows = load_benchmark("thread_alternation").measure(turns=8, embedder="hash")
    assert {r["middleware"] for r in rows} == {
        "SWinSummaryMiddleware",
        "TopicThreadMiddleware",
        "DiscourseTreeMiddleware",
        "ACMTieredMiddleware",
    }
    for r in rows:
        assert r["alternating_llm_calls"] == r["sequential_llm_calls"]
        assert r["same_contexts"]
    assert any(r["sequential_llm_calls"] > 0 for r in rows)
    assert all(r["ratio"] == 1.0 or math.isnan(r["ratio"]) for r in rows)


def test_workers_on_one_postgres_lose_and_leak_nothing(postgres_dsn: str) -> None:
    bench = load_benchmark("concurrent_workers")
    result = bench.measure(pg=postgres_dsn, workers=2, sessions=2, session_turns_=5)
    assert result["in_process"]["turns"] == 20
    for mode in ("postgres_sticky", "postgres_routed"):
        check = result[mode]["check"]
        assert check["missing_sessions"] == check["lost_turns"] == 0
        assert check["sessions_with_leaks"] == check["duplicate_records"] == 0
        assert check["records_not_in_single_writer_rebuild"] == 0
    assert bench.report(result).startswith("2 workers x 2 sessions")


def test_kill_minus_nine_leaves_a_state_equal_to_a_rebuild(postgres_dsn: str, tmp_path: Path) -> None:
    stores = {"sqlite": f"sqlite:{tmp_path / 'kill.db'}", "postgres": f"pg:{postgres_dsn}"}
    result = load_benchmark("kill_recovery").measure(
        stores=stores, trials=4, turns=8, memories=("KadaneDialMemory", "TopicThreadMemory")
    )
    for backend in stores:
        assert result[backend]["trials"] == 4
        assert result[backend]["mismatches"] == result[backend]["chain_mismatches"] == 0
        assert not result[backend]["errors"]


def test_overhead_on_add_per_store(postgres_dsn: str, tmp_path: Path) -> None:
    bench = load_benchmark("store_overhead")
    result = bench.measure(
        prefill=6, adds=3, pg=postgres_dsn, pg_durable=None, embedder="hash", workdir=tmp_path
    )
    assert set(result) >= {"in_process", "sqlite", "postgres"}
    assert result["in_process"]["store_calls_p50_ms"] == 0
    assert result["sqlite"]["store_calls_p50_ms"] > 0
    assert "hashing embedder" in bench.report(result)


def test_command_line_resident_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "figures.json"
    load_benchmark("resident_memory").main(["--rss-sessions", "40", "--rss-bound", "10", "--json", str(out)])
    figures = json.loads(out.read_text())
    assert "errors" not in figures
    bounded = figures["sessions"]["bounded"]
    assert bounded["live_sessions"] == 10 and bounded["reloaded_sessions_embedded_texts"] == 0
    assert figures["sessions"]["unbounded"]["live_sessions"] == 40
    assert "resident memory" in capsys.readouterr().out
