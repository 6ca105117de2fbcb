"""TopicThread memories in real framework runs with fake models.

A ``create_agent`` through ``TopicThreadMiddleware`` (sync and async, with an LLM compressor),
a LlamaIndex ``SimpleChatEngine`` with ``TopicThreadMemory`` and a ``Memory`` with
``TopicThreadBlock``; each asserts what the model actually received.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, CompletionResponse, MessageRole
from llama_index.core.bridge.pydantic import Field
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.memory import Memory

from ctxmgmt import ConfigurationError
from langchain_ctxmgmt.topic_thread_middleware import TopicThreadMiddleware
from llamaindex_ctxmgmt.topic_thread_block import TopicThreadBlock
from llamaindex_ctxmgmt.topic_thread_memory import TopicThreadMemory
from tests.adapters.test_llamaindex_contract import SOURDOUGH, SOURDOUGH_QUERY, conversation, turns_present
from tests.integration.test_langchain_agent import (
    CAT,
    SYSTEM_PROMPT,
    assert_received_whole_turns_in_order,
    assert_tool_calls_paired,
    get_weather,
    history,
    recording_model,
    sent_turn_indices,
)
from tests.integration.test_llamaindex_engines import RecordingLLM


class RecordingFakeListChatModel(FakeListChatModel):
    """FakeListChatModel that records the prompts it is sent."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        self.prompts.append(messages[-1].content)
        return super()._call(messages, stop=stop, run_manager=run_manager, **kwargs)


class SummaryMockLLM(MockLLM):
    """MockLLM whose ``complete`` records the prompt and answers with a fixed bullet point."""

    prompts: list[str] = Field(default_factory=list, exclude=True)
    answer: str = "- The user bakes sourdough bread with a rye starter."

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answer)


# -- LangChain: create_agent through TopicThreadMiddleware --------------------------------


def test_agent_model_receives_threads_relevant_turns_and_the_question(hashing_embedder):
    past = history()  # 8 turns; turn 3 is a tool-call turn
    query = HumanMessage("What name did I give the grey cat from the shelter?", id="q")
    model = recording_model(["Miso."])
    middleware = TopicThreadMiddleware(embedder=hashing_embedder, max_tokens=3000)
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    result = agent.invoke({"messages": [*past, query]})

    (received,) = model.received
    full = [*past, query]
    assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
    sent = sent_turn_indices(received, full)
    assert CAT in sent and sent[-1] == 8 and 7 in sent  # the cat turn, the newest turn, the question
    assert received[-1].id == "q"
    assert_received_whole_turns_in_order(received, full)
    assert_tool_calls_paired(received)
    # thread states arrive as system messages before the verbatim turns
    states = [m for m in received[1:] if isinstance(m, SystemMessage)]
    assert all(m.content.startswith("Topic thread") for m in states)
    # the agent state keeps the whole history
    assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]
    context = middleware.last_context
    assert context.blocks[0].kind == "system" and context.blocks[-1].kind == "current"
    assert context.tokens <= 3000
    assert "decay" in middleware.explain() and "threads" in middleware.strategy.explain()
    assert middleware.llm_calls == 0


async def test_agent_async_with_an_llm_compressor(hashing_embedder):
    compressor = RecordingFakeListChatModel(responses=["- The user adopted a grey cat named Miso."])
    middleware = TopicThreadMiddleware(
        embedder=hashing_embedder, llm=compressor, keep_last=0, verbatim_turns=0
    )
    model = recording_model(["Miso."])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    await agent.ainvoke({"messages": [*history(), HumanMessage("My grey cat's name?", id="q")]})

    (received,) = model.received
    assert middleware.llm_calls == len(compressor.prompts) >= 8  # one per written-back turn
    assert "<conversation>" in compressor.prompts[0] and "grey cat named Miso" in compressor.prompts[0]
    states = [m.content for m in received[1:] if isinstance(m, SystemMessage)]
    assert any("The user adopted a grey cat named Miso." in s for s in states)


def test_middleware_rejects_bad_parameters():
    with pytest.raises(ConfigurationError):
        TopicThreadMiddleware(tau=7.0)
    with pytest.raises(ConfigurationError):
        TopicThreadMiddleware(llm="gpt")


# -- LlamaIndex: SimpleChatEngine with TopicThreadMemory ----------------------------------


def test_simple_chat_engine_receives_threads_and_relevant_turns(hashing_embedder):
    memory = TopicThreadMemory.from_defaults(chat_history=conversation(), embed_model=hashing_embedder)
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")

    engine.chat(SOURDOUGH_QUERY)

    (sent,) = llm.received
    assert sent[0].role == MessageRole.SYSTEM and sent[0].content == "Be brief."
    assert turns_present(sent) & SOURDOUGH
    assert sent[-1].role == MessageRole.USER and sent[-1].content == SOURDOUGH_QUERY
    states = [m for m in sent[1:] if m.role == MessageRole.SYSTEM]
    assert all(m.content.startswith("Topic thread") for m in states)
    assert len(memory.get_all()) == 28 + 2  # lossless
    assert memory.llm_calls == 0
    assert memory.last_context.details["threads"]


def test_llamaindex_llm_compressor_with_mock_llm(hashing_embedder):
    llm = SummaryMockLLM()
    memory = TopicThreadMemory.from_defaults(
        llm=llm, chat_history=conversation(), embed_model=hashing_embedder, verbatim_turns=0
    )
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    selected = memory.get()
    assert memory.llm_calls == len(llm.prompts) >= 13
    assert any(llm.answer[2:] in (m.content or "") for m in selected if m.role == MessageRole.SYSTEM)
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)


# -- LlamaIndex: Memory with TopicThreadBlock ---------------------------------------------


def _memory(block: TopicThreadBlock) -> Memory:
    return Memory.from_defaults(
        session_id="s1",
        token_limit=400,
        chat_history_token_ratio=0.4,
        token_flush_size=60,
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
    )


async def test_memory_block_returns_threads_of_flushed_turns(hashing_embedder):
    block = TopicThreadBlock(embed_model=hashing_embedder)
    memory = _memory(block)
    await memory.aput_messages(conversation())
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    result = await memory.aget()
    assert result[0].role == MessageRole.SYSTEM
    assert "<topic_threads>" in result[0].content and "sourdough" in result[0].content.lower()
    assert result[-1].content == SOURDOUGH_QUERY
    assert "threads" in block.explain()
    assert block.llm_calls == 0


async def test_memory_block_messages_output(hashing_embedder):
    block = TopicThreadBlock(embed_model=hashing_embedder, output="messages")
    memory = _memory(block)
    await memory.aput_messages(conversation())
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    result = await memory.aget()
    assert result[-1].content == SOURDOUGH_QUERY
    assert any((m.content or "").startswith("Topic thread") for m in result) or turns_present(result)
    assert TopicThreadBlock().output == "text"
    with pytest.raises(ConfigurationError):
        TopicThreadBlock(max_slots=0)
