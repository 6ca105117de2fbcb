"""The adapter contract suites run on the discourse-tree memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ctxmgmt import ConfigurationError
from ctxmgmt.components.decider import THETA_FORK, EmbeddedDecider, LLMDecider
from ctxmgmt.strategies.discourse_tree import DiscourseTreeConfig, DiscourseTreeStrategy
from langchain_ctxmgmt import DiscourseTreeMemory as LCDiscourseTreeMemory
from llamaindex_ctxmgmt import DiscourseTreeMemory as LIDiscourseTreeMemory
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, LangChainMemoryContract, fill
from tests.adapters.test_llamaindex_contract import (
    LlamaIndexMemoryContract,
    OwnMessagesFirstContract,
    ask,
    turns_present,
)
from tests.helpers import is_lc_memory, memory_body

CANDIDATES, SUMMARY_ITEMS = (DiscourseTreeConfig.param(n).default for n in ("candidates", "summary_items"))


class TestLangChainDiscourseTreeMemory(LangChainMemoryContract):
    memory_class = LCDiscourseTreeMemory
    strategy_class = DiscourseTreeStrategy
    no_argument_defaults = {
        "theta_fork": THETA_FORK,
        "candidates": CANDIDATES,
        "summary_items": SUMMARY_ITEMS,
    }

    def fast_components(self, hashing_embedder):
        # The bag-of-words test embedder's cosines are far below MiniLM's, where the
        # default shift model is calibrated; the threshold rules fit them.
        return {"embedder": hashing_embedder, "decider": EmbeddedDecider(shift_model=None)}

    def test_messages_passed_in_are_kept_as_they_are(self, memory):
        """As the contract, with a query the (bag-of-words) test embedder places in the cat topic."""
        m = memory(return_messages=True)
        human = HumanMessage("I adopted a grey cat named Miso.", id="h-1", additional_kwargs={"lang": "en"})
        ai = AIMessage("Hello Miso!", id="a-1", response_metadata={"model": "fake"})
        m.save_context({"input": human}, {"output": ai})
        history = m.load_memory_variables({"input": "What is the name of the grey cat I adopted?"})["history"]
        assert history[0] is human and history[1] is ai

    def test_no_arguments_give_the_embedded_decider(self):
        assert isinstance(LCDiscourseTreeMemory().strategy.decider, EmbeddedDecider)

    def test_one_topic_per_turn_gives_summaries_and_the_cat_turn(self, memory):
        m = memory(return_messages=True)
        fill(m)  # 8 unrelated topics
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        # the topic summaries: a framed user-role memory message, never a system message
        assert is_lc_memory(history[0]) and "Topic" in memory_body(history[0].content)
        assert not any(isinstance(x, SystemMessage) for x in history)
        assert [x.content for x in history[1:]] == list(TURNS[2])  # switch back to the cat topic
        assert m.last_context.details["plan"]["topic"]["action"] == "switch"
        assert "Discourse forest" in m.strategy.explain()

    @pytest.mark.parametrize(
        "bad", [{"theta_fork": 5}, {"candidates": 0}, {"summary_words": 0}, {"llm": "gpt"}, {"decider": 1}]
    )
    def test_bad_parameters(self, bad):
        with pytest.raises(ConfigurationError):
            LCDiscourseTreeMemory(**bad)

    def test_decider_callable_is_wrapped(self, hashing_embedder):
        m = LCDiscourseTreeMemory(embedder=hashing_embedder, decider=lambda prompt: '{"action": "create"}')
        assert isinstance(m.strategy.decider, LLMDecider)
        fill(m, TURNS[:3])
        assert [n.tree for n in m.strategy.nodes] == [0, 1, 2] and m.llm_calls == 2


class TestLlamaIndexDiscourseTreeMemory(OwnMessagesFirstContract, LlamaIndexMemoryContract):
    own_messages = 1  # the summary of the other topics

    @pytest.fixture
    def memory(self, hashing_embedder):
        return LIDiscourseTreeMemory.from_defaults(embed_model=hashing_embedder)

    def test_sourdough_query_gets_the_sourdough_thread(self, default_embedder):
        """With the real embedder and the default decider (calibrated for MiniLM's cosines)."""
        selected = ask(LIDiscourseTreeMemory.from_defaults(embed_model=default_embedder))
        assert turns_present(selected) == {0, 1, 2}
        assert "Topic" in selected[0].content and "marathon" in selected[0].content.lower()

    def test_defaults_and_parameters(self, hashing_embedder):
        memory = LIDiscourseTreeMemory()
        assert (memory.theta_fork, memory.candidates) == (THETA_FORK, CANDIDATES)
        custom = LIDiscourseTreeMemory.from_defaults(
            embed_model=hashing_embedder, theta_fork=0.5, candidates=2, summary_items=3, recent_turns=1
        )
        s = custom.strategy
        assert (s.theta_fork, s.candidates, s.summary_items, s.recent_turns) == (0.5, 2, 3, 1)
        with pytest.raises(ConfigurationError):
            LIDiscourseTreeMemory.from_defaults(candidates=0)
        with pytest.raises(ConfigurationError):
            LIDiscourseTreeMemory.from_defaults(llm="not an llm")
        assert custom.llm_calls == 0
