"""The adapter contract suites run on the SWin memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import ConfigurationError
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, WINDOW, SWinStrategy
from langchain_ctxmgmt import SWinSummaryBuffer as LCSWinSummaryBuffer
from llamaindex_ctxmgmt import SWinSummaryBuffer as LISWinSummaryBuffer
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, LangChainMemoryContract, fill
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH_QUERY,
    LlamaIndexMemoryContract,
    conversation,
    is_subsequence,
)


class TestLangChainSWinSummaryBuffer(LangChainMemoryContract):
    @pytest.fixture
    def memory(self):
        def make(**overrides):
            return LCSWinSummaryBuffer(**overrides)

        return make

    def test_return_messages_and_string_agree(self, memory):
        """Summarising memories add a SystemMessage; the string form renders it as ``System:``."""
        as_messages = memory(return_messages=True)
        as_string = memory(return_messages=False, human_prefix="User", ai_prefix="Bot")
        fill(as_messages)
        fill(as_string)
        messages = as_messages.load_memory_variables({"input": CAT_QUERY})["history"]
        text = as_string.load_memory_variables({"input": CAT_QUERY})["history"]
        assert isinstance(messages[0], SystemMessage)
        prefix = {HumanMessage: "User", SystemMessage: "System"}
        expected = "\n".join(f"{prefix.get(type(x), 'Bot')}: {x.content}" for x in messages)
        assert text == expected

    def test_works_with_no_arguments(self):
        memory = LCSWinSummaryBuffer()
        assert memory.memory_variables == ["history"]
        assert (memory.window, memory.overlap, memory.gamma) == (WINDOW, OVERLAP, GAMMA)
        assert isinstance(memory.strategy, SWinStrategy) and memory.llm_calls == 0

    def test_summary_then_recent_turns(self, memory):
        m = memory(return_messages=True)
        fill(m)  # 8 turns: window 0-5 summarised, turns 4-7 open
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        assert isinstance(history[0], SystemMessage)
        assert [x.content for x in history[1:]] == [t for pair in TURNS[4:] for t in pair]
        assert m.last_context.blocks[0].kind == "summary"
        assert "window 0" in m.explain()

    @pytest.mark.parametrize("bad", [{"window": 0}, {"overlap": 6}, {"gamma": 0}, {"recent_turns": -1}])
    def test_bad_parameters(self, bad):
        with pytest.raises(ConfigurationError):
            LCSWinSummaryBuffer(**bad)

    def test_new_session_keeps_the_memory(self, memory):
        m = memory(return_messages=True)
        fill(m)
        m.new_session()
        assert m.messages == []
        fill(m, TURNS[:1])
        history = m.load_memory_variables({"input": "Kyoto?"})["history"]
        assert isinstance(history[0], SystemMessage) and "marathon" in history[0].content


class TestLlamaIndexSWinSummaryBuffer(LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return LISWinSummaryBuffer.from_defaults(embed_model=hashing_embedder)

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

    def test_defaults_and_parameters(self):
        memory = LISWinSummaryBuffer()
        assert (memory.window, memory.overlap, memory.gamma) == (WINDOW, OVERLAP, GAMMA)
        custom = LISWinSummaryBuffer.from_defaults(window=4, overlap=1, gamma=5, recent_turns=2)
        assert (custom.strategy.window, custom.strategy.stride, custom.strategy.gamma) == (4, 3, 5)
        assert custom.strategy.recent_turns == 2
        with pytest.raises(ConfigurationError):
            LISWinSummaryBuffer.from_defaults(window=3, overlap=3)
        with pytest.raises(ConfigurationError):
            LISWinSummaryBuffer.from_defaults(llm="not an llm")

    def test_new_session_keeps_the_memory(self, memory):
        memory.put_messages(conversation())
        memory.new_session()
        assert memory.get_all() == []
        memory.put(ChatMessage(role="user", content="What did we bake?"))
        selected = memory.get()
        assert selected[0].role == MessageRole.SYSTEM and "sourdough" in selected[0].content.lower()
        assert selected[-1].content == "What did we bake?"
