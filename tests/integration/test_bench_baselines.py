"""Baselines of the benchmark on tiny synthetic dialogues, and ``ctxmgmt bench`` end to end."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.app.bench.baselines import LastKStrategy, TopKDenseStrategy, baselines
from ctxmgmt.app.bench.data import Dialogue, Question
from ctxmgmt.app.bench.runner import FULL_HISTORY, run_all
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message
from ctxmgmt.strategies import KadaneDialStrategy
from tests.helpers import words

TOPICS = ["sourdough starter flour", "kubernetes pod memory", "lisbon flight booking", "beagle vet limp"]


def synthetic(n: int = 40) -> Dialogue:
    messages = []
    for i in range(n):
        topic = TOPICS[(i // 5) % len(TOPICS)]
        messages += [
            Message("user", f"turn {i}: a question about {topic}"),
            Message("assistant", f"an answer about {topic} number {i}"),
        ]
    messages[2 * 12] = Message("user", "turn 12: the guesthouse confirmation code is ZX-981 for lisbon")
    return Dialogue(
        "syn",
        group_turns(messages),
        [
            Question("what is the lisbon guesthouse confirmation code", "ZX-981", (12,), "single"),
            Question("what about the beagle vet limp", "", (15,), "other"),
        ],
    )


def replay(strategy, dialogue):
    for turn in dialogue.turns:
        strategy.add(turn)
    return strategy


def test_last_k_takes_newest_whole_turns_within_budget():
    s = replay(LastKStrategy(token_counter=words), synthetic())
    per_turn = s.tokens_of([39])
    ctx = s.select("anything", budget=3 * per_turn + 1)
    assert ctx.turn_indices == [37, 38, 39]
    assert ctx.tokens <= 3 * per_turn + 1
    assert s.select("anything").turn_indices == list(range(40))


def test_top_k_dense_finds_the_evidence_within_budget(hashing_embedder):
    s = replay(TopKDenseStrategy(embedder=hashing_embedder, token_counter=words), synthetic())
    ctx = s.select("what is the lisbon guesthouse confirmation code", budget=60)
    assert 12 in ctx.turn_indices
    assert ctx.tokens <= 60
    assert ctx.turn_indices == sorted(ctx.turn_indices)
    assert len(s.select("lisbon").turn_indices) == 10  # k without a budget


def framework(name: str, dialogue: Dialogue, budget: int):
    found = {b.name: b for b in baselines(token_counter=words)}
    if name not in found:
        pytest.skip(f"{name}: framework not installed")
    b = found[name]
    strategy = b.factory() if b.budget_mode == "question" else b.factory(budget)
    return replay(strategy, dialogue)


@pytest.mark.parametrize("name", ["LlamaIndex ChatMemoryBuffer", "LangChain trim_messages"])
def test_truncating_frameworks_keep_the_newest_turns(name):
    dialogue = synthetic()
    s = framework(name, dialogue, 0)
    ctx = s.select("q", budget=100)
    assert ctx.turn_indices, name
    assert ctx.turn_indices == list(range(ctx.turn_indices[0], 40))  # a suffix of whole turns
    assert 100 * 0.5 < ctx.tokens <= 100 * 1.5  # framework accounting: no per-message overhead
    assert all(b.kind == "turns" for b in ctx.blocks)
    assert getattr(s, "llm_calls", 0) == 0


@pytest.mark.parametrize("name", ["LlamaIndex ChatSummaryMemoryBuffer", "LangChain SummarizationMiddleware"])
def test_summarising_frameworks_count_their_calls(name):
    dialogue = synthetic()
    s = framework(name, dialogue, 120)
    calls = s.llm_calls
    assert calls >= 1, name  # the history (far above 120 tokens) was summarised at least once
    ctx = s.select("what is the lisbon guesthouse confirmation code")
    kinds = [b.kind for b in ctx.blocks]
    assert "summary" in kinds
    from ctxmgmt.app.bench.framework_baselines import FAKE_SUMMARY

    assert FAKE_SUMMARY in ctx.text()
    assert ctx.turn_indices and ctx.turn_indices[-1] == 39  # newest turns verbatim
    assert 0 not in ctx.turn_indices  # the oldest ones only via the summary
    assert s.llm_calls >= calls


def test_run_all_gives_baselines_the_reference_budget(hashing_embedder):
    dialogue = synthetic()
    results = run_all(
        [dialogue],
        memories={
            "KadaneDialMemory": lambda: KadaneDialStrategy(embedder=hashing_embedder, token_counter=words)
        },
        baselines=baselines(embedder=hashing_embedder, token_counter=words),
    )
    by = {r.memory: r for r in results}
    assert list(by)[:2] == [FULL_HISTORY, "KadaneDialMemory"]
    reference = [q.tokens for q in by["KadaneDialMemory"].questions]
    for name in ("last-k turns (equal tokens)", "top-k dense turns (equal tokens)"):
        assert by[name].kind == "baseline"
        assert all(q.tokens <= b for q, b in zip(by[name].questions, reference, strict=True)), name
    assert by["top-k dense turns (equal tokens)"].questions[0].recall == 1.0
    for r in results:
        assert len(r.questions) == 2
        assert r.summary()["questions"] == 2


def test_bench_modules_do_not_import_frameworks():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import ctxmgmt.app.bench.baselines, ctxmgmt.app.bench.framework_baselines\n"
        "import ctxmgmt.app.bench.runner, ctxmgmt.app.cli\n"
        "loaded = [m for m in sys.modules if m.startswith(('langchain', 'llama_index'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_bench_smoke(tmp_path, monkeypatch, hashing_embedder, capsys):
    import ctxmgmt.components.embedder as embedder_module
    from ctxmgmt.app.cli import main
    from ctxmgmt.strategies.registry import MEMORIES

    monkeypatch.setattr(embedder_module, "default_embedder", lambda: hashing_embedder)
    dialogue = {
        "id": "tiny",
        "turns": [{"user": f"turn {i} about {TOPICS[i % 4]}", "assistant": f"ok {i}"} for i in range(30)],
        "questions": [
            {
                "question": "what about the beagle vet",
                "answer": "beagle",
                "evidence": [3, 7],
                "category": "a",
            },
            {"question": "lisbon flight?", "answer": "lisbon", "evidence": [2], "category": "b"},
        ],
    }
    data = tmp_path / "tiny.jsonl"
    data.write_text(json.dumps(dialogue) + "\n")
    plot = tmp_path / "tradeoff.png"
    code = main(["bench", str(data), "--json", "-", "--no-progress", "--plot", str(plot)])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    names = [m["summary"]["memory"] for m in payload["memories"]]
    assert names[0] == FULL_HISTORY
    assert set(MEMORIES) <= set(names)
    assert "last-k turns (equal tokens)" in names and "top-k dense turns (equal tokens)" in names
    for m in payload["memories"]:
        assert m["summary"]["questions"] == 2
        assert set(m["by_category"]) == {"a", "b"}
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert payload["budget"]

    code = main(["bench", str(data), "--no-baselines", "--no-references", "--no-progress", "--json", "-"])
    assert code == 0
    names = [m["summary"]["memory"] for m in json.loads(capsys.readouterr().out)["memories"]]
    assert names == [FULL_HISTORY, *MEMORIES]


def test_cli_bench_missing_file(tmp_path, capsys):
    from ctxmgmt.app.cli import main

    assert main(["bench", str(tmp_path / "nope.json"), "--no-progress"]) == 2
