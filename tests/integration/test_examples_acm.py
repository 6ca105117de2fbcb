"""Smoke-run of examples/acm_tiered_agent.py, offline (fake model, bundled spaCy weights)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acm_tiered_agent.py"


def test_acm_tiered_agent_example_runs_offline(monkeypatch, capsys):
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    head, explained = out.split("\n\nacm: ", 1)
    tokens = int(head.split("received (", 1)[1].split(" of at most", 1)[0])
    assert tokens <= 400
    assert "user: [3 March, 2024] My sister Priya is visiting from Toronto" in head  # recalled
    assert "Summary of earlier turns:" in head
    assert head.rstrip().endswith("user: Which day is Priya arriving from Toronto?")
    assert "recalled: the query mentions Priya" in explained and "EEC tier" in explained
    assert "The agent state still holds all 22 messages." in out
