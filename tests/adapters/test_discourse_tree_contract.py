"""The adapter contract suites run on the discourse-tree memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import ConfigurationError
from ctxmgmt.components.decider import THETA_FORK, EmbeddedDecider, LLMDecider
from ctxmgmt.strategies.discourse_tree import CANDIDATES, SUMMARY_ITEMS, DiscourseTreeStrategy
from langchain_ctxmgmt import DiscourseTreeMemory as LCDiscourseTreeMemory
from llamaindex_ctxmgmt import DiscourseTreeMemory as LIDiscourseTreeMemory
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, LangChainMemoryContract, fill
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH_QUERY,
    LlamaIndexMemoryContract,
    conversation,
    is_subsequence,
    turns_present,
)


class TestLangChainDiscourseTreeMemory(LangChainMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        def make(**overrides):
            overrides.setdefault("embedder", hashing_embedder)
            # The bag-of-words test embedder's cosines are far below MiniLM's, where the
            # default shift model is calibrated; the threshold rules fit them.
            overrides.setdefault("decider", EmbeddedDecider(shift_model=None))
            return LCDiscourseTreeMemory(**overrides)

        return make

    def test_return_messages_and_string_agree(self, memory):
        """The summary of other topics is a SystemMessage; the string form renders it as ``System:``."""
        as_messages = memory(return_messages=True)
        as_string = memory(return_messages=False, human_prefix="User", ai_prefix="Bot")
        fill(as_messages)
        fill(as_string)
        messages = as_messages.load_memory_variables({"input": CAT_QUERY})["history"]
        text = as_string.load_memory_variables({"input": CAT_QUERY})["history"]
        prefix = {HumanMessage: "User", SystemMessage: "System"}
        expected = "\n".join(f"{prefix.get(type(x), 'Bot')}: {x.content}" for x in messages)
        assert messages and text == expected

    def test_messages_passed_in_are_kept_as_they_are(self, memory):
        """As the contract, with a query the (bag-of-words) test embedder places in the cat topic."""
        m = memory(return_messages=True)
        human = HumanMessage("I adopted a grey cat named Miso.", id="h-1", additional_kwargs={"lang": "en"})
        ai = AIMessage("Hello Miso!", id="a-1", response_metadata={"model": "fake"})
        m.save_context({"input": human}, {"output": ai})
        history = m.load_memory_variables({"input": "What is the name of the grey cat I adopted?"})["history"]
        assert history[0] is human and history[1] is ai

    def test_works_with_no_arguments(self):
        memory = LCDiscourseTreeMemory()
        assert memory.memory_variables == ["history"]
        assert (memory.theta_fork, memory.candidates, memory.summary_items) == (
            THETA_FORK,
            CANDIDATES,
            SUMMARY_ITEMS,
        )
        assert isinstance(memory.strategy, DiscourseTreeStrategy)
        assert isinstance(memory.strategy.decider, EmbeddedDecider) and memory.llm_calls == 0

    def test_one_topic_per_turn_gives_summaries_and_the_cat_turn(self, memory):
        m = memory(return_messages=True)
        fill(m)  # 8 unrelated topics
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        assert isinstance(history[0], SystemMessage) and "Topic" in history[0].content
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


class TestLlamaIndexDiscourseTreeMemory(LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return LIDiscourseTreeMemory.from_defaults(embed_model=hashing_embedder)

    def test_get_returns_stored_objects_in_chronological_order(self, memory):
        """Stored objects come back in order; the only new message is the summary, first."""
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        selected = memory.get()
        stored = memory.get_all()
        summary = [m for m in selected if not any(m is s for s in stored)]
        assert len(summary) == 1 and selected[0] is summary[0]
        assert summary[0].role == MessageRole.SYSTEM
        assert is_subsequence(selected[1:], stored)

    def test_summary_message_is_stable(self, memory):
        memory.put_messages(conversation())
        assert memory.get(input="x")[0] is memory.get(input="x")[0]

    def test_sourdough_query_gets_the_sourdough_thread(self, default_embedder):
        """With the real embedder and the default decider (calibrated for MiniLM's cosines)."""
        memory = LIDiscourseTreeMemory.from_defaults(embed_model=default_embedder)
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        selected = memory.get()
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
