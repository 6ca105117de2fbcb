"""Contract suite every LangChain classic memory of ctxmgmt must pass.

Subclass :class:`LangChainMemoryContract` and implement the ``memory`` fixture (an empty
memory built from keyword overrides) to run every check on a new memory class. Checks about
*relevance* are in ``RelevanceContract`` because summarising memories answer differently.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxmgmt import BudgetExceededError, ConfigurationError, Context, InvalidMessageError, Strategy
from ctxmgmt.scoring.kadane import THETA
from ctxmgmt.strategies.kadanedial import (
    COMMON_SHARE,
    KEEP_LAST,
    LEXICAL_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TUNED_TAU,
    KadaneDialStrategy,
)
from langchain_ctxmgmt import KadaneDialMemory
from tests.helpers import words

TURNS: list[tuple[str, str]] = [
    (
        "I am planning a trip to Kyoto in April to see the cherry blossoms.",
        "April is peak cherry blossom season in Kyoto; book hotels early.",
    ),
    (
        "My sourdough starter smells like acetone.",
        "An acetone smell means the starter is hungry; feed it more often.",
    ),
    ("I adopted a grey cat named Miso from the shelter.", "Miso is a lovely name for a grey shelter cat!"),
    (
        "The car engine makes a rattling noise when cold.",
        "A cold engine rattle often comes from a loose heat shield.",
    ),
    (
        "I am learning guitar chords for a folk song.",
        "Start with G, C and D chords; most folk songs use them.",
    ),
    (
        "My tax return needs receipts for charity donations.",
        "Keep donation receipts; they support the deduction on your tax return.",
    ),
    ("We are repainting the kitchen walls grey.", "Grey kitchen walls pair well with white cabinets."),
    (
        "My marathon training plan peaks at 32 kilometres.",
        "A 32 kilometre long run is a sensible marathon peak.",
    ),
]
"""One topic per turn, no shared content words except where a query targets a turn."""

KADANEDIAL_DEFAULTS = {
    "tau": TUNED_TAU,
    "theta": THETA,
    "keep_last": KEEP_LAST,
    "lexical_weight": LEXICAL_WEIGHT,
    "sharpness": SHARPNESS,
    "neighbour_weight": NEIGHBOUR_WEIGHT,
    "common_share": COMMON_SHARE,
}
"""The tuning parameters of KadaneDialStrategy and their defaults (every adapter repeats them)."""

CAT_QUERY = "What name did I give the grey cat I adopted from the shelter?"
CAT_TURN = 2
ENGINE_QUERY = "What was that rattling noise from the car engine?"
ENGINE_TURN = 3


def fill(memory: BaseMemory, turns: list[tuple[str, str]] = TURNS) -> None:
    for human, ai in turns:
        memory.save_context({"input": human}, {"output": ai})


def turn_of(message: BaseMessage) -> int:
    """Index in TURNS of a saved message."""
    for i, (human, ai) in enumerate(TURNS):
        if message.content in (human, ai):
            return i
    raise AssertionError(f"not a saved message: {message.content!r}")


def sent_tokens(messages: list[BaseMessage]) -> int:
    """Tokens of messages as the memories count them with ``words``: text + 4 per message."""
    return sum(words(m.content) + 4 for m in messages)


class LangChainMemoryContract:
    """Checks every LangChain classic memory of ctxmgmt must pass."""

    memory_class: type[BaseMemory]
    """The memory under test."""
    strategy_class: type[Strategy]
    """The strategy it runs."""
    no_argument_defaults: dict[str, Any] = {}
    """Attributes a memory built with no arguments has, and their values."""

    def fast_components(self, hashing_embedder) -> dict[str, Any]:
        """Arguments every test memory gets unless a test overrides them: fast components."""
        return {"embedder": hashing_embedder}

    @pytest.fixture
    def memory(self, hashing_embedder):
        """An empty memory; call with keyword overrides: ``memory(return_messages=True)``."""

        def make(**overrides):
            return self.memory_class(**{**self.fast_components(hashing_embedder), **overrides})

        return make

    # -- interface -----------------------------------------------------------------------
    def test_works_with_no_arguments(self):
        memory = self.memory_class()
        assert memory.memory_variables == ["history"]
        expected = self.no_argument_defaults
        assert {name: getattr(memory, name) for name in expected} == expected
        assert isinstance(memory.strategy, self.strategy_class) and memory.llm_calls == 0

    def test_is_a_classic_base_memory(self, memory):
        assert isinstance(memory(), BaseMemory)

    def test_memory_variables(self, memory):
        assert memory().memory_variables == ["history"]
        assert memory(memory_key="chat_history").memory_variables == ["chat_history"]

    def test_empty_memory_loads_nothing(self, memory):
        assert memory().load_memory_variables({"input": "hi"}) == {"history": ""}
        assert memory(return_messages=True).load_memory_variables({"input": "hi"}) == {"history": []}

    # -- lossless history --------------------------------------------------------------------
    def test_history_is_lossless(self, memory):
        m = memory(return_messages=True, max_token_limit=30)
        fill(m)
        m.load_memory_variables({"input": CAT_QUERY})
        saved = m.messages
        assert [type(x) for x in saved] == [HumanMessage, AIMessage] * len(TURNS)
        assert [x.content for x in saved] == [text for pair in TURNS for text in pair]

    def test_messages_passed_in_are_kept_as_they_are(self, memory):
        m = memory(return_messages=True)
        human = HumanMessage("I adopted a grey cat named Miso.", id="h-1", additional_kwargs={"lang": "en"})
        ai = AIMessage("Hello Miso!", id="a-1", response_metadata={"model": "fake"})
        m.save_context({"input": human}, {"output": ai})
        assert m.messages[0] is human and m.messages[1] is ai
        history = m.load_memory_variables({"input": "What is my cat called?"})["history"]
        assert history[0] is human and history[1] is ai

    def test_clear(self, memory):
        m = memory(return_messages=True)
        fill(m)
        m.load_memory_variables({"input": CAT_QUERY})
        m.clear()
        assert m.messages == []
        assert m.last_context is None
        assert m.load_memory_variables({"input": CAT_QUERY}) == {"history": []}
        fill(m, TURNS[:1])
        assert len(m.messages) == 2

    # -- both output forms -------------------------------------------------------------------
    def test_return_messages_and_string_agree(self, memory):
        """The string form renders the message form; what a memory adds (summaries, thread
        states, tiers) is a framed memory HumanMessage (ctxmgmt.messages.framing), rendered as ``User:``."""
        as_messages = memory(return_messages=True)
        as_string = memory(return_messages=False, human_prefix="User", ai_prefix="Bot")
        fill(as_messages)
        fill(as_string)
        messages = as_messages.load_memory_variables({"input": CAT_QUERY})["history"]
        text = as_string.load_memory_variables({"input": CAT_QUERY})["history"]
        prefix = {HumanMessage: "User", AIMessage: "Bot", SystemMessage: "System"}
        assert messages and all(type(x) in prefix for x in messages)
        assert text == "\n".join(f"{prefix[type(x)]}: {x.content}" for x in messages)

    def test_string_form_uses_conversation_buffer_prefixes(self, memory):
        m = memory()
        fill(m, TURNS[:1])
        human, ai = TURNS[0]
        assert m.load_memory_variables({"input": "Kyoto cherry blossoms?"})["history"] == (
            f"Human: {human}\nAI: {ai}"
        )

    # -- inputs and outputs ------------------------------------------------------------------
    def test_input_key_is_inferred_and_stop_ignored(self, memory):
        m = memory(return_messages=True)
        m.save_context({"question": "Hello there", "stop": ["\n"]}, {"answer": "Hi!"})
        assert [x.content for x in m.messages] == ["Hello there", "Hi!"]

    def test_explicit_keys(self, memory):
        m = memory(return_messages=True, input_key="question", output_key="answer")
        m.save_context({"question": "Hello there", "lang": "en"}, {"answer": "Hi!", "score": 1})
        assert [x.content for x in m.messages] == ["Hello there", "Hi!"]

    def test_ambiguous_input_keys_are_a_configuration_error(self, memory):
        m = memory()
        with pytest.raises(ConfigurationError, match="input_key"):
            m.save_context({"a": "x", "b": "y"}, {"output": "z"})
        with pytest.raises(ConfigurationError, match="input_key"):
            m.load_memory_variables({"a": "x", "b": "y"})
        with pytest.raises(ConfigurationError, match="output_key"):
            m.save_context({"input": "x"}, {"a": "y", "b": "z"})

    def test_several_outputs_fall_back_to_output(self, memory):
        m = memory(return_messages=True)
        with pytest.warns(UserWarning, match="output"):
            m.save_context({"input": "hi"}, {"output": "hello", "other": "x"})
        assert m.messages[-1].content == "hello"

    @pytest.mark.parametrize(
        ("inputs", "outputs"),
        [
            ({"input": ""}, {"output": "fine"}),
            ({"input": "   "}, {"output": "fine"}),
            ({"input": None}, {"output": "fine"}),
            ({"input": 42}, {"output": "fine"}),
            ({"input": "fine"}, {"output": ""}),
            ({"input": "fine"}, {"output": None}),
        ],
    )
    def test_bad_messages_are_rejected_and_nothing_is_stored(self, memory, inputs, outputs):
        m = memory()
        with pytest.raises(InvalidMessageError):
            m.save_context(inputs, outputs)
        assert m.messages == []

    def test_non_text_query_is_rejected(self, memory):
        with pytest.raises(InvalidMessageError):
            memory().load_memory_variables({"input": ["not", "text"]})

    def test_bad_budget_is_a_configuration_error(self, memory):
        for bad in (0, -5):
            with pytest.raises(ConfigurationError, match="max_token_limit"):
                memory(max_token_limit=bad)

    def test_load_without_input_uses_the_newest_user_message(self, memory):
        m = memory(return_messages=True)
        fill(m)
        history = m.load_memory_variables({})["history"]
        assert m.last_context.query == TURNS[-1][0]
        assert history and all(isinstance(x, BaseMessage) for x in history)

    # -- budget --------------------------------------------------------------------------------
    @pytest.mark.parametrize("budget", [20, 35, 60, 120])
    def test_budget_is_respected(self, memory, budget):
        m = memory(return_messages=True, max_token_limit=budget, token_counter=words)
        fill(m)
        for query in (CAT_QUERY, ENGINE_QUERY, "Tell me everything."):
            history = m.load_memory_variables({"input": query})["history"]
            assert sent_tokens(history) <= budget
            assert m.last_context.tokens <= budget
            if budget >= 35:  # every single turn fits: something is always sent
                assert history

    # -- async parity ------------------------------------------------------------------------
    async def test_async_parity(self, memory):
        sync_memory = memory(return_messages=True)
        async_memory = memory(return_messages=True)
        fill(sync_memory)
        for human, ai in TURNS:
            await async_memory.asave_context({"input": human}, {"output": ai})
        assert [x.content for x in async_memory.messages] == [x.content for x in sync_memory.messages]
        for query in (CAT_QUERY, ENGINE_QUERY):
            expected = [x.content for x in sync_memory.load_memory_variables({"input": query})["history"]]
            got = await async_memory.aload_memory_variables({"input": query})
            assert [x.content for x in got["history"]] == expected
        await async_memory.aclear()
        assert async_memory.messages == []
        assert await async_memory.aload_memory_variables({"input": CAT_QUERY}) == {"history": []}

    async def test_async_work_runs_off_the_event_loop(self, memory, monkeypatch):
        import threading

        m = memory(return_messages=True)
        fill(m)
        threads: list[threading.Thread] = []
        select = m.strategy.select

        def recording_select(*args, **kwargs):
            threads.append(threading.current_thread())
            return select(*args, **kwargs)

        monkeypatch.setattr(m.strategy, "select", recording_select)
        await m.aload_memory_variables({"input": CAT_QUERY})
        assert threads and threads[0] is not threading.main_thread()

    async def test_async_errors_match_sync(self, memory):
        m = memory()
        with pytest.raises(InvalidMessageError):
            await m.asave_context({"input": ""}, {"output": "x"})
        with pytest.raises(ConfigurationError):
            await m.aload_memory_variables({"a": "x", "b": "y"})

    async def test_concurrent_async_loads(self, memory):
        m = memory(return_messages=True)
        fill(m)
        results = await asyncio.gather(
            *(m.aload_memory_variables({"input": q}) for q in (CAT_QUERY, ENGINE_QUERY) * 4)
        )
        assert all(r["history"] for r in results)

    # -- inspection ----------------------------------------------------------------------------
    def test_last_context_and_explain(self, memory):
        m = memory()
        assert m.last_context is None
        assert "no context" in m.explain()
        fill(m)
        m.load_memory_variables({"input": CAT_QUERY})
        assert isinstance(m.last_context, Context)
        assert m.last_context.query == CAT_QUERY
        assert CAT_QUERY in m.explain()
        json.dumps(m.last_context.details)  # plain data


class RelevanceContract:
    """Checks for memories that send past turns verbatim, selected by relevance."""

    def test_relevant_turn_is_returned_and_irrelevant_ones_are_not(self, memory):
        m = memory(return_messages=True)
        fill(m)
        for query, target in ((CAT_QUERY, CAT_TURN), (ENGINE_QUERY, ENGINE_TURN)):
            history = m.load_memory_variables({"input": query})["history"]
            turns = [turn_of(x) for x in history]
            assert target in turns
            assert len(set(turns)) <= 2, f"{query!r} kept turns {sorted(set(turns))}"
            assert turns == sorted(turns)  # chronological
            assert len(history) == 2 * len(set(turns))  # whole turns only

    def test_relevant_turn_survives_a_tight_budget(self, memory):
        human, ai = TURNS[CAT_TURN]
        budget = words(human) + words(ai) + 8
        m = memory(return_messages=True, max_token_limit=budget, token_counter=words)
        fill(m)
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        assert [x.content for x in history] == [human, ai]


class TestKadaneDialMemory(LangChainMemoryContract, RelevanceContract):
    memory_class = KadaneDialMemory
    strategy_class = KadaneDialStrategy
    no_argument_defaults = {"max_token_limit": None, "return_messages": False}

    def test_no_deprecation_warning_by_default(self):
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            KadaneDialMemory()
        assert [str(w.message) for w in caught] == []

    def test_defaults_come_from_the_strategy(self):
        memory = KadaneDialMemory()
        assert {name: getattr(memory, name) for name in KADANEDIAL_DEFAULTS} == KADANEDIAL_DEFAULTS
        strategy = memory.strategy
        assert {name: getattr(strategy, name) for name in KADANEDIAL_DEFAULTS} == KADANEDIAL_DEFAULTS

    def test_parameters_reach_the_strategy(self, hashing_embedder):
        params = {
            "tau": 0.2,
            "theta": 0.5,
            "keep_last": 2,
            "lexical_weight": 0.7,
            "sharpness": 2.0,
            "neighbour_weight": 0.1,
            "common_share": 0.8,
        }
        assert set(params) == set(KADANEDIAL_DEFAULTS)
        strategy = KadaneDialMemory(embedder=hashing_embedder, **params).strategy
        assert {name: getattr(strategy, name) for name in params} == params
        assert strategy.embedder is hashing_embedder

    def test_paper_settings(self, hashing_embedder):
        memory = KadaneDialMemory(
            embedder=hashing_embedder, lexical_weight=0, sharpness=1, neighbour_weight=0, return_messages=True
        )
        fill(memory)
        history = memory.load_memory_variables({"input": CAT_QUERY})["history"]
        assert CAT_TURN in {turn_of(x) for x in history}

    @pytest.mark.parametrize(
        "bad",
        [
            {"keep_last": -1},
            {"lexical_weight": -1.0},
            {"tau": float("nan")},
            {"sharpness": 0.0},
            {"neighbour_weight": -0.5},
        ],
    )
    def test_bad_parameters(self, hashing_embedder, bad):
        with pytest.raises(ValueError):
            KadaneDialMemory(embedder=hashing_embedder, **bad)

    def test_keep_last_returns_the_newest_turns(self, hashing_embedder):
        memory = KadaneDialMemory(embedder=hashing_embedder, keep_last=1, return_messages=True)
        fill(memory)
        history = memory.load_memory_variables({"input": CAT_QUERY})["history"]
        assert turn_of(history[-1]) == len(TURNS) - 1
        assert CAT_TURN in {turn_of(x) for x in history}

    def test_each_turn_is_embedded_once(self, hashing_embedder):
        memory = KadaneDialMemory(embedder=hashing_embedder)
        fill(memory)
        embedded_on_save = sum(hashing_embedder.calls)
        assert embedded_on_save == len(TURNS)  # one new turn per save_context
        for _ in range(3):
            memory.load_memory_variables({"input": CAT_QUERY})
        # only the query, once: a repeated query reuses its embedding
        assert sum(hashing_embedder.calls) == embedded_on_save + 1
        memory.load_memory_variables({"input": "something else entirely"})
        assert sum(hashing_embedder.calls) == embedded_on_save + 2

    def test_accepts_a_langchain_embeddings_object(self):
        from langchain_core.embeddings import DeterministicFakeEmbedding

        memory = KadaneDialMemory(embedder=DeterministicFakeEmbedding(size=32), return_messages=True)
        fill(memory)
        assert memory.load_memory_variables({"input": CAT_QUERY})["history"]

    def test_uses_a_langchain_chat_message_history(self, hashing_embedder):
        from langchain_core.chat_history import InMemoryChatMessageHistory

        store = InMemoryChatMessageHistory()
        memory = KadaneDialMemory(embedder=hashing_embedder, chat_memory=store, return_messages=True)
        fill(memory)
        assert len(store.messages) == 2 * len(TURNS)
        # a second memory over the same store sees (and selects from) the same history
        other = KadaneDialMemory(embedder=hashing_embedder, chat_memory=store, return_messages=True)
        history = other.load_memory_variables({"input": CAT_QUERY})["history"]
        assert CAT_TURN in {turn_of(x) for x in history}

    def test_budget_smaller_than_a_pending_turn_raises(self, hashing_embedder):
        memory = KadaneDialMemory(embedder=hashing_embedder, max_token_limit=5, token_counter=words)
        memory.chat_memory.add_messages([HumanMessage("a pending question that is rather long indeed")])
        with pytest.raises(BudgetExceededError):
            memory.load_memory_variables({"input": "x"})
