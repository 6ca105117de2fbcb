"""Smoke-run of examples/swin_summary_agent.py, offline (fake model, extractive summaries)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "swin_summary_agent.py"


def test_swin_summary_agent_example_runs_offline(monkeypatch, capsys):
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    received = out.split("For the last question the model received:", 1)[1].split("\n\n", 1)[0]
    assert received.strip().startswith("system: You are Dana's assistant.")
    assert "Summary of the earlier conversation:" in received
    assert "Lea visits me on 14 June" in received and "allergic to peanuts" in received  # turn 1, summarised
    assert received.strip().splitlines()[-1].strip().startswith("user: When does my sister arrive")
    assert "The agent state still holds all 20 messages." in out
    assert "Summariser LLM calls: 0" in out
    assert "window 0 (session 0, turns 0-5)" in out
