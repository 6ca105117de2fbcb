"""Pictures of one context (``ctxmgmt.messages.plot``); matplotlib renders with Agg, no display.

``Context.plot`` (which draws with :func:`plot_relevance`) is tested in ``test_context.py``.
"""

from __future__ import annotations

import pytest

from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.plot import _shorten, plot_context, plot_relevance
from ctxmgmt.messages.types import Message

PNG = b"\x89PNG\r\n\x1a\n"


def mixed_context() -> Context:
    return Context(
        query="where did we book the hotel?",
        strategy="test",
        blocks=[
            Block("system", messages=(Message("system", "be brief"),)),
            Block("summary", turns=(0, 1, 2), text="- booked a hotel in Lisbon", tokens=12),
            Block("entities", text="Lisbon | GPE", tokens=5),  # no provenance: drawn at the left edge
            Block(
                "turns", turns=(5, 6), messages=(Message("user", "q"), Message("assistant", "a")), tokens=9
            ),
        ],
        details={"z": [0.1, -0.5, 1.4, 0.2, -1.0, 2.0, 1.1], "spans": [(5, 6)], "recent": [6], "tau": 0.6},
    )


def test_plot_context_draws_any_memorys_blocks(tmp_path) -> None:
    out = plot_context(mixed_context(), tmp_path / "deep" / "blocks.png", evidence=[2, 9])
    assert out == tmp_path / "deep" / "blocks.png"
    assert out.read_bytes()[:8] == PNG


@pytest.mark.filterwarnings("ignore:No artists with labels found:UserWarning")  # matplotlib: nothing to label
def test_plot_context_of_an_empty_context(tmp_path) -> None:
    out = plot_context(Context(query=""), tmp_path / "empty.png", n_turns=0)
    assert out.read_bytes()[:8] == PNG


def test_plot_relevance_draws_the_signal_spans_and_evidence(tmp_path) -> None:
    out = plot_relevance(mixed_context(), str(tmp_path / "signal.png"), evidence=[5, 99])
    assert out.read_bytes()[:8] == PNG


def test_plot_relevance_needs_per_turn_scores(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="no per-turn z scores"):
        plot_relevance(Context(query="q", strategy="SWin"), tmp_path / "x.png")
    with pytest.raises(ConfigurationError):
        plot_relevance(Context(query="q", details={"z": "not a list"}), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_titles_are_one_line_and_shortened() -> None:
    assert _shorten("a  b\nc", 10) == "a b c"
    assert _shorten("x" * 200, 100) == "x" * 99 + "…"
