"""Smoke-runs every script in examples/ offline and checks what its model was sent.

Each example runs with the offline model of ``examples/_fake.py`` (which records every message
list it is sent) and the bundled weights. The checks look at the model's input for the last
question, at what ``main`` returned and at a few lines of the printed explanation.
"""

from __future__ import annotations

import importlib
import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROLES = {"human": "user", "ai": "assistant"}  # LangChain message types, named as LlamaIndex does


@dataclass
class Run:
    """One example's run: the model's input per call, ``main``'s result and the printed output."""

    calls: list[list[str]]  # per model call, one "role: text" line per message
    result: Any
    out: str
    tmp_path: Path

    @property
    def last(self) -> list[str]:
        """What the model was sent for the last question."""
        return self.calls[-1]

    @property
    def last_text(self) -> str:
        return "\n".join(self.last)


def line(message: Any) -> str:
    """``role: text`` for a LangChain or LlamaIndex message."""
    if hasattr(message, "type"):  # LangChain
        return f"{ROLES.get(message.type, message.type)}: {message.text}"
    return f"{message.role.value}: {message.content}"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_langchain_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are a friendly assistant.")
    assert "user: Hi! I just adopted a grey cat from the shelter and named her Miso." in run.last
    assert run.last[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    assert "barre chords" not in run.last_text and "kitchen" not in run.last_text
    # the weather question ran the tool, and the model was sent its result
    assert any(call[-1] == "tool: Sunny and 24 degrees in Lisbon." for call in run.calls)
    assert len(run.result["messages"]) == 16
    assert "kadanedial:" in run.out


def check_llamaindex_chat_engine(run: Run) -> None:
    assert run.last[0] == "system: You are a friendly assistant. Answer in one or two sentences."
    assert "user: Hi! I just adopted a grey cat from the shelter and named her Miso." in run.last
    assert run.last[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    assert "barre chords" not in run.last_text and "kitchen" not in run.last_text
    assert len(run.result.get_all()) == 12  # the chat store keeps everything
    assert "kadanedial:" in run.out


def check_discourse_tree_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are a friendly travel and coding assistant.")
    assert run.last[1].startswith("system: Summaries of the other topics") and "pandas" in run.last[1]
    assert "user: Which hotels in Rome are close to the Colosseum?" in run.last  # the Rome thread
    assert not any(text.startswith("user: How do I group a pandas") for text in run.last)
    assert run.last[-1].startswith("user: Back to Rome")
    assert len(run.result["messages"]) == 14
    assert "* = active path" in run.out and "Discourse forest: 2 topics" in run.out
    page = run.tmp_path / "discourse_forest.html"
    assert f"The same forest as a web page: {page}" in run.out
    assert 'class="node on-path' in page.read_text(encoding="utf-8")


def check_acm_tiered_agent(run: Run) -> None:
    head, explained = run.out.split("\n\nacm: ", 1)
    tokens = int(head.split("received (", 1)[1].split(" of at most", 1)[0])
    assert tokens <= 400
    assert "user: [3 March, 2024] My sister Priya is visiting from Toronto" in run.last_text  # recalled
    assert "Summary of earlier turns:" in run.last_text
    assert run.last[-1] == "user: Which day is Priya arriving from Toronto?"
    assert "recalled: the query mentions Priya" in explained and "EEC tier" in explained
    assert len(run.result["messages"]) == 22


def check_swin_summary_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are Dana's assistant.")
    summary = next(text for text in run.last if "Summary of the earlier conversation:" in text)
    assert summary.startswith("system:")
    assert "Lea visits me on 14 June" in summary and "allergic to peanuts" in summary  # turn 1, summarised
    assert run.last[-1].startswith("user: When does my sister arrive")
    assert len(run.result["messages"]) == 20
    assert "Summariser LLM calls: 0" in run.out
    assert "window 0 (session 0, turns 0-5)" in run.out


def check_topic_thread_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are Dana's assistant.")
    assert "user: My sister Lea visits me in Porto on 14 June" in run.last_text  # the relevant early turn
    assert run.last[-1] == "user: When does my sister arrive, and what must I avoid cooking for her?"
    assert "lidar" not in run.last_text
    assert len(run.result["messages"]) == 16
    assert "Compressor LLM calls: 0" in run.out
    assert "decay" in run.out.split("Threads, scores and decay:", 1)[1]


EXAMPLE_CASES = [
    # the example, its function or class that builds the offline model, what to check
    ("langchain_agent", "make_model", check_langchain_agent),
    ("llamaindex_chat_engine", "make_llm", check_llamaindex_chat_engine),
    ("discourse_tree_agent", "make_model", check_discourse_tree_agent),
    ("acm_tiered_agent", "make_model", check_acm_tiered_agent),
    ("swin_summary_agent", "OfflineChatModel", check_swin_summary_agent),
    ("topic_thread_agent", "OfflineChatModel", check_topic_thread_agent),
]
EMBEDDING = {"langchain_agent", "llamaindex_chat_engine", "discourse_tree_agent", "topic_thread_agent"}


@pytest.fixture
def bundled_embedder(name, request):
    """Load the bundled embedder in setup (once per session), for the examples that embed."""
    if name in EMBEDDING:
        request.getfixturevalue("default_embedder")


def test_every_example_is_covered() -> None:
    scripts = {path.stem for path in EXAMPLES.glob("*.py") if not path.name.startswith("_")}
    assert scripts == {name for name, _, _ in EXAMPLE_CASES}


@pytest.mark.parametrize(
    ("name", "factory", "check"), EXAMPLE_CASES, ids=[name for name, _, _ in EXAMPLE_CASES]
)
def test_example_runs_offline(name, factory, check, bundled_embedder, monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("CTXMGMT_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where an example writes files
    monkeypatch.syspath_prepend(str(EXAMPLES))  # as when run as a script: `import _fake` works
    module = load(name)
    model = getattr(module, factory)()

    result = module.main(model)

    run = Run(
        calls=[[line(message) for message in messages] for messages in model.received],
        result=result,
        out=capsys.readouterr().out,
        tmp_path=tmp_path,
    )
    history = result["messages"] if isinstance(result, dict) else result.get_all()
    assert len(run.last) < len(history)  # the model was not sent the whole conversation
    # the final answer is the offline model's reply to exactly what it was sent last
    assert line(history[-1]) == "assistant: " + importlib.import_module("_fake").reply_text(len(run.last))
    check(run)
