"""ACM memories in real framework runs with fake models.

``create_agent`` through ``ACMTieredMiddleware``; LlamaIndex ``SimpleChatEngine`` and
``FunctionAgent`` with ``ACMTieredBuffer``; ``Memory`` with ``ACMTieredBlock``. Each test asserts
what the model actually received: the tiers, whole turns, paired tool calls, the budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import ConfigurationError
from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.tokens import default_token_counter
from ctxmgmt.strategies.acm import ENTITY_HEADER, SUMMARY_HEADER
from langchain_ctxmgmt._convert import to_ctxmgmt
from langchain_ctxmgmt.acm_memory import ACMTieredBuffer as LCACMTieredBuffer
from langchain_ctxmgmt.acm_middleware import ACMTieredMiddleware
from llamaindex_ctxmgmt._convert import to_message
from llamaindex_ctxmgmt.acm_block import ACMTieredBlock
from llamaindex_ctxmgmt.acm_memory import ACMTieredBuffer as LIACMTieredBuffer
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, TOPIC_TURNS, WEATHER_QUERY, conversation
from tests.helpers import is_lc_memory, is_li_memory, memory_body, no_system_text
from tests.integration.test_langchain_agent import arun_agent, history, run_agent
from tests.integration.test_llamaindex_engines import (
    WeatherLLM,
    ask_block,
    chat_once,
    weather_agent,
)


def lc_tokens(messages: Sequence[BaseMessage]) -> int:
    return sum(message_tokens(default_token_counter(), to_ctxmgmt(m)) for m in messages)


def li_tokens(messages: Sequence[ChatMessage]) -> int:
    return sum(message_tokens(default_token_counter(), to_message(m)) for m in messages)


# -- LangChain: create_agent through ACMTieredMiddleware -------------------------------------


def histories(times: int) -> list[BaseMessage]:
    """:func:`history` ``times`` over, with ids made unique."""
    past = history() * times
    return [m.model_copy(update={"id": f"{m.id}-{k // len(history())}"}) for k, m in enumerate(past)]


def test_agent_model_receives_the_tiers_within_the_budget():
    # 250 tokens: the band (25%) holds a tier as a framed memory message (ctxmgmt.messages.framing)
    middleware = ACMTieredMiddleware(max_tokens=250, entity_extractor=CapitalisedExtractor())
    # 16 turns, two of them tool-call turns; run_agent checks the system prompt, the question
    # last, whole turns in order, tool calls paired, the state keeping everything
    question = "What should I feed the sourdough starter?"
    received = run_agent(middleware, question, past=histories(2), reply="Feed it.").received

    # the tiers: framed user-role memory messages; the app's system prompt is the only system message
    tiers = [m for m in received[1:] if is_lc_memory(m)]
    assert tiers and memory_body(tiers[0].content).startswith((ENTITY_HEADER, SUMMARY_HEADER))
    assert [type(m) for m in received].count(SystemMessage) == 1
    assert lc_tokens(received) <= 250
    kinds = [b.kind for b in middleware.last_context.blocks]
    assert kinds[0] == "system" and kinds[-1] == "current" and "turns" in kinds
    assert "entity tier" in middleware.explain()


async def test_agent_async_recalls_the_turn_behind_a_mentioned_entity():
    middleware = ACMTieredMiddleware(max_tokens=400, entity_extractor=CapitalisedExtractor())

    received = (await arun_agent(middleware, "Is Miso still grey?", past=histories(3))).received

    assert any(isinstance(m, HumanMessage) and "named Miso" in m.content for m in received)
    assert "Miso" in middleware.last_context.details["mentioned"]
    assert middleware.last_context.details["recalled"]
    assert lc_tokens(received) <= 400


def test_middleware_rejects_bad_parameters():
    with pytest.raises(ConfigurationError, match="max_tokens"):
        ACMTieredMiddleware(max_tokens=10)
    with pytest.raises(ConfigurationError):
        ACMTieredMiddleware(llm="gpt")
    assert ACMTieredMiddleware().max_tokens == 2000


def test_classic_memory_with_an_llm_summarizer():
    llm = FakeListChatModel(responses=[f"- Fact {k}." for k in range(100)])
    # 320 tokens: room for a summary beside its framing (ctxmgmt.messages.framing)
    memory = LCACMTieredBuffer(
        llm=llm, max_token_limit=320, return_messages=True, entity_extractor=CapitalisedExtractor()
    )
    for user, answer in TOPIC_TURNS * 2:
        memory.save_context({"input": user}, {"output": answer or "ok"})
    assert memory.llm_calls == memory.strategy.summarize_calls > 0
    history_ = memory.load_memory_variables({"input": "what did we talk about?"})["history"]
    assert any(is_lc_memory(m) and "Fact" in memory_body(m.content) for m in history_)
    assert no_system_text(history_, "Fact")
    assert lc_tokens(history_) <= 320


# -- LlamaIndex: SimpleChatEngine and FunctionAgent with ACMTieredBuffer ----------------------


@pytest.mark.model  # spaCy
def test_simple_chat_engine_with_spacy_entities():
    memory = LIACMTieredBuffer.from_defaults(token_limit=250, chat_history=conversation() * 2)

    sent = chat_once(memory)  # checks the system prompt, the question last, the store lossless

    # a tier as a framed user-role memory message; the app's system prompt is the only system message
    assert is_li_memory(sent[1]) and memory_body(sent[1].content).startswith((ENTITY_HEADER, SUMMARY_HEADER))
    assert [m.role for m in sent].count(MessageRole.SYSTEM) == 1
    # the engine gives the memory token_limit minus its own count of the system prompt
    # (``initial_token_count``, counted by ``memory.tokenizer_fn``: no per-message overhead)
    assert li_tokens(sent[1:]) <= 250 - len(memory.tokenizer_fn(sent[0].content))
    assert memory.strategy.entities and all(e.label for e in memory.strategy.entities)
    assert memory.llm_calls == 0


async def test_function_agent_with_tool_calls_within_the_budget():
    memory = LIACMTieredBuffer.from_defaults(
        token_limit=300, chat_history=conversation(), entity_extractor=CapitalisedExtractor()
    )
    llm = WeatherLLM()
    await weather_agent(llm, system_prompt="Hi.").run(user_msg=WEATHER_QUERY, memory=memory)
    assert len(llm.received) == 2
    # the agent's own system prompt (and, on the second call, its scratchpad) is outside the memory
    assert llm.received[0][0].content == "Hi." and li_tokens(llm.received[0][1:]) <= 300
    assert memory.last_context.tokens <= 300
    for sent in llm.received:
        calls = [b.tool_call_id for m in sent for b in m.blocks if hasattr(b, "tool_call_id")]
        results = [m.additional_kwargs.get("tool_call_id") for m in sent if m.role == MessageRole.TOOL]
        assert sorted(calls) == sorted(results)
    assert llm.received[1][-1].role == MessageRole.TOOL  # the turn in progress is sent whole


# -- LlamaIndex: Memory with ACMTieredBlock ----------------------------------------------------


async def test_memory_block_returns_the_tiers():
    # default output "messages"; 240 tokens: the band (25%) holds the framed entity tier
    block = ACMTieredBlock(token_limit=240, entity_extractor=CapitalisedExtractor())
    result = await ask_block(block, conversation() * 2)
    assert is_li_memory(result[0]) and memory_body(result[0].content).startswith(ENTITY_HEADER)
    assert not any(m.role == MessageRole.SYSTEM for m in result)  # never with system authority
    assert result[-1].content == SOURDOUGH_QUERY
    assert block.last_context is not None and block.last_context.tokens <= 240
    assert "entity tier" in block.explain()
    assert ACMTieredBlock().output == "messages"
    # output="text" (asked for): Memory puts the escaped text into its system message
    text_block = ACMTieredBlock(token_limit=120, entity_extractor=CapitalisedExtractor(), output="text")
    result = await ask_block(text_block, conversation() * 2)
    assert result[0].role == MessageRole.SYSTEM and "<acm_tiers>" in result[0].content
    assert text_block.last_context is not None and text_block.last_context.tokens <= 120
    with pytest.raises(ConfigurationError):
        ACMTieredBlock(token_limit=8)
