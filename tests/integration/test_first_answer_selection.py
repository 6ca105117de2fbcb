"""Same selection whatever the speed (issue 32, "Right from the first answer").

Each LoCoMo dev dialogue (all four: :data:`QUESTIONS` questions, the split issue 32's margins
are stated on) is put at once into a fresh memory of each of the five kinds, ``from_defaults()``
through ``llamaindex_ctxmgmt`` (and SWin through the LangChain middleware in ``create_agent``),
and every question whose gold evidence lies in it is asked right away, twice:

- **asked at once**: a fake clock makes each call's time limit run out at once
  (``ctxmgmt.session.conversation._monotonic`` moves :data:`TICK` s a read) and the background
  worker takes the backlog but never gets a turn (:class:`StarvedWorker`: a host too busy for
  it; nothing is derived between calls or, while it holds the backlog, by them). So the first
  call derives its untimed first step and one timed step and every answer comes with the rest
  of the history waiting, chosen from by the fast index (``details["partial"]``; DiscourseTree
  and TopicThread: their fast twins). SWin and ACM derive their first 1,000 turns in the call
  whatever the clock (``derive_turns``); ACM's entities wait for the worker;
- **derived first**: ``INDEX_SECONDS = None``, every turn derived before the first answer.

The figure of issue 32 is computed as ``benchmarks/asked_at_once.py`` computes it (its own
``ask_llamaindex``/``ask_langchain`` and ``judge``: strict recall counts a gold turn only
when all its messages are in the context verbatim; answer containment reads the whole context,
summaries included) and must agree within the issue's margin (``TARGETS``: KadaneDial recall
within 0.01, DiscourseTree and TopicThread within 0.02, SWin and ACM containment within
0.005). A memory that misses it today is an ``xfail(strict=True)`` naming the measured figures:
it turns into a failure the day it meets the target, so whoever fixes it flips the mark.

The last test is unit-level and needs no model weights: KadaneDial with a slowed fake encoder
(its clock moves with every text embedded) finds the same gold turn over a forced backlog as
after ``wait_derived()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ctxmgmt.session.conversation as conversation_module
from ctxmgmt import KadaneDialStrategy
from ctxmgmt.app.bench.data import Dialogue, load_dialogues
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.session.conversation import Conversation
from tests.helpers import load_benchmark
from tests.unit.session.test_codec import CODEC, Note
from tests.unit.session.test_conversation import Clock

BENCH: ModuleType = load_benchmark("asked_at_once")

QUESTIONS = 582
"""Questions of the four LoCoMo dev dialogues (1,062 turns) with gold evidence: issue 32's margins
are stated on this split, and one question weighs 0.0017 of a figure. The first dialogue alone
(150 questions, 0.0067 each, asked until 30 November) sent KadaneDial 0.017 below derived first
and DiscourseTree 0.026 above while both were within on the split (docs/results.md). MiniLM
derives each turn once per memory derived first (KadaneDial, DiscourseTree and TopicThread embed
them); asked at once derives none of them in the calls
(:data:`~ctxmgmt.session.conversation.LEAVE_TO_WORKER`)."""
TICK = 1000.0
"""Seconds the fake clock moves per read: every call's time limit (0.25 s; SWin and ACM 3 s)
has run out after its first timed step."""
ROOT = Path(__file__).resolve().parents[2]
DATA_DIRS = (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data")
"""The dev splits beside the repository (a clone, or a worktree one level further down)."""


# -- the two ways of asking ------------------------------------------------------------------------
class StarvedWorker:
    """The background worker on a host too busy to give it a turn: it takes every backlog and
    never derives any of it. A call finds its backlog held and only answers (it derives nothing),
    so every answer after the first comes with the same turns waiting."""

    def __init__(self) -> None:
        self.held: list[Any] = []

    def holds(self, conversation: Any) -> bool:
        return any(c is conversation for c in self.held)

    def submit(self, conversation: Any) -> None:
        if not self.holds(conversation):
            self.held.append(conversation)

    def cancel(self, conversation: Any) -> None:
        self.held = [c for c in self.held if c is not conversation]


@dataclass
class Run:
    """The benchmark's records of one memory's questions, asked one way."""

    records: list[Any]

    def figure(self, name: str) -> float:
        return BENCH.summarise(self.records)[name]


def asked_at_once(patch: pytest.MonkeyPatch) -> None:
    """Every call's time limit runs out at its first timed step; the worker never gets a turn."""
    starved = StarvedWorker()
    patch.setattr(conversation_module, "INDEX_SECONDS", 0.25)  # the shipped default
    patch.setattr(conversation_module, "_monotonic", Clock(TICK))
    patch.setattr(conversation_module, "BACKGROUND", True)
    patch.setattr(conversation_module, "worker", lambda: starved)


def ask(surface: str, memory: str, dialogues: Sequence[Dialogue], *, at_once: bool) -> Run:
    """Put each history into a fresh memory and ask its questions right away (one memory a dialogue)."""
    asking: Callable[..., list[Any]] = (
        BENCH.ask_llamaindex if surface == "llamaindex" else BENCH.ask_langchain
    )
    with pytest.MonkeyPatch.context() as patch:
        if at_once:
            asked_at_once(patch)
        else:
            patch.setattr(conversation_module, "INDEX_SECONDS", None)
        return Run([r for d in dialogues for r in asking(memory, d, d.questions, False)])


# -- the data and the runs, once per module --------------------------------------------------------
@pytest.fixture(scope="module")
def dialogues() -> list[Dialogue]:
    """Every LoCoMo dev dialogue, each with its questions that have gold evidence (a last turn that is
    a user message alone is left out: the first question would join it)."""
    path = next((d / "locomo_dev.json" for d in DATA_DIRS if (d / "locomo_dev.json").exists()), None)
    if path is None:
        message = f"locomo_dev.json not found in {', '.join(map(str, DATA_DIRS))}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = []
    for whole in load_dialogues(path):
        last = whole.turns[-1].messages
        turns = whole.turns[:-1] if len(last) == 1 and last[0].role == "user" else whole.turns
        questions = [q for q in whole.questions if q.evidence and max(q.evidence) < len(turns)]
        out.append(Dialogue(whole.id, turns, questions))
    return out


@pytest.fixture(scope="module")
def dialogue(dialogues: list[Dialogue]) -> Dialogue:
    """The first LoCoMo dev dialogue (213 of its 214 turns)."""
    return dialogues[0]


@pytest.fixture(scope="module")
def runs(default_embedder, dialogues) -> Iterator[Callable[[str, str], tuple[Run, Run]]]:
    """``runs(surface, memory)``: (asked at once, derived first), each computed once per module."""
    import ctxmgmt

    ctxmgmt.warm_up()  # the static encoder, the token counter's table, spaCy: loaded before the runs
    done: dict[tuple[str, str], tuple[Run, Run]] = {}

    def get(surface: str, memory: str) -> tuple[Run, Run]:
        if (surface, memory) not in done:
            at_once = ask(surface, memory, dialogues, at_once=True)  # first: nothing cached before it
            done[(surface, memory)] = (at_once, ask(surface, memory, dialogues, at_once=False))
        return done[(surface, memory)]

    yield get


MISSED: dict[str, str] = {}
"""Cases that miss issue 32's margin on LoCoMo dev today, ``"surface:memory"`` to the figures
measured: none. Asked at once / derived first (30 November): KadaneDial recall 0.9128 / 0.9209
(margin 0.01), DiscourseTree 0.7256 / 0.7178 and TopicThread 0.8627 / 0.8537 (0.02), ACM
containment 0.2921 / 0.2921, SWin 0.2509 / 0.2509 (0.005; through LangChain 0.2423 / 0.2423).
On the first dialogue alone three missed: KadaneDial 0.9133 / 0.9300, DiscourseTree 0.7289 /
0.7033, ACM 0.2000 / 0.2067 (one question, whose entity tier waits for the starved worker). A
case added here is an ``xfail(strict=True)``: it fails as XPASS the day it meets its margin, so
whoever fixes it removes the line."""


CASES = [("llamaindex", m) for m in BENCH.MEMORIES] + [("langchain", "SWin")]
"""(surface, memory): the five LlamaIndex memories, and SWin through the LangChain middleware."""


def cases(*, missed: bool) -> list[Any]:
    """:data:`CASES` as parameters; ``missed``: with the :data:`MISSED` ones marked xfail."""
    out = []
    for surface, memory in CASES:
        why = MISSED.get(f"{surface}:{memory}") if missed else None
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 32: {why}")] if why else []
        out.append(pytest.param(surface, memory, marks=marks, id=f"{surface}-{memory}"))
    return out


DERIVED_IN_CALL = {"SWin", "ACM"}
"""Memories that embed nothing: a call derives their first ``derive_turns`` (1,000) turns whatever
its clock says, so asked at once they hold every turn of a dialogue (at most 340). ACM leaves its
entity extraction to the background worker (starved here): its answers say partial, with no backlog."""


@pytest.mark.model
@pytest.mark.parametrize(("surface", "memory"), cases(missed=False))
def test_asked_at_once_every_answer_comes_while_turns_wait(
    runs, dialogues, surface: str, memory: str
) -> None:
    """The fake clock took effect: every asked-at-once answer said partial with turns waiting
    (SWin and ACM: every turn derived in the call all the same; ACM partial, its entities
    waiting), found gold evidence all the same; derived first, none did."""
    at_once, derived = runs(surface, memory)
    assert len(at_once.records) == sum(len(d.questions) for d in dialogues) == QUESTIONS
    assert all(r.partial for r in at_once.records) == (memory != "SWin")
    if memory in DERIVED_IN_CALL:
        assert max(r.backlog for r in at_once.records) == 0
    else:  # the first call leaves every turn to the worker (LEAVE_TO_WORKER; the fake clock stops it)
        turns = {d.id: len(d.turns) for d in dialogues}
        assert all(r.backlog == turns[r.dialogue] for r in at_once.records)
    assert not any(r.partial or r.backlog for r in derived.records)
    if memory != "SWin":  # SWin shows older turns as summaries: strict recall is near 0 either way
        assert at_once.figure("evidence_recall") > 0.5  # strict recall: gold turns shown verbatim
    assert at_once.figure("answer_containment") > 0


@pytest.mark.model
@pytest.mark.parametrize(("surface", "memory"), cases(missed=True))
def test_same_figure_asked_at_once_as_derived_first(runs, surface: str, memory: str) -> None:
    """Issue 32's figure for the memory, asked at once, within its margin of derived first."""
    at_once, derived = runs(surface, memory)
    figure, margin = BENCH.TARGETS[(memory, "locomo")]
    a, b = at_once.figure(figure), derived.figure(figure)
    assert a > 0 and b > 0
    assert abs(a - b) <= margin + 1e-12, f"{figure}: asked at once {a:.4f}, derived first {b:.4f}"


# -- what the LangChain model received -------------------------------------------------------------
@pytest.mark.model
def test_the_langchain_model_receives_waiting_turns_verbatim_and_the_question_last(
    default_embedder, dialogue, monkeypatch
) -> None:
    """``create_agent`` with ``DiscourseTreeMiddleware``, the history and a question in one invoke,
    asked at once: the fake model receives history messages only as they were sent, waiting
    turns (chosen by its fast twin) among them, the question last; the reply's receipt says
    partial; the agent's state keeps every message."""
    from langchain.agents import create_agent
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_ctxmgmt import DiscourseTreeMiddleware

    class Received(BaseCallbackHandler):
        def __init__(self) -> None:
            self.calls: list[list[Any]] = []

        def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], **kwargs: Any) -> None:
            self.calls.append(list(messages[0]))

    asked_at_once(monkeypatch)
    history = BENCH.langchain_messages(dialogue.turns)
    originals = {
        (m.additional_kwargs[BENCH.TURN_KEY], m.additional_kwargs[BENCH.POS_KEY]): m for m in history
    }
    question = HumanMessage(dialogue.questions[0].text)
    model = GenericFakeChatModel(messages=iter([AIMessage("an answer")]))
    agent = create_agent(model, [], middleware=[DiscourseTreeMiddleware()], checkpointer=InMemorySaver())
    received = Received()
    config: Any = {"configurable": {"thread_id": "first"}, "callbacks": [received]}
    state = agent.invoke({"messages": [*history, question]}, config)

    sent = received.calls[-1]
    assert sent[-1].content == question.content
    tagged = [m for m in sent if BENCH.TURN_KEY in (m.additional_kwargs or {})]
    for m in tagged:  # a history message reaches the model only unchanged
        key = (m.additional_kwargs[BENCH.TURN_KEY], m.additional_kwargs[BENCH.POS_KEY])
        assert m.content == originals[key].content and type(m) is type(originals[key])
    assert max(m.additional_kwargs[BENCH.TURN_KEY] for m in tagged) >= 8  # waiting turns, verbatim
    assert len(tagged) < len(history)
    receipt = state["messages"][-1].response_metadata["ctxmgmt"]
    assert receipt["partial"] and receipt["backlog"] == len(dialogue.turns)  # derived none (LEAVE_TO_WORKER)
    assert len(state["messages"]) == len(history) + 2  # the state keeps the whole history


# -- unit level: a slowed encoder ------------------------------------------------------------------
class SlowedEmbedder(HashingEmbedder):
    """A HashingEmbedder that takes ``seconds`` of ``clock`` per text (a slow model, on a fake clock)."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.clock.now += self.seconds * len(texts)
        return super().embed(texts)


def test_kadanedial_finds_the_same_gold_turn_over_a_forced_backlog_and_after_it_is_derived(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slowed encoder (0.5 s of the fake clock a text) leaves 52 of 60 turns waiting: the fast
    twin sends the gold turn; once the background worker has derived them all, KadaneDial does."""
    clock = Clock(0.0)  # moves only when the encoder works
    monkeypatch.setattr(conversation_module, "_monotonic", clock)
    monkeypatch.setattr(conversation_module, "BACKGROUND", False)  # only calls derive, until we wait
    topics = ["gardening", "cooking", "football", "travel", "music", "painting"]
    history: list[Note] = []
    for i in range(60):
        topic = topics[i % len(topics)]
        history += [
            Note("user", f"tell me more about {topic}, part {i}"),
            Note("assistant", f"{topic} note {i}"),
        ]
    history[2 * 41 : 2 * 41 + 2] = [
        Note("user", "my bike lock code is 4417, keep it for me"),
        Note("assistant", "noted: the bike lock code is 4417"),
    ]
    question = Note("user", "what is my bike lock code?")
    conversation = Conversation(
        "k", KadaneDialStrategy(embedder=SlowedEmbedder(clock, 0.5)), CODEC, index_seconds=0.25
    )

    forced = conversation.select([*history, question]).context
    assert forced.details["partial"] and conversation.backlog == forced.details["backlog"] == 52
    assert len(conversation.strategy) == 8  # the untimed first step and one timed step
    assert forced.details["answered_by"] == "fast KadaneDial" and 41 in forced.turn_indices
    assert 41 >= len(conversation.strategy)  # the gold turn still waits: KadaneDial's twin chose it

    conversation.in_background = True
    assert conversation.wait_derived(timeout=60) and conversation.backlog == 0
    derived = conversation.select([*history, question]).context
    assert not derived.details.get("partial") and 41 in derived.turn_indices
