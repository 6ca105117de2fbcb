"""Smoke-runs every script in examples/ offline and checks what its model was sent.

Each example runs with the offline model of ``examples/_fake.py`` (which records every message
list it is sent) and the bundled weights. The checks look at the model's input for the last
question, at what ``main`` returned and at a few lines of the printed explanation.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sqlite3
import tempfile
import urllib.parse
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ctxmgmt.strategies.acm import ENTITY_HEADER, SUMMARY_HEADER

pytestmark = pytest.mark.model  # every example runs its memories with their default components

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


def active(memory: Any) -> list[str]:
    """The messages still in a LlamaIndex ``Memory``'s queue (the rest went to its blocks)."""
    from llama_index.core.storage.chat_store.sql import MessageStatus

    return [line(message) for message in memory.get_all(status=MessageStatus.ACTIVE)]


def check_llamaindex_swin_agent(run: Run) -> None:
    lea = "user: My sister Lea visits me on 14 June; she is allergic to peanuts."
    assert run.last[0] == "system: You are Dana's assistant. Answer in one or two sentences."
    # Memory flushed turn 1 to the block, which sent it to the LLM only as part of its summary
    assert lea not in active(run.result) and lea not in run.last
    summary = next(text for text in run.last if "Summary of the earlier conversation:" in text)
    assert "Lea visits me on 14 June; she is allergic to peanuts." in summary
    assert run.last[-1] == "user: When does my sister arrive, and what must I avoid cooking for her?"
    assert len(run.result.get_all()) == 20  # Memory's chat store keeps every message
    assert "turns flushed to the block: 6" in run.out
    assert "Summariser LLM calls: 0" in run.out
    assert "window 0 (session 0, turns 0-5)" in run.out


def check_llamaindex_acm_chat_engine(run: Run) -> None:
    assert run.last[0] == "system: You are a helpful assistant."
    assert run.result.last_context.tokens <= 400  # the memory's part, within token_limit
    # the first turn became an entity list; the question needs it, so it came back verbatim
    # (a query span; entity recall would bring it back too with query_share=0)
    assert "user: [3 March, 2024] My sister Priya is visiting from Toronto next Friday." in run.last
    assert any(tier in run.last_text for tier in COMPRESSED_TIERS)
    assert run.last[-1] == "user: Which day is Priya arriving from Toronto?"
    assert "query spans: older turns it needs" in run.out and "entity tier" in run.out
    assert len(run.result.get_all()) == 22


def check_llamaindex_discourse_tree_chat_engine(run: Run) -> None:
    assert run.last[0] == "system: You are a friendly travel and coding assistant. Answer briefly."
    summaries = next(text for text in run.last if "Summaries of the other topics" in text)
    assert "pandas" in summaries
    assert "user: Which hotels in Rome are close to the Colosseum?" in run.last  # the Rome thread
    assert not any(text.startswith("user: How do I group a pandas") for text in run.last)
    assert run.last[-1].startswith("user: Back to Rome")
    assert len(run.result.get_all()) == 14
    assert "* = active path" in run.out and "Discourse forest: 2 topics" in run.out
    page = run.tmp_path / "discourse_forest.html"
    assert f"The same forest as a web page: {page}" in run.out
    assert 'class="node on-path' in page.read_text(encoding="utf-8")


def check_llamaindex_topic_thread_agent(run: Run) -> None:
    lea = "user: My sister Lea visits me in Porto on 14 June; she is allergic to peanuts."
    assert run.last[0] == "system: You are Dana's assistant. Answer in one or two sentences."
    # Memory flushed the first turn to the block; its thread was retrieved for the question
    assert lea not in active(run.result)
    assert lea in run.last
    assert "lidar" not in run.last_text
    assert run.last[-1] == "user: When does my sister arrive, and what must I avoid cooking for her?"
    assert len(run.result.get_all()) == 16
    assert "Compressor LLM calls: 0" in run.out
    assert "thread 0 turns 0" in run.out.split("Threads, scores and decay:", 1)[1]


def check_discourse_tree_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are a friendly travel and coding assistant.")
    summaries = next(text for text in run.last if "Summaries of the other topics" in text)
    assert "pandas" in summaries
    assert "user: Which hotels in Rome are close to the Colosseum?" in run.last  # the Rome thread
    assert not any(text.startswith("user: How do I group a pandas") for text in run.last)
    assert run.last[-1].startswith("user: Back to Rome")
    assert len(run.result["messages"]) == 14
    assert "* = active path" in run.out and "Discourse forest: 2 topics" in run.out
    page = run.tmp_path / "discourse_forest.html"
    assert f"The same forest as a web page: {page}" in run.out
    assert 'class="node on-path' in page.read_text(encoding="utf-8")


COMPRESSED_TIERS = (ENTITY_HEADER, SUMMARY_HEADER)
"""How ACM's entity and summary tiers begin: older turns reach the model through one of them."""


def check_acm_tiered_agent(run: Run) -> None:
    head, explained = run.out.split("\n\nacm: ", 1)
    tokens = int(head.split("received (", 1)[1].split(" of at most", 1)[0])
    assert tokens <= 400
    assert "user: [3 March, 2024] My sister Priya is visiting from Toronto" in run.last_text  # recalled
    assert any(tier in run.last_text for tier in COMPRESSED_TIERS)
    assert run.last[-1] == "user: Which day is Priya arriving from Toronto?"
    assert "query spans: older turns it needs" in explained and "entity tier" in explained
    assert len(run.result["messages"]) == 22


def check_swin_summary_agent(run: Run) -> None:
    assert run.last[0].startswith("system: You are Dana's assistant.")
    summary = next(text for text in run.last if "Summary of the earlier conversation:" in text)
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


def halves(out: str) -> tuple[str, str]:
    """A persistent example's output before and after its restart."""
    before, after = out.split("\n=== Restart", 1)
    return before, after


def check_persistent_agent(run: Run) -> None:
    """Both storage variants: the thread goes on after the restart, its stored turns not embedded again."""
    assert run.last[0] == "system: You are a friendly assistant. Answer in one or two sentences."
    # the first turn, from before the restart, is relevant to the last question and reached the model
    assert "user: Hi! I just adopted a grey cat from the shelter and named her Miso." in run.last
    assert run.last[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    assert "barre chords" not in run.last_text
    assert len(run.calls) == 6  # one model call per question, 4 before the restart and 2 after
    # the new checkpointer gave the new agent the whole thread, and the thread went on
    assert run.result["messages"][0].text.startswith("Hi! I just adopted a grey cat")
    assert len(run.result["messages"]) == 12
    before, after = halves(run.out)
    assert "The checkpointer holds 0 messages of thread 'persistent-example'." in before
    assert "The checkpointer holds 8 messages of thread 'persistent-example'." in after
    # 3 turns were stored before the restart (the 4th ended after the last model call); the new
    # middleware restored them and embedded only the turns that ended after it started
    assert "3 completed turns: 0 restored from the store without embedding, 3 embedded" in before
    assert "5 completed turns: 3 restored from the store without embedding, 2 embedded" in after
    assert "Questions embedded by this process: 2." in after


def stored(db: Any, session: str) -> dict[str, int]:
    """What the store holds for a session: per kind of record (the strategy's name, or "messages"
    for the raw messages a block keeps), how many turns or messages."""
    placeholder = "?" if isinstance(db, sqlite3.Connection) else "%s"
    query = f"SELECT strategy, turns FROM ctxmgmt_sessions WHERE key LIKE {placeholder}"
    return dict(db.execute(query, (f"%:{session}",)).fetchall())


def check_persistent_agent_sqlite(run: Run) -> None:
    check_persistent_agent(run)
    assert "Checkpoints: SQLite" in run.out
    directory = run.tmp_path / "ctxmgmt-persistent-agent"
    with closing(sqlite3.connect(directory / "memories.db")) as db:
        assert stored(db, "persistent-example") == {"kadanedial": 5}
    with closing(sqlite3.connect(directory / "checkpoints.db")) as db:
        query = "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?"
        assert db.execute(query, ("persistent-example",)).fetchone()[0] > 0


def check_persistent_agent_postgres(run: Run) -> None:
    import psycopg

    check_persistent_agent(run)
    assert "Checkpoints: PostgreSQL (PostgresSaver)" in run.out and "NOT in PostgreSQL" not in run.out
    assert not list((run.tmp_path / "ctxmgmt-persistent-agent").iterdir())  # nothing went to SQLite
    with psycopg.connect(os.environ["CTXMGMT_POSTGRES_DSN"]) as db:
        assert stored(db, "persistent-example") == {"kadanedial": 5}
        query = "SELECT COUNT(*) FROM checkpoints WHERE thread_id = %s"
        assert db.execute(query, ("persistent-example",)).fetchone()[0] > 0


def check_persistent_llamaindex_agent(run: Run) -> None:
    from llama_index.core.storage.chat_store.sql import MessageStatus

    miso = "user: Hi! I just adopted a grey cat from the shelter and named her Miso."
    assert run.last[0] == "system: You are a friendly assistant. Answer in one or two sentences."
    assert run.last[-1] == "user: Which vaccinations does my new kitten need at the vet?"
    # Memory flushed the first turn into the block before the restart: after it, the turn is no
    # longer in Memory's queue, so the LLM got it from the block's store
    assert miso in run.last
    assert miso not in [line(m) for m in run.result.get_all(status=MessageStatus.ACTIVE)]
    # the tool turn flushed before the restart came back whole: call, result and answer
    assert "tool: Sunny and 24 degrees in Lisbon." in run.last
    assert "assistant: The tool says: Sunny and 24 degrees in Lisbon." in run.last
    assert len(run.result.get_all()) == 16  # Memory's chat.db keeps every message
    before, after = halves(run.out)
    assert "the block (memories.db) holds 0 flushed messages (0 turns)" in before
    assert "Turns flushed while this process ran: 2; turns this process embedded: 2." in before
    assert "Memory's queue (chat.db) holds 6 messages" in after
    assert "the block (memories.db) holds 6 flushed messages (2 turns)" in after
    assert "The 2 turn(s) flushed before this process started came back from memories.db." in after
    # only the turns flushed after the restart were embedded, none of the 2 restored ones
    assert "Turns flushed while this process ran: 3; turns this process embedded: 3." in after
    directory = run.tmp_path / "ctxmgmt-persistent-llamaindex"
    with closing(sqlite3.connect(directory / "memories.db")) as db:
        # the 12 flushed messages, and derived state for the 5 turns they make up
        assert stored(db, "user-1") == {"messages": 12, "kadanedial": 5}


EXAMPLE_CASES = [
    # the example, its function or class that builds the offline model, what to check
    ("langchain_agent", "make_model", check_langchain_agent),
    ("llamaindex_chat_engine", "make_llm", check_llamaindex_chat_engine),
    ("discourse_tree_agent", "make_model", check_discourse_tree_agent),
    ("acm_tiered_agent", "make_model", check_acm_tiered_agent),
    ("swin_summary_agent", "OfflineChatModel", check_swin_summary_agent),
    ("topic_thread_agent", "OfflineChatModel", check_topic_thread_agent),
    ("persistent_agent", "OfflineChatModel", check_persistent_agent_sqlite),
    ("persistent_agent", "OfflineChatModel", check_persistent_agent_postgres),
    ("persistent_llamaindex_agent", "make_llm", check_persistent_llamaindex_agent),
    ("llamaindex_swin_agent", "OfflineFunctionLLM", check_llamaindex_swin_agent),
    ("llamaindex_acm_chat_engine", "make_llm", check_llamaindex_acm_chat_engine),
    ("llamaindex_discourse_tree_chat_engine", "make_llm", check_llamaindex_discourse_tree_chat_engine),
    ("llamaindex_topic_thread_agent", "OfflineFunctionLLM", check_llamaindex_topic_thread_agent),
]
CASE_IDS = [check.__name__.removeprefix("check_") for _, _, check in EXAMPLE_CASES]
EMBEDDING = {
    "langchain_agent",
    "llamaindex_chat_engine",
    "discourse_tree_agent",
    "topic_thread_agent",
    "persistent_agent",
    "persistent_llamaindex_agent",
    "llamaindex_discourse_tree_chat_engine",
    "llamaindex_topic_thread_agent",
}
POSTGRES = {check_persistent_agent_postgres}  # run with CTXMGMT_POSTGRES_DSN set to a real server


def postgres_url(conninfo: str) -> str:
    """The URL form of a ``key=value`` conninfo (the examples take ``postgresql://`` DSNs)."""
    return "postgresql:///?" + urllib.parse.urlencode(dict(part.split("=", 1) for part in conninfo.split()))


@pytest.fixture
def bundled_embedder(name, request):
    """Load the bundled embedder in setup (once per session), for the examples that embed."""
    if name in EMBEDDING:
        request.getfixturevalue("default_embedder")


@pytest.fixture
def storage(check, request, monkeypatch):
    """``CTXMGMT_POSTGRES_DSN``: the throwaway server for the PostgreSQL cases, unset for the others."""
    monkeypatch.delenv("CTXMGMT_POSTGRES_DSN", raising=False)
    if check in POSTGRES:
        monkeypatch.setenv("CTXMGMT_POSTGRES_DSN", postgres_url(request.getfixturevalue("postgres_dsn")))


def test_every_example_is_covered() -> None:
    scripts = {path.stem for path in EXAMPLES.glob("*.py") if not path.name.startswith("_")}
    assert scripts == {name for name, _, _ in EXAMPLE_CASES}


@pytest.mark.parametrize(("name", "factory", "check"), EXAMPLE_CASES, ids=CASE_IDS)
def test_example_runs_offline(name, factory, check, bundled_embedder, storage, monkeypatch, capsys, tmp_path):
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
