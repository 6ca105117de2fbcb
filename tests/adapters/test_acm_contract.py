"""The adapter contract suites run on the ACM memories (LangChain and LlamaIndex)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from llama_index.core.base.llms.types import MessageRole

from ctxmgmt import ConfigurationError
from ctxmgmt.components.entities import Entity
from ctxmgmt.strategies.acm import ENTITY_HEADER, MIN_TOKEN_BUDGET, ACMConfig, ACMStrategy
from langchain_ctxmgmt.acm_memory import ACMTieredBuffer as LCACMTieredBuffer
from llamaindex_ctxmgmt.acm_memory import ACMTieredBuffer as LIACMTieredBuffer
from tests.adapters.test_langchain_contract import TURNS, LangChainMemoryContract, fill, sent_tokens, words
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH_QUERY,
    LlamaIndexMemoryContract,
    ask,
    is_subsequence,
)
from tests.helpers import MEMORY_HEAD, is_lc_memory, is_li_memory, memory_body

DEFAULT_TOKEN_BUDGET = ACMConfig.param("token_budget").default


class CapitalisedExtractor:
    """Fast stand-in for spaCy: capitalised words are entities."""

    uses_llm = False

    def extract(self, texts: Sequence[str]) -> list[list[Entity]]:
        return [[Entity(w, "MISC") for w in re.findall(r"\b[A-Z][a-z]{2,}\b", t)] for t in texts]


class TestLangChainACMTieredBuffer(LangChainMemoryContract):
    memory_class = LCACMTieredBuffer
    strategy_class = ACMStrategy
    no_argument_defaults = {"max_token_limit": DEFAULT_TOKEN_BUDGET}

    def fast_components(self, hashing_embedder):
        return {"entity_extractor": CapitalisedExtractor()}  # spaCy is slow to load

    def test_no_arguments_give_the_default_budget(self):
        assert LCACMTieredBuffer().strategy.token_budget == DEFAULT_TOKEN_BUDGET

    def test_budget_below_the_minimum_is_refused(self):
        with pytest.raises(ConfigurationError, match="max_token_limit must be an int >= 16"):
            LCACMTieredBuffer(max_token_limit=MIN_TOKEN_BUDGET - 1)
        assert LCACMTieredBuffer(max_token_limit=MIN_TOKEN_BUDGET).strategy.token_budget == MIN_TOKEN_BUDGET

    @pytest.mark.parametrize("bad", [{"unmodified_ratio": 0}, {"summary_limit": 0}, {"llm": "gpt"}])
    def test_bad_parameters(self, bad):
        with pytest.raises(ConfigurationError):
            LCACMTieredBuffer(**bad)

    def test_tiers_under_a_tight_budget(self, memory):
        # the tiers alone (query_share=0: no query spans in the verbatim floor); 140 words: the
        # entity band (25%) holds the framed memory message (ctxmgmt.messages.framing)
        m = memory(return_messages=True, max_token_limit=140, token_counter=words, query_share=0.0)
        fill(m, TURNS * 2)
        history = m.load_memory_variables({"input": "Tell me about Kyoto again."})["history"]
        assert sent_tokens(history) <= 140
        assert is_lc_memory(history[0]) and memory_body(history[0].content).startswith(ENTITY_HEADER)
        assert not any(isinstance(x, SystemMessage) for x in history)  # never with system authority
        assert history[-1].content == TURNS[-1][1]
        for tier in ("verbatim tier", "entity tier"):
            assert tier in m.explain()
        text = LCACMTieredBuffer(
            max_token_limit=140, token_counter=words, entity_extractor=CapitalisedExtractor(), query_share=0.0
        )
        fill(text, TURNS * 2)
        rendered = text.load_memory_variables({"input": "Kyoto?"})["history"]
        assert rendered.startswith(f"Human: {MEMORY_HEAD}{ENTITY_HEADER}")

    def test_query_recall_returns_the_turn_behind_an_entity(self, memory):
        m = memory(return_messages=True, max_token_limit=300, token_counter=words, query_share=0.0)
        fill(m, TURNS * 3)
        history = m.load_memory_variables({"input": "When is the trip to Kyoto?"})["history"]
        assert any(isinstance(x, HumanMessage) and "Kyoto" in x.content for x in history)
        assert m.last_context.details["recalled"] and m.last_context.details["mentioned"] == ["Kyoto"]
        assert m.last_context.tokens <= 300


class TestLlamaIndexACMTieredBuffer(LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return LIACMTieredBuffer.from_defaults(
            embed_model=hashing_embedder, entity_extractor=CapitalisedExtractor()
        )

    def test_defaults_and_parameters(self):
        memory = LIACMTieredBuffer()
        assert memory.strategy.token_budget == memory.token_limit == 3000
        custom = LIACMTieredBuffer.from_defaults(token_limit=2000, unmodified_ratio=0.5, query_recall=False)
        assert (custom.strategy.token_budget, custom.strategy.floor) == (2000, 1000)
        assert custom.strategy.query_recall is False
        with pytest.raises(ConfigurationError, match="token_limit must be an int >= 16"):
            LIACMTieredBuffer.from_defaults(token_limit=MIN_TOKEN_BUDGET - 1)
        with pytest.raises(ConfigurationError):
            LIACMTieredBuffer.from_defaults(summary_share=2)
        with pytest.raises(ConfigurationError):
            LIACMTieredBuffer.from_defaults(llm="not an llm")

    def test_tier_messages_come_first_and_are_stable(self):
        memory = LIACMTieredBuffer.from_defaults(
            token_limit=150, token_counter=words, entity_extractor=CapitalisedExtractor()
        )
        selected = ask(memory)
        stored = memory.get_all()
        new = [m for m in selected if not any(m is s for s in stored)]
        assert new and all(is_li_memory(m) for m in new)  # framed user-role memory, never system
        assert not any(m.role == MessageRole.SYSTEM for m in selected)
        assert selected[: len(new)] == new
        assert is_subsequence(selected[len(new) :], stored)
        assert selected[-1].content == SOURDOUGH_QUERY
        assert memory.get()[0] is selected[0]
        assert "entity tier" in memory.explain()
