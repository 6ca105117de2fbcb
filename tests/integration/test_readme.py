"""Every ```python block of README.md runs as written, offline, shows what it says it shows, and
warns of nothing deprecated (with Python's default warning filters, as a user's script runs).

The blocks run in one subprocess (so the embedding model loads once), each in a fresh namespace
with its own captured output, in a temporary directory, with sockets to the network refused.
A LlamaIndex instrumentation handler a block registers is removed after it, so blocks do not
print into each other's output.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model  # the blocks load MiniLM and spaCy (in a subprocess)

README = Path(__file__).resolve().parents[2] / "README.md"
TIMEOUT = 280  # seconds for every block together (the test's own timeout is 300)

RUNNER = r"""
import contextlib, io, json, socket, sys, traceback, warnings

def refuse(self, address, *args, **kwargs):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise OSError(f"network access from a README block: {address}")
    return connect(self, address, *args, **kwargs)

connect = socket.socket.connect
socket.socket.connect = refuse
results = []
for number, code in enumerate(json.load(sys.stdin)):
    handlers = None
    if "llama_index.core.instrumentation" in sys.modules:
        from llama_index.core.instrumentation import get_dispatcher
        handlers = list(get_dispatcher().event_handlers)
    out = io.StringIO()
    error = None
    with warnings.catch_warnings(record=True) as caught:  # the default filters: what a user sees
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"README.md python block {number}", "exec"), {"__name__": "__main__"})
        except BaseException:
            error = traceback.format_exc()
    deprecated = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
    shown = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, deprecated)]
    if "llama_index.core.instrumentation" in sys.modules:
        from llama_index.core.instrumentation import get_dispatcher
        dispatcher = get_dispatcher()
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h in (handlers or [])]
    results.append({"out": out.getvalue(), "error": error, "deprecated": shown})
sys.stdout.write(json.dumps(results))
"""


def python_blocks(text: str) -> list[str]:
    """The code of every fenced block opened with ```python, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def block_id(code: str) -> str:
    """A test id from what the block imports from the project."""
    names = re.findall(r"^from (langchain_ctxmgmt|llamaindex_ctxmgmt|ctxmgmt) import (.+)$", code, re.M)
    uses_memory = re.search(r"(?<!\w)Memory\.from_defaults", code) is not None  # LlamaIndex's Memory
    return "+".join(f"{pkg}.{items}" for pkg, items in names) + ("+Memory" if uses_memory else "")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[dict[str, str | None]]:
    """Each block's output, traceback (None when it ran) and deprecation warnings, from one subprocess."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("PYTHONWARNINGS", None)
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(BLOCKS),
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("readme"),
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def calls(out: str, marker: str) -> list[list[str]]:
    """The printed model inputs: per call, one ``role: text`` line per message."""
    found: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith(marker):
            found.append([])
        elif line.startswith("  ") and found:
            found[-1].append(line.strip())
    return found


LEA = "My sister Lea visits me in Porto on 14 June; she is allergic to peanuts."
QUESTION = "When does my sister arrive, and what must I avoid cooking for her?"


def test_readme_has_an_example_per_framework_surface():
    ids = [block_id(code) for code in BLOCKS]
    assert "langchain_ctxmgmt.KadaneDialMiddleware" in ids
    assert "langchain_ctxmgmt.KadaneDialMemory" in ids
    assert "langchain_ctxmgmt.KadaneDialSelector" in ids
    assert "llamaindex_ctxmgmt.KadaneDialMemory" in ids
    assert "llamaindex_ctxmgmt.KadaneDialBlock, flush_early+Memory" in ids
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.parametrize("number", range(len(BLOCKS)), ids=[block_id(code) for code in BLOCKS])
def test_readme_block_runs(runs, number):
    assert runs[number]["error"] is None, runs[number]["error"]
    assert runs[number]["out"], "a README example prints what it shows"
    assert not runs[number]["deprecated"], runs[number]["deprecated"]


def output_of(runs: list[dict[str, str | None]], name: str) -> str:
    number = [block_id(code) for code in BLOCKS].index(name)
    assert runs[number]["error"] is None, runs[number]["error"]
    return str(runs[number]["out"])


def test_agent_middleware_sends_the_relevant_turn(runs):
    out = output_of(runs, "langchain_ctxmgmt.KadaneDialMiddleware")
    sent = calls(out, "the model receives")
    assert len(sent) == 5
    assert sent[-1][0] == f"human: {LEA}" and sent[-1][-1] == f"human: {QUESTION}"
    assert not any("Vespa" in line or "lidar" in line for line in sent[-1])
    assert "10 messages in the agent's state" in out


def test_selector_in_a_chain(runs):
    out = output_of(runs, "langchain_ctxmgmt.KadaneDialSelector").splitlines()
    selected = ast.literal_eval(out[0])
    assert selected[0] == "You are Dana's assistant." and LEA in selected and selected[-1] == QUESTION
    assert not any("Vespa" in text or "lidar" in text for text in selected)
    assert out[1] == "On 14 June; no peanuts."


def test_classic_memory_sends_the_relevant_turn(runs):
    out = output_of(runs, "langchain_ctxmgmt.KadaneDialMemory")
    last = ast.literal_eval(out.strip().splitlines()[-1])  # the printed "type: text" strings
    assert last[0] == "system: You are Dana's assistant."
    assert f"human: {LEA}" in last and last[-1] == f"human: {QUESTION}"
    assert not any("Vespa" in line for line in last)


def test_chat_engine_memory_sends_the_relevant_turn(runs):
    out = output_of(runs, "llamaindex_ctxmgmt.KadaneDialMemory")
    sent = calls(out, "the LLM receives")
    assert len(sent) == 4
    assert f"user: {LEA}" in sent[-1] and sent[-1][-1] == f"user: {QUESTION}"
    assert not any("Vespa" in line for line in sent[-1])
    assert "8 messages in the memory's chat store" in out


def test_memory_block_sees_the_conversation_early(runs):
    out = output_of(runs, "llamaindex_ctxmgmt.KadaneDialBlock, flush_early+Memory")
    sent = calls(out, "the LLM receives")
    assert len(sent) == 5
    # fourth call: the Lea turn was flushed to the block, which left it out for the lidar question
    assert f"user: {LEA}" not in sent[3]
    # last call: the block brought it back, before the queue's recent turns
    assert sent[-1][0] == f"user: {LEA}" and sent[-1][-1] == f"user: {QUESTION}"
    assert not any("hike" in line for line in sent[-1])


def test_core_explains_its_choice(runs):
    out = output_of(runs, "ctxmgmt.ConversationMemory, KadaneDialStrategy, Message")
    assert "Her vet appointment is on Friday at 4 pm." in out.splitlines()[0]
    assert "kadanedial:" in out
