"""Smoke-run of examples/llamaindex_chat_engine.py, offline (mock LLM, bundled embedder)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llamaindex_chat_engine.py"


def test_llamaindex_chat_engine_example_runs_offline(default_embedder, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    runpy.run_path(str(EXAMPLE), run_name="__main__")

    out = capsys.readouterr().out
    received = out.split("For the last question the LLM received:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in received.strip().splitlines()]
    assert lines[0] == "system: You are a friendly assistant. Answer in one or two sentences."
    assert "user: Hi! I just adopted a grey cat" in received  # the relevant early turn
    assert lines[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    assert "barre chords" not in received and "kitchen" not in received
    assert "(offline model) I was sent" in out
    assert "The chat store still holds all 12 messages." in out
    assert "kadanedial:" in out  # the explanation
