"""The ``ctxmgmt`` command (``ctxmgmt.app.cli``): ``bench`` with ``--quick``, ``--dialogues``, ``--cost``,
progress lines and tables that fit 80 columns."""

from __future__ import annotations

import json

import pytest

TOPICS = ["beagle vet", "lisbon flight", "sourdough", "budget"]


@pytest.fixture
def tiny_data(tmp_path, hashing_embedder, monkeypatch):
    """Two small dialogues as JSONL; the default embedder replaced by the hashing one."""
    from ctxmgmt.components import embedder as embedder_module

    monkeypatch.setattr(embedder_module, "default_embedder", lambda: hashing_embedder)
    turns = [{"user": f"turn {i} about {TOPICS[i % 4]}", "assistant": f"ok {i}"} for i in range(20)]
    questions = [
        {"question": "what about the beagle vet", "answer": "beagle", "evidence": [0, 4], "category": "1"},
        {"question": "lisbon flight?", "answer": "lisbon", "evidence": [1], "category": "2"},
    ]
    path = tmp_path / "tiny.jsonl"
    path.write_text(
        "".join(json.dumps({"id": name, "turns": turns, "questions": questions}) + "\n" for name in "ab")
    )
    return path


def test_quick_bench_is_one_dialogue_with_tables_in_80_columns(tiny_data, capsys, monkeypatch):
    from ctxmgmt.app.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["bench", str(tiny_data), "--quick", "--no-baselines"]) == 0
    captured = capsys.readouterr()
    assert "1 dialogues, 20 turns, 2 questions" in " ".join(captured.out.split())
    assert max(len(line) for line in captured.out.splitlines()) <= 80
    assert "0.000" in captured.out and "…" not in captured.out  # no number cut
    assert "by question category" not in captured.out  # the quick run leaves them out
    # stderr is not a terminal here: plain progress lines, one per row at least, and the end
    progress = captured.err.splitlines()
    assert progress[0].startswith("bench: 1/7 full history: 0/")
    assert progress[-1].startswith("bench: done: 7 rows in ")


def test_dialogues_option_and_category_tables(tiny_data, capsys, monkeypatch):
    from ctxmgmt.app.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    argv = ["bench", str(tiny_data), "--dialogues", "2", "--no-baselines", "--no-progress", "--json", "-"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert all(m["summary"]["questions"] == 4 for m in payload["memories"])
    assert "Evidence recall by question category" in captured.err  # tables go to stderr with --json -
    assert captured.err.count("bench: ") == 0


def test_cost_mode_replays_as_a_chat_in_80_columns(tiny_data, capsys, monkeypatch):
    from ctxmgmt.app.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    argv = ["bench", str(tiny_data), "--cost", "--quick", "--no-baselines", "--no-progress", "--json", "-"]
    argv += ["--cached-price", "0.1", "--cached-price", "0.25", "--min-prefix", "0"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["prices"] == [0.1, 0.25] and payload["min_prefix"] == 0
    rows = payload["memories"]
    assert rows[0]["summary"]["memory"] == "full history" and len(rows) == 7  # full, 5 memories, 1 reference
    assert all(len(r["calls"]) == 20 for r in rows)  # one call per user turn of the first dialogue
    assert all("billed_0.25" in r["summary"] and "vs_full_0.1" in r["summary"] for r in rows)
    assert "Cost with prompt caching" in captured.err
    assert max(len(line) for line in captured.err.splitlines()) <= 80
    assert "…" not in captured.err


def test_the_parser_knows_both_commands_and_their_defaults():
    from ctxmgmt.app.cli import build_parser

    parser = build_parser()
    bench = parser.parse_args(["bench", "a.jsonl", "--memory", "KadaneDialMemory", "--no-baselines"])
    assert bench.data == ["a.jsonl"] and bench.memory == ["KadaneDialMemory"] and not bench.baselines
    assert (bench.limit, bench.min_prefix, bench.layout, bench.quick) == (0, 1024, None, False)
    demo = parser.parse_args(["demo", "--questions", "3"])
    assert demo.questions == 3 and demo.plots is None
    with pytest.raises(SystemExit):
        parser.parse_args([])  # a command is required


def test_a_missing_data_file_is_exit_status_2(tmp_path, capsys):
    from ctxmgmt.app.cli import main

    assert main(["bench", str(tmp_path / "nowhere.jsonl"), "--no-progress"]) == 2
    assert "data file not found" in " ".join(capsys.readouterr().out.split())


def test_table_cells_and_row_names_fit_80_columns():
    from ctxmgmt.app.cli import _category_label, _fmt, short_name

    assert short_name("LlamaIndex ChatMemoryBuffer") == "LI ChatMemoryBuffer"
    assert short_name("top-k BM25 turns (equal tokens)") == "top-k BM25 turns"
    assert short_name("KadaneDial (paper settings)") == "KadaneDial (paper)"
    assert (_fmt(0.25, pct=True), _fmt(0.25), _fmt(12.345), _fmt(float("nan")), _fmt(3)) == (
        "25.0%",
        "0.250",
        "12.3",
        "-",
        "3",
    )
    assert (_category_label("2"), _category_label("x"), _category_label("")) == ("2 temporal", "x", "(none)")
