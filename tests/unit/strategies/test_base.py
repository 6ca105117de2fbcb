"""Strategy base: block helpers, generic state save/load with hooks, the LLM-call counter."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxmgmt import ConfigurationError, Context, Message, Strategy, Turn
from ctxmgmt.app.data import load_demo
from ctxmgmt.components.budget import message_tokens
from ctxmgmt.messages.framing import frame_memory
from ctxmgmt.strategies import TopicThreadStrategy
from ctxmgmt.strategies.registry import MEMORIES
from tests.helpers import words


def turn(i: int) -> Turn:
    return Turn(i, (Message("user", f"Question {i} about boats?"), Message("assistant", f"Answer {i}.")))


class Counting(Strategy):
    """Counts its turns' words as derived state; no ``_state``/``_load`` (the defaults)."""

    name = "counting"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen = 0
        self.words = 0

    def _on_add(self, turns: list[Turn]) -> None:
        self.seen += len(turns)
        self.words += sum(words(t.text) for t in turns)

    def _on_reset(self) -> None:
        self.words = 0

    def select(self, query: str, *, budget: int | None = None) -> Context:
        context = Context(query=query, strategy=self.name)
        context.blocks.append(self.turns_block(range(len(self)), "all"))
        return context


class Legacy(Counting):
    """A strategy that makes one (pretend) LLM call per turn, counted by the base counter."""

    name = "legacy"

    def _on_add(self, turns: list[Turn]) -> None:
        super()._on_add(turns)
        self._llm_calls += len(turns)


def test_turns_block_shows_whole_turns_with_their_tokens():
    s = Counting(token_counter=words)
    s.add_many([turn(i) for i in range(4)])
    block = s.turns_block([1, 2], "why")
    assert (block.kind, block.turns, block.reason) == ("turns", (1, 2), "why")
    assert block.messages == s.turns[1].messages + s.turns[2].messages
    assert block.tokens == s.tokens_of([1, 2]) and block.text == ""


def test_text_block_counts_its_text_as_one_framed_memory_message():
    s = Counting(token_counter=words)
    block = s.text_block("summary", "Summary:\n- boats", turns=[0, 1], reason="r")
    assert (block.kind, block.turns, block.text, block.reason) == (
        "summary",
        (0, 1),
        "Summary:\n- boats",
        "r",
    )
    sent = block.as_messages()
    assert block.messages == () and len(sent) == 1 and sent[0].role == "user"  # never system by default
    assert sent[0].text == frame_memory("Summary:\n- boats")
    assert block.tokens == message_tokens(s.token_counter, sent[0])


def test_generic_state_round_trip_recomputes_by_default():
    s = Counting(token_counter=words)
    s.add_many([turn(i) for i in range(3)])
    state = json.loads(json.dumps(s.to_state()))
    assert state == {
        "strategy": "counting",
        "config": {},
        "turns": [[m.to_dict() for m in t.messages] for t in s.turns],
        "llm_calls": 0,
        "turn_tokens": [s._turn_tokens],
    }
    restored = Counting(token_counter=words)
    restored.add(turn(9))
    restored.load_state(state)
    assert [t.fingerprint for t in restored.turns] == [t.fingerprint for t in s.turns]
    assert [t.index for t in restored.turns] == [0, 1, 2]
    assert restored.total_tokens == s.total_tokens and restored.words == s.words
    with pytest.raises(ConfigurationError, match="counting"):
        restored.load_state({**state, "strategy": "other"})


def test_llm_calls_are_the_base_counter_and_saved():
    s = Legacy(token_counter=words)
    s.add_many([turn(i) for i in range(3)])
    assert s.llm_calls == s._llm_calls == 3
    state = s.to_state()
    assert state["llm_calls"] == 3
    restored = Legacy(token_counter=words)
    restored._load = lambda state: None  # restore the counter without recomputing
    restored.load_state(state)
    assert restored.llm_calls == 3


def test_clear_turns_keeps_derived_state():
    s = Counting(token_counter=words)
    s.add_many([turn(i) for i in range(3)])
    before = s.words
    s._clear_turns()
    assert len(s) == 0 and s.total_tokens == 0 and s.words == before
    s.reset()
    assert s.words == 0


def test_restore_takes_the_stored_token_counts_and_counts_when_they_are_missing():
    from ctxmgmt import SWinStrategy  # a strategy that restores its own state (no re-adding)

    s = SWinStrategy(token_counter=words)
    s.add_many([turn(i) for i in range(8)])
    derived = s.derived_state()
    assert derived["turn_tokens"] == [[s.tokens_of([i]) for i in range(8)]]

    class Refusing:
        def count(self, text: str) -> int:
            raise AssertionError("restore counted a turn whose count was stored")

    restored = SWinStrategy(token_counter=Refusing())
    restored.restore(s.turns, derived)
    assert restored.total_tokens == s.total_tokens

    older = SWinStrategy(token_counter=words)  # a state stored before counts were kept
    older.restore(s.turns, {k: v for k, v in derived.items() if k != "turn_tokens"})
    assert older.total_tokens == s.total_tokens


def test_stored_config_names_the_components_whose_output_a_state_keeps():
    s = Counting(token_counter=words)
    stored = s.stored_config()
    assert list(stored["built_with"]) == ["token_counter"]  # no embedder: nothing else kept as is
    assert isinstance(stored["built_with"]["token_counter"], str)
    assert json.loads(json.dumps(stored)) == stored


# -- budget_only_trims: a cap can be passed as the budget (one selection instead of two) ----------
def _strategy(cls: type[Strategy], embedder: Any) -> Strategy:
    return cls(embedder=embedder) if "embedder" in cls.components else cls()


@pytest.mark.parametrize("cls", [c for c in MEMORIES.values() if isinstance(c, type) and c.budget_only_trims])
def test_a_budget_the_selection_fits_in_changes_nothing(cls, hashing_embedder):
    demo = load_demo()
    strategy = _strategy(cls, hashing_embedder)
    strategy.add_many(demo.turns)
    for question in demo.questions[:6]:
        unbounded = strategy.select(question.question)
        fitted = strategy.select(question.question, budget=unbounded.tokens)
        roomy = strategy.select(question.question, budget=10 * unbounded.tokens)
        tighter = strategy.select(question.question, budget=unbounded.tokens - 1)
        blocks = [(b.kind, b.turns, b.text) for b in unbounded.blocks]
        assert [(b.kind, b.turns, b.text) for b in fitted.blocks] == blocks
        assert [(b.kind, b.turns, b.text) for b in roomy.blocks] == blocks
        assert tighter.tokens < unbounded.tokens  # the budget cuts


def test_topic_thread_fills_its_budget_so_it_does_not_claim_to_only_trim(hashing_embedder):
    demo = load_demo()
    strategy = TopicThreadStrategy(embedder=hashing_embedder)
    strategy.add_many(demo.turns)
    question = demo.questions[0].question
    unbounded = strategy.select(question)
    trimming = {c.__name__ for c in MEMORIES.values() if isinstance(c, type) and c.budget_only_trims}
    assert trimming == {"KadaneDialStrategy", "DiscourseTreeStrategy", "SWinStrategy"}
    assert strategy.select(question, budget=10 * unbounded.tokens).tokens != unbounded.tokens
