"""The shipped demo conversation, ``run_demo`` and ``plot_relevance``."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import pytest

from ctxmgmt import ConversationMemory, KadaneDialStrategy, Message
from ctxmgmt.app.data import DEMO_FILE, DemoConversation, DemoQuestion, load_demo
from ctxmgmt.messages.exceptions import ConfigurationError

KINDS = {"single-hop", "multi-hop", "temporal", "follow-up"}


@pytest.fixture(scope="module")
def demo() -> DemoConversation:
    return load_demo()


def turn_text(demo: DemoConversation, index: int) -> str:
    return "\n".join(m.text for m in demo.turns[index].messages)


# -- data -------------------------------------------------------------------------------------


def test_demo_loads(demo):
    assert isinstance(demo, DemoConversation)
    assert demo.title
    assert all(isinstance(m, Message) for m in demo.messages)
    assert 120 <= len(demo.turns) <= 160
    assert len(demo.messages) == 2 * len(demo.turns)
    assert [m.role for m in demo.messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert all(turn.is_complete and len(turn.messages) == 2 for turn in demo.turns)


def test_messages_carry_session_dates(demo):
    assert len(demo.session_dates) >= 3
    assert demo.session_starts[0] == 0
    assert demo.session_starts == sorted(set(demo.session_starts))
    for k, start in enumerate(demo.session_starts):
        first = demo.turns[start].messages[0]
        assert first.timestamp == demo.session_dates[k]
        assert first.metadata["session"] == k
        assert demo.date_of(start) == demo.session_dates[k]
    assert all(m.timestamp for m in demo.messages)
    with pytest.raises(IndexError):
        demo.session_of(len(demo.turns))


def test_load_demo_returns_fresh_objects(demo):
    again = load_demo()
    assert again is not demo
    assert again.messages == demo.messages
    assert again.questions == demo.questions


def test_json_file_is_package_data():
    raw = json.loads(resources.files("ctxmgmt.app.data").joinpath(DEMO_FILE).read_text("utf-8"))
    assert set(raw) == {"title", "sessions", "questions"}
    for session in raw["sessions"]:
        assert set(session) == {"date", "turns"}
        assert all(set(t) == {"user", "assistant"} for t in session["turns"])


def test_questions_are_well_formed(demo):
    assert 10 <= len(demo.questions) <= 20
    assert {q.kind for q in demo.questions} == KINDS
    for q in demo.questions:
        assert isinstance(q, DemoQuestion)
        assert q.question.strip().endswith("?")
        assert q.evidence, q.question
        assert list(q.evidence) == sorted(set(q.evidence))
        assert all(0 <= i < len(demo.turns) for i in q.evidence)
    assert all(len(q.evidence) >= 2 for q in demo.questions if q.kind == "multi-hop")


@pytest.mark.parametrize("q", load_demo().questions, ids=lambda q: q.answer)
def test_answer_occurs_in_evidence_turns(demo, q):
    texts = [turn_text(demo, i) for i in q.evidence]
    assert any(q.answer in text for text in texts), (q.question, q.answer, q.evidence)


def test_single_facts_are_stated_once(demo):
    # Single-evidence answers are not repeated elsewhere, so the gold evidence is the only source.
    for q in demo.questions:
        if len(q.evidence) != 1:
            continue
        holders = [i for i in range(len(demo.turns)) if q.answer in turn_text(demo, i)]
        assert holders == list(q.evidence), (q.answer, holders)


# -- run_demo ----------------------------------------------------------------------------------


@pytest.fixture
def quiet_console():
    rich_console = pytest.importorskip("rich.console")
    return rich_console.Console(file=io.StringIO(), width=120, force_terminal=False)


def test_run_demo_records(demo, hashing_embedder, quiet_console):
    from ctxmgmt.app.demo import run_demo, summarise

    records = run_demo(
        strategies={"KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder)},
        console=quiet_console,
    )
    assert len(records) == len(demo.questions)
    history_tokens = {r["history_tokens"] for r in records}
    assert len(history_tokens) == 1 and history_tokens.pop() > 5000
    for k, (record, q) in enumerate(zip(records, demo.questions, strict=True)):
        assert record["strategy"] == "KadaneDialMemory"
        assert record["index"] == k
        assert record["question"] == q.question
        assert record["answer"] == q.answer
        assert record["kind"] == q.kind
        assert record["evidence"] == list(q.evidence)
        assert record["evidence_dates"] == [demo.date_of(i) for i in q.evidence]
        assert record["selected"] == sorted(set(record["selected"]))
        assert record["selected"], q.question
        assert [i for s, e in record["spans"] for i in range(s, e + 1)] == record["selected"]
        assert set(record["evidence_included"]) <= set(record["evidence"])
        assert set(record["evidence_included"]) == set(record["evidence"]) & set(record["selected"])
        assert 0.0 <= record["evidence_recall"] <= 1.0
        assert isinstance(record["answer_in_context"], bool)
        assert 0 < record["context_tokens"] < record["history_tokens"]
        assert record["token_ratio"] == pytest.approx(record["context_tokens"] / record["history_tokens"])
        assert record["select_seconds"] >= 0
        assert record["preview"]
        assert record["plot"] is None
        json.dumps(record)

    output = quiet_console.file.getvalue()
    assert "ctxmgmt demo" in output
    assert demo.questions[0].question[:40] in output
    summary = summarise(records)
    assert set(summary) == {"KadaneDialMemory"}
    assert summary["KadaneDialMemory"]["questions"] == len(demo.questions)
    assert 0 < summary["KadaneDialMemory"]["token_ratio"] < 1


def test_run_demo_several_strategies(demo, hashing_embedder, quiet_console):
    from ctxmgmt.app.demo import run_demo, summarise

    def make():
        return KadaneDialStrategy(embedder=hashing_embedder)

    records = run_demo(strategies={"a": make, "b memory": make}, console=quiet_console)
    n = len(demo.questions)
    assert [r["strategy"] for r in records] == ["a"] * n + ["b memory"] * n
    assert [r["selected"] for r in records[:n]] == [r["selected"] for r in records[n:]]
    assert set(summarise(records)) == {"a", "b memory"}


def test_run_demo_output_fits_80_columns(demo, hashing_embedder):
    rich_console = pytest.importorskip("rich.console")
    from ctxmgmt.app.demo import default_questions, run_demo
    from ctxmgmt.strategies import SWinStrategy

    console = rich_console.Console(file=io.StringIO(), width=80, force_terminal=False)
    records = run_demo(
        strategies={
            "KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder),
            "SWinSummaryBuffer": SWinStrategy,
        },
        console=console,
    )
    output = console.file.getvalue()
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= 80
    shown = default_questions(demo.questions)
    assert sorted({demo.questions[k].kind for k in shown}) == sorted(KINDS)  # one of each kind
    for k, q in enumerate(demo.questions):
        assert (f"Q{k + 1} ({q.kind})" in output) == (k in shown)
    assert len(lines) < 40 + 25 * len(shown)  # short: a stanza per memory, not a wide table
    labels = ", ".join(f"Q{k + 1}" for k in shown)
    assert f"In detail below: {labels} of {len(demo.questions)} questions" in output  # says which
    assert f"All {len(demo.questions)} questions" in output
    for record in records:
        assert record["messages"] >= record["memory_messages"] >= 0
    swin = [r for r in records if r["strategy"] == "SWinSummaryBuffer"]
    # its summary segments and recalled passages, framed as memory
    assert all(r["memory_messages"] >= 1 for r in swin)
    assert "framed as memory" in output


def test_run_demo_show_first_questions(demo, hashing_embedder, quiet_console):
    from ctxmgmt.app.demo import run_demo

    run_demo(
        strategies={"KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder)},
        console=quiet_console,
        show=2,
    )
    output = quiet_console.file.getvalue()
    assert "Q1 (" in output and "Q2 (" in output and "Q3 (" not in output


@pytest.mark.slow
def test_run_demo_writes_one_plot_per_question(demo, hashing_embedder, quiet_console, tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt.app.demo import run_demo

    records = run_demo(
        strategies={"KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder)},
        console=quiet_console,
        plot_dir=tmp_path / "plots",
    )
    assert len(list((tmp_path / "plots").glob("*.png"))) == len(demo.questions)
    for record in records:
        path = Path(record["plot"])
        assert path.parent == tmp_path / "plots"
        assert path.stat().st_size > 0


# -- plot_relevance ----------------------------------------------------------------------------


def test_plot_relevance_writes_png(demo, hashing_embedder, tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt.messages.plot import plot_relevance

    memory = ConversationMemory(KadaneDialStrategy(embedder=hashing_embedder, keep_last=2))
    memory.add_messages(demo.messages)
    q = demo.questions[0]
    context = memory.select(q.question)
    path = plot_relevance(context, tmp_path / "sub" / "relevance.png", evidence=q.evidence)
    assert path == tmp_path / "sub" / "relevance.png"
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_plot_relevance_needs_scores(tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt import Context
    from ctxmgmt.messages.plot import plot_relevance

    with pytest.raises(ConfigurationError):
        plot_relevance(Context(query="q"), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_cli_help_is_plain_text():
    from ctxmgmt.app.cli import build_parser

    text = build_parser().format_help()
    assert "demo" in text and "bench" in text
    assert "``" not in text and ":func:" not in text  # no reST markup on a terminal
