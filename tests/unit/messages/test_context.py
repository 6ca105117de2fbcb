"""The context a memory returns (``ctxmgmt.messages.context``): blocks, tokens, receipt, explain, plot."""

from __future__ import annotations

import pytest

from ctxmgmt import ConfigurationError, Context, KadaneDialStrategy, Message, Turn
from ctxmgmt.messages.context import Block

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


def test_blocks_send_their_messages_or_one_framed_memory_message() -> None:
    verbatim = Block("turns", turns=(0,), messages=(Message("user", "hi"), Message("assistant", "hello")))
    assert [m.text for m in verbatim.as_messages()] == ["hi", "hello"]
    summary = Block("summary", turns=(0,), text="- the user said hi", role="assistant")
    (memory,) = summary.as_messages()
    assert memory.role == "assistant" and "- the user said hi" in memory.text and memory.text != summary.text
    assert Block("entities").as_messages() == []


def test_tokens_ratio_and_verbatim_turns() -> None:
    context = Context(
        query="q",
        history_tokens=200,
        blocks=[
            Block("system", messages=(Message("system", "be brief"),), tokens=10),
            Block("summary", turns=(0, 1), text="- earlier", tokens=20),
            Block("turns", turns=(4, 2), messages=(Message("user", "x"),), tokens=30),
            Block("current", turns=(5,), messages=(Message("user", "now?"),), tokens=40),
        ],
    )
    assert context.tokens == 100 and context.token_ratio == 0.5
    assert context.turn_indices == [2, 4, 5]  # summaries are not verbatim turns
    assert Context(query="q").token_ratio == 1.0


def test_messages_and_text_follow_the_block_order() -> None:
    context = Context(
        query="q",
        blocks=[
            Block("summary", text="- earlier"),
            Block("current", turns=(1,), messages=(Message("user", "now?"),)),
        ],
    )
    assert [m.text for m in context.messages()][-1] == "now?"
    assert context.text() == "- earlier\nnow?"


def test_receipt_reports_tokens_and_whether_the_context_is_partial() -> None:
    context = Context(query="q", strategy="s", history_tokens=50, details={"partial": True, "backlog": 7})
    assert context.receipt() == {
        "strategy": "s",
        "tokens": 0,
        "history_tokens": 50,
        "stable_prefix_tokens": 0,
        "partial": True,
        "backlog": 7,
    }


def test_explain_lists_each_block_with_its_span_and_reason() -> None:
    context = Context(
        query="pasta?",
        strategy="demo",
        history_tokens=100,
        blocks=[Block("turns", turns=(0, 1, 2, 5), tokens=25, reason="best span")],
        details={"explain": ["one more line"]},
    )
    lines = str(context).splitlines()
    assert lines[0] == "demo: 25 of 100 tokens (25.0%) for query 'pasta?'"
    assert lines[1] == "  [turns] turns 0-2,5: 25 tokens - best span"
    assert lines[2] == "  one more line"
