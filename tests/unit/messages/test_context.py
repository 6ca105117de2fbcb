from __future__ import annotations

import pytest

from ctxmgmt import ConfigurationError, Context, KadaneDialStrategy, Message, Turn

TOPICS = [
    ("How do I repot a fern?", "Use a wider pot and fresh peat-free compost."),
    ("What is a good fern fertiliser?", "A weak liquid feed monthly in summer."),
    ("When is the train to Porto?", "The train to Porto leaves at 9:05."),
    ("Is there a dining car on the Porto train?", "Yes, a dining car in coach 3."),
]


def test_context_plot_writes_png(tmp_path, hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    strategy.add_many(
        [Turn(i, (Message("user", q), Message("assistant", a))) for i, (q, a) in enumerate(TOPICS)]
    )
    context = strategy.select("train to Porto time")
    path = context.plot(str(tmp_path / "signal.png"), evidence=[2])
    data = (tmp_path / "signal.png").read_bytes()
    assert path.endswith("signal.png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pass 1: span" in context.explain()


def test_context_plot_needs_a_signal(tmp_path) -> None:
    with pytest.raises(ConfigurationError):
        Context(query="q").plot(str(tmp_path / "x.png"))
