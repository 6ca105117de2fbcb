"""Smoke-run of examples/langchain_agent.py, offline (fake model, bundled embedder)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain_agent.py"


def test_langchain_agent_example_runs_offline(default_embedder, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    received = out.split("For the last question the model received:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in received.strip().splitlines()]
    assert lines[0].startswith("system: You are a friendly assistant.")
    assert "user: Hi! I just adopted a grey cat" in received  # the relevant early turn
    assert lines[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    assert "barre chords" not in received and "kitchen" not in received
    assert "The agent state still holds all 16 messages." in out
