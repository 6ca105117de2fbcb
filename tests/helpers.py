"""Helpers that test modules of more than one folder share."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from langchain_core.messages import HumanMessage, SystemMessage
from llama_index.core.base.llms.types import MessageRole

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.messages.framing import MEMORY_LEAD_IN, MEMORY_TAG
from ctxmgmt.messages.types import Message

LI_MEMORIES = [
    li.KadaneDialMemory,
    li.SWinSummaryBuffer,
    li.DiscourseTreeMemory,
    li.ACMTieredBuffer,
    li.TopicThreadMemory,
]
"""The five LlamaIndex memory classes."""
LC_MEMORIES = [
    lc.KadaneDialMemory,
    lc.SWinSummaryBuffer,
    lc.DiscourseTreeMemory,
    lc.ACMTieredBuffer,
    lc.TopicThreadMemory,
]
"""The five LangChain classic memory classes."""

PROPERTY_WITH_FIXTURE = settings(
    database=None,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
"""Hypothesis settings for a property test that takes a function-scoped fixture.

Hypothesis runs every example with the same fixture value; the tests using this only embed
with it (``hashing_embedder``, deterministic), so that is safe. 150 examples, no deadline,
no example database (each run is independent of the ones before).
"""

TOPICS: list[tuple[str, str]] = [
    ("How long should I boil spaghetti pasta?", "Boil spaghetti pasta nine minutes in salted water."),
    ("Which sauce goes with spaghetti pasta?", "A tomato basil sauce suits spaghetti pasta well."),
    ("Should the pasta water be salted?", "Yes, salt the pasta water generously before the spaghetti."),
    ("My car engine makes a rattling noise.", "A rattling engine noise can mean loose heat shields."),
    ("Could the car exhaust cause the rattling?", "Yes, a loose exhaust bracket rattles under the car."),
    ("How much does a car mechanic charge?", "A mechanic charges about one hundred dollars per hour."),
    ("When do I plant tomato seedlings in the garden?", "Plant tomato seedlings outdoors after last frost."),
    ("How often should I water garden tomatoes?", "Water garden tomatoes deeply twice weekly."),
    ("Do tomato plants need stakes?", "Stakes or cages keep tomato plants upright in the garden."),
    ("How do I reverse a list in python?", "Call reversed() or use slicing in python."),
    ("What is a python dictionary comprehension?", "It builds a python dict in one expression."),
    ("How do I read a file in python?", "Use open() in a with block in python to read a file."),
]
"""Twelve (question, answer) turns, three per topic: pasta 0-2, car 3-5, garden 6-8, python 9-11.

Each topic shares its content words, the topics share none, so even a bag-of-words embedder
tells them apart.
"""


def words(text: str) -> int:
    """A token counter for tests: one token per whitespace-separated word."""
    return len(text.split())


MEMORY_HEAD = f"{MEMORY_LEAD_IN}\n<{MEMORY_TAG}>\n"
MEMORY_TAIL = f"\n</{MEMORY_TAG}>"
"""How a framed memory message's text starts and ends (:func:`ctxmgmt.messages.framing.frame_memory`)."""


def memory_body(content: Any) -> str | None:
    """The block text inside a framed memory message's content (escaped), or None if not one.

    Summaries, entity tiers and topic outlines reach the model as
    :func:`ctxmgmt.messages.types.memory_message`: :data:`~ctxmgmt.messages.framing.MEMORY_LEAD_IN`, then the
    block inside the :data:`~ctxmgmt.messages.framing.MEMORY_TAG` tags.
    """
    text = content if isinstance(content, str) else ""
    if text.startswith(MEMORY_HEAD) and text.endswith(MEMORY_TAIL):
        return text[len(MEMORY_HEAD) : -len(MEMORY_TAIL)]
    return None


def is_lc_memory(message: Any) -> bool:
    """A LangChain message the memory wrote: a framed memory ``HumanMessage`` (the default role)."""
    return isinstance(message, HumanMessage) and memory_body(message.content) is not None


def is_li_memory(message: Any) -> bool:
    """A LlamaIndex message the memory wrote: a framed memory ``ChatMessage`` in the user role."""
    return message.role == MessageRole.USER and memory_body(message.content) is not None


def no_system_text(messages: Any, text: str) -> bool:
    """True when no system message of ``messages`` (LangChain or LlamaIndex) holds ``text``."""
    return not any(
        (isinstance(m, SystemMessage) or getattr(m, "role", None) == MessageRole.SYSTEM)
        and text.lower() in str(m.content).lower()
        for m in messages
    )


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as ``<name>_benchmark``, for the tests that drive it."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class GatedEmbedder(HashingEmbedder):
    """A HashingEmbedder whose background batches wait for ``gate``: a slow model, held still.

    Batches of at least ``min_texts`` texts embedded on the background worker's thread
    (``ctxmgmt-backlog``) set ``waiting`` and wait until the test sets ``gate`` (30 s at most).
    """

    def __init__(self, min_texts: int = 1) -> None:
        super().__init__()
        self.min_texts = min_texts
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def embed(self, texts: Any) -> np.ndarray:
        if len(texts) >= self.min_texts and threading.current_thread().name == "ctxmgmt-backlog":
            self.waiting.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts)


def passes_in_forked_child(
    check: Callable[[], bool], *, meanwhile: Callable[[], object] | None = None
) -> bool:
    """Whether ``check()`` returns True in a forked child that then exits cleanly.

    The child reports 0 (True), 2 (False) or 1 (it raised) through a pipe and leaves with
    ``os._exit``; ``meanwhile`` runs in the parent while the child works.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    if meanwhile is not None:
        meanwhile()
    try:
        status = os.read(read, 1)
    finally:
        os.close(read)
        _, exit_status = os.waitpid(pid, 0)
    return status == b"\x00" and os.waitstatus_to_exitcode(exit_status) == 0


CALL: dict[str, Any] = {"id": "call_1", "name": "weather", "args": {"city": "Paris"}}


def user(text: str) -> Message:
    """A core user message."""
    return Message("user", text)


def assistant(text: str) -> Message:
    """A core final assistant answer."""
    return Message("assistant", text)


def tool_call(text: str = "", call: dict | None = None) -> Message:
    """An assistant message that calls a tool (:data:`CALL` by default)."""
    return Message("assistant", text, tool_calls=(call or CALL,))


def tool_result(text: str = "18C and sunny", call_id: str = "call_1") -> Message:
    """The tool's result for ``call_id``."""
    return Message("tool", text, tool_call_id=call_id)
