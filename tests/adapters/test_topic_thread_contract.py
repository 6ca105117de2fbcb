"""The adapter contract suites run on the TopicThread memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import SystemMessage

from ctxmgmt import ConfigurationError
from ctxmgmt.strategies.topic_thread import ALPHA, MAX_SLOT_TURNS, MAX_SLOTS, TAU, TopicThreadStrategy
from langchain_ctxmgmt.topic_thread_memory import TopicThreadMemory as LCTopicThreadMemory
from llamaindex_ctxmgmt.topic_thread_memory import TopicThreadMemory as LITopicThreadMemory
from tests.adapters.test_langchain_contract import (
    CAT_QUERY,
    CAT_TURN,
    TURNS,
    LangChainMemoryContract,
    fill,
    turn_of,
)
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH,
    LlamaIndexMemoryContract,
    OwnMessagesFirstContract,
    ask,
    turns_present,
)
from tests.helpers import is_lc_memory


class TestLangChainTopicThreadMemory(LangChainMemoryContract):
    memory_class = LCTopicThreadMemory
    strategy_class = TopicThreadStrategy
    no_argument_defaults = {"tau": TAU, "alpha": ALPHA, "max_slots": MAX_SLOTS}

    def test_relevant_thread_is_returned(self, memory):
        m = memory(return_messages=True)
        fill(m)
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        verbatim = [x for x in history if not isinstance(x, SystemMessage) and not is_lc_memory(x)]
        assert CAT_TURN in {turn_of(x) for x in verbatim}
        assert turn_of(verbatim[-1]) == len(TURNS) - 1  # the newest turn
        details = m.last_context.details
        assert details["threads"] and "decay" in m.explain()

    def test_parameters_reach_the_strategy(self, hashing_embedder):
        memory = LCTopicThreadMemory(
            embedder=hashing_embedder, tau=0.4, alpha=0.1, max_slot_turns=5, max_slots=3, top_k=2
        )
        s = memory.strategy
        assert (s.tau, s.alpha, s.max_slot_turns, s.max_slots, s.top_k) == (0.4, 0.1, 5, 3, 2)
        assert s.embedder is hashing_embedder

    @pytest.mark.parametrize("bad", [{"tau": 3.0}, {"alpha": -1.0}, {"max_slots": 1}, {"top_k": 0}])
    def test_bad_parameters(self, bad):
        with pytest.raises(ConfigurationError):
            LCTopicThreadMemory(**bad)

    def test_llm_and_summarizer_are_exclusive(self):
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

        with pytest.raises(ConfigurationError):
            LCTopicThreadMemory(llm=GenericFakeChatModel(messages=iter([])), summarizer=lambda p: p)
        with pytest.raises(ConfigurationError):
            LCTopicThreadMemory(llm="not a model")


class TestLlamaIndexTopicThreadMemory(OwnMessagesFirstContract, LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return LITopicThreadMemory.from_defaults(embed_model=hashing_embedder)

    def test_relevant_turns_selected(self, memory):
        assert turns_present(ask(memory)) & SOURDOUGH
        assert memory.last_context.details["retrieved"]

    def test_defaults_and_parameters(self):
        memory = LITopicThreadMemory()
        assert (memory.tau, memory.alpha, memory.max_slot_turns) == (TAU, ALPHA, MAX_SLOT_TURNS)
        custom = LITopicThreadMemory.from_defaults(tau=0.3, max_slots=4, verbatim_turns=2, keep_last=0)
        s = custom.strategy
        assert (s.tau, s.max_slots, s.verbatim_turns, s.keep_last) == (0.3, 4, 2, 0)
        with pytest.raises(ConfigurationError):
            LITopicThreadMemory.from_defaults(tau=5.0)
        with pytest.raises(ConfigurationError):
            LITopicThreadMemory.from_defaults(llm="not an llm")


def test_packages_export_the_topic_thread_classes():
    import ctxmgmt
    import langchain_ctxmgmt
    import llamaindex_ctxmgmt
    from ctxmgmt.strategies.registry import MEMORIES

    assert langchain_ctxmgmt.TopicThreadMemory is LCTopicThreadMemory
    assert "TopicThreadMiddleware" in langchain_ctxmgmt.__all__
    assert llamaindex_ctxmgmt.TopicThreadMemory is LITopicThreadMemory
    assert "TopicThreadBlock" in llamaindex_ctxmgmt.__all__
    assert ctxmgmt.TopicThreadStrategy is TopicThreadStrategy
    assert MEMORIES["TopicThreadMemory"] is TopicThreadStrategy
