"""Smoke-run of examples/discourse_tree_agent.py, offline (fake model, bundled embedder)."""

from __future__ import annotations

import runpy
import tempfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "discourse_tree_agent.py"


def test_discourse_tree_example_runs_offline(default_embedder, monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the example writes its HTML page

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    received = out.split("For the last question the model received:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in received.strip().splitlines()]
    assert lines[0].startswith("system: You are a friendly travel and coding assistant.")
    assert lines[1].startswith("system: Summaries of the other topics")
    assert "pandas" in received  # the other topic, summarised
    assert "user: Which hotels in Rome are close to the Colosseum?" in received  # the Rome thread
    assert lines[-1].startswith("user: Back to Rome")
    assert "The agent state still holds all 14 messages." in out
    assert "* = active path" in out and "Discourse forest: 2 topics" in out
    page = tmp_path / "discourse_forest.html"
    assert f"The same forest as a web page: {page}" in out
    assert 'class="node on-path' in page.read_text(encoding="utf-8")
