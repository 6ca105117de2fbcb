"""The adapter contract suites run on the TopicThread memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

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
    SOURDOUGH_QUERY,
    LlamaIndexMemoryContract,
    conversation,
    is_subsequence,
    turns_present,
)


class TestLangChainTopicThreadMemory(LangChainMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        def make(**overrides):
            return LCTopicThreadMemory(embedder=hashing_embedder, **overrides)

        return make

    def test_return_messages_and_string_agree(self, memory):
        """Thread states come as SystemMessages; the string form renders them as ``System:``."""
        as_messages = memory(return_messages=True)
        as_string = memory(return_messages=False, human_prefix="User", ai_prefix="Bot")
        fill(as_messages)
        fill(as_string)
        messages = as_messages.load_memory_variables({"input": CAT_QUERY})["history"]
        text = as_string.load_memory_variables({"input": CAT_QUERY})["history"]
        prefix = {HumanMessage: "User", SystemMessage: "System"}
        expected = "\n".join(f"{prefix.get(type(x), 'Bot')}: {x.content}" for x in messages)
        assert text == expected

    def test_works_with_no_arguments(self):
        memory = LCTopicThreadMemory()
        assert memory.memory_variables == ["history"]
        assert (memory.tau, memory.alpha, memory.max_slots) == (TAU, ALPHA, MAX_SLOTS)
        assert isinstance(memory.strategy, TopicThreadStrategy) and memory.llm_calls == 0

    def test_relevant_thread_is_returned(self, memory):
        m = memory(return_messages=True)
        fill(m)
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        verbatim = [x for x in history if not isinstance(x, SystemMessage)]
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


class TestLlamaIndexTopicThreadMemory(LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return LITopicThreadMemory.from_defaults(embed_model=hashing_embedder)

    def test_get_returns_stored_objects_in_chronological_order(self, memory):
        """Stored objects come back in order after the thread states (system messages)."""
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        selected = memory.get()
        stored = memory.get_all()
        new = [m for m in selected if not any(m is s for s in stored)]
        assert all(m.role == MessageRole.SYSTEM for m in new)
        assert selected[: len(new)] == new
        assert is_subsequence(selected[len(new) :], stored)

    def test_thread_messages_are_stable(self, memory):
        memory.put_messages(conversation())
        first, again = memory.get(input=SOURDOUGH_QUERY), memory.get(input=SOURDOUGH_QUERY)
        assert len(first) == len(again) and all(a is b for a, b in zip(first, again, strict=True))

    def test_relevant_turns_selected(self, memory):
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        assert turns_present(memory.get()) & SOURDOUGH
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
    from ctxmgmt.registry import MEMORIES

    assert langchain_ctxmgmt.TopicThreadMemory is LCTopicThreadMemory
    assert "TopicThreadMiddleware" in langchain_ctxmgmt.__all__
    assert llamaindex_ctxmgmt.TopicThreadMemory is LITopicThreadMemory
    assert "TopicThreadBlock" in llamaindex_ctxmgmt.__all__
    assert ctxmgmt.TopicThreadStrategy is TopicThreadStrategy
    assert MEMORIES["TopicThreadMemory"] is TopicThreadStrategy
