"""One select call, traced: it goes down through the layers and back up without revisiting a file.

A real ``langchain.agents.create_agent`` run with a ctxmgmt middleware (and a LlamaIndex memory
``get``) is traced with ``sys.setprofile``: every call that crosses into another source file of
the select path is an *entry* into that file. The select path's files are the adapters'
(``langchain_ctxmgmt``, ``llamaindex_ctxmgmt``) and the core's ``session``, ``adapter`` and
``store`` parts. Left out: the parts below (``messages``, ``scoring``, ``components``: data
types and libraries every layer calls) and *callbacks*, the strategy's methods
(``strategies/*``) and the adapter's codec functions the core calls back (an entry from the
core into an adapter package). Repeated entries in a row (a loop over messages) count once.
The issue's trace of one middleware call entered ``conversation.py`` and ``selection.py`` four
times each; here every file is entered once.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "ctxmgmt"
ADAPTERS = (ROOT / "langchain_ctxmgmt", ROOT / "llamaindex_ctxmgmt")
PATH_PARTS = ("session", "adapter", "store")
"""The core's parts a select call passes through (``messages``, ``scoring`` and ``components`` are
libraries every layer calls; ``strategies`` are the strategy's callbacks)."""


def _where(filename: str) -> tuple[str, str] | None:
    """(``"core"`` or ``"adapter"``, path relative to the repository) of one of our files; else None."""
    path = Path(filename)
    if path.is_relative_to(CORE):
        return "core", str(path.relative_to(ROOT))
    if any(path.is_relative_to(a) for a in ADAPTERS):
        return "adapter", str(path.relative_to(ROOT))
    return None


def _on_path(relative: str) -> bool:
    parts = Path(relative).parts
    if parts[0] != "shared":
        return True  # an adapter package
    return parts[2] in PATH_PARTS


class Tracer:
    """Records the files of the select path entered while it is on (see the module docstring)."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _where(frame.f_code.co_filename)
        if callee is None or not _on_path(callee[1]):
            return
        caller_frame = frame.f_back
        caller = None if caller_frame is None else _where(caller_frame.f_code.co_filename)
        if caller is not None and caller[1] == callee[1]:
            return  # within one file
        if caller is not None and caller[0] == "core" and callee[0] == "adapter":
            return  # the core calling the adapter's codec back
        if not self.entries or self.entries[-1] != callee[1]:
            self.entries.append(callee[1])

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)`` traced, in the thread that runs it."""
        previous = sys.getprofile()
        sys.setprofile(self.profile)
        try:
            return function(*args, **kwargs)
        finally:
            sys.setprofile(previous)


@contextmanager
def traced_entries() -> Iterator[list[str]]:
    """The files of the select path entered by this thread while the block runs, in order."""
    tracer = Tracer()
    previous = sys.getprofile()
    sys.setprofile(tracer.profile)
    try:
        yield tracer.entries
    finally:
        sys.setprofile(previous)


def entered_twice(entries: list[str]) -> dict[str, int]:
    """Files entered more than once (strategy modules, the strategy's callbacks, aside)."""
    counts = Counter(e for e in entries if "/strategies/" not in e)
    return {name: n for name, n in counts.items() if n > 1}


def test_entered_twice_counts_a_file_left_and_entered_again() -> None:
    a, b, s = "shared/ctxmgmt/session/a.py", "shared/ctxmgmt/session/b.py", "shared/ctxmgmt/strategies/k.py"
    assert entered_twice([a, b, s, b, s]) == {b: 2}
    assert entered_twice([a, b, s, a]) == {a: 2}


def test_the_tracer_collapses_loops_and_skips_libraries_and_callbacks() -> None:
    from ctxmgmt.messages.history import group_turns
    from ctxmgmt.messages.types import Message
    from ctxmgmt.session.converted import ConvertedHistory
    from ctxmgmt.session.query import split_current

    history: ConvertedHistory[str] = ConvertedHistory(lambda text: Message("user", text), None)
    with traced_entries() as entries:
        history.read(["a", "b", "c"])  # converted.py -> query.py; messages.types is a library
        split_current(group_turns([Message("user", "d")]))
    assert entries == ["shared/ctxmgmt/session/converted.py", "shared/ctxmgmt/session/query.py"]


@pytest.fixture
def default_time_limit(monkeypatch) -> None:
    """The process's default derivation time per call (the suite's conftest lifts it)."""
    import ctxmgmt.session.conversation

    monkeypatch.setattr(ctxmgmt.session.conversation, "INDEX_SECONDS", 0.25)


def test_a_middleware_call_enters_each_file_once(hashing_embedder, default_time_limit) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_ctxmgmt import KadaneDialMiddleware

    tracer = Tracer()
    tracing = threading.Event()

    class TracedMiddleware(KadaneDialMiddleware):
        """Traces its model calls while ``tracing`` is set, in whichever thread LangGraph runs them."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            call = super().wrap_model_call
            return tracer.run(call, request, handler) if tracing.is_set() else call(request, handler)

    middleware = TracedMiddleware(embedder=hashing_embedder, max_tokens=2000)
    model = GenericFakeChatModel(messages=iter([AIMessage(f"Answer {i}.") for i in range(4)]))
    agent = create_agent(
        model, [], system_prompt="Be brief.", middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.")]}, config)
    agent.invoke({"messages": [HumanMessage("The car engine rattles when cold.")]}, config)

    tracing.set()  # a warm call: the conversation and its strategy exist
    result = agent.invoke({"messages": [HumanMessage("What is my cat called?")]}, config)
    entries = tracer.entries

    assert result["messages"][-1].content == "Answer 2."
    assert "shared/ctxmgmt/session/conversation.py" in entries, entries  # the call was traced
    assert entered_twice(entries) == {}, entries
    assert entries[0] == "langchain_ctxmgmt/_middleware.py", entries


def test_a_llamaindex_memory_get_enters_each_file_once(hashing_embedder, default_time_limit) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    from llamaindex_ctxmgmt import KadaneDialMemory

    memory = KadaneDialMemory.from_defaults(embed_model=hashing_embedder)
    for text, answer in [("My cat is called Miso.", "Nice."), ("The engine rattles.", "Check it.")]:
        memory.put(ChatMessage(role="user", content=text))
        memory.put(ChatMessage(role="assistant", content=answer))
    memory.put(ChatMessage(role="user", content="What is my cat called?"))
    memory.get()  # warm: the conversation exists and has derived the turns

    memory.put(ChatMessage(role="assistant", content="Miso."))
    memory.put(ChatMessage(role="user", content="And the engine?"))
    with traced_entries() as entries:
        selected = memory.get()

    assert selected[-1].content == "And the engine?"
    assert "shared/ctxmgmt/session/conversation.py" in entries, entries
    assert entered_twice(entries) == {}, entries
    assert entries[0] == "llamaindex_ctxmgmt/_base.py", entries
