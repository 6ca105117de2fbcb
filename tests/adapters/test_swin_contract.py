"""The adapter contract suites run on the SWin memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import pytest
from langchain_core.messages import SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import ConfigurationError
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, WINDOW, SWinStrategy
from langchain_ctxmgmt import SWinSummaryBuffer as LCSWinSummaryBuffer
from llamaindex_ctxmgmt import SWinSummaryBuffer as LISWinSummaryBuffer
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, LangChainMemoryContract, fill
from tests.adapters.test_llamaindex_contract import (
    LlamaIndexMemoryContract,
    OwnMessagesFirstContract,
    conversation,
)
from tests.helpers import is_lc_memory, is_li_memory, memory_body, no_system_text


class TestLangChainSWinSummaryBuffer(LangChainMemoryContract):
    memory_class = LCSWinSummaryBuffer
    strategy_class = SWinStrategy
    no_argument_defaults = {"window": WINDOW, "overlap": OVERLAP, "gamma": GAMMA}

    def fast_components(self, hashing_embedder):
        return {}  # nothing to embed; the extractive summariser is fast

    def test_summary_then_recent_turns(self, memory):
        m = memory(return_messages=True)
        fill(m)  # 8 turns: window 0-5 summarised, turns 4-7 open
        history = m.load_memory_variables({"input": CAT_QUERY})["history"]
        # the summary: a framed user-role memory message, never a system message (ctxmgmt.messages.framing)
        assert is_lc_memory(history[0]) and "Summary" in memory_body(history[0].content)
        assert not any(isinstance(x, SystemMessage) for x in history)
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
        assert is_lc_memory(history[0]) and "marathon" in memory_body(history[0].content)
        assert no_system_text(history, "marathon")


class TestLlamaIndexSWinSummaryBuffer(OwnMessagesFirstContract, LlamaIndexMemoryContract):
    own_messages = 1  # the summary

    @pytest.fixture
    def memory(self, hashing_embedder):
        return LISWinSummaryBuffer.from_defaults(embed_model=hashing_embedder)

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
        assert is_li_memory(selected[0]) and "sourdough" in memory_body(selected[0].content).lower()
        assert not any(m.role == MessageRole.SYSTEM for m in selected)
        assert selected[-1].content == "What did we bake?"
