"""Smoke-run of examples/topic_thread_agent.py, offline (fake model, extractive compression)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "topic_thread_agent.py"


def test_topic_thread_agent_example_runs_offline(default_embedder, monkeypatch, capsys):
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    received = out.split("For the last question the model received:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in received.strip().splitlines()]
    assert lines[0].startswith("system: You are Dana's assistant.")
    assert "user: My sister Lea visits me in Porto on 14 June" in received  # the relevant early turn
    assert lines[-1] == "user: When does my sister arrive, and what must I avoid cooking for her?"
    assert "lidar" not in received
    assert "The agent state still holds all 16 messages." in out
    assert "Compressor LLM calls: 0" in out
    assert "Threads, scores and decay:" in out and "decay" in out.rsplit("Threads", 1)[1]
