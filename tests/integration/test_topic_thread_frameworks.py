"""TopicThread memories in real framework runs with fake models.

A ``create_agent`` through ``TopicThreadMiddleware`` (sync and async, with an LLM compressor),
a LlamaIndex ``SimpleChatEngine`` with ``TopicThreadMemory`` and a ``Memory`` with
``TopicThreadBlock``; each asserts what the model actually received.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import ConfigurationError
from langchain_ctxmgmt.testing import RecordingListChatModel
from langchain_ctxmgmt.topic_thread_middleware import TopicThreadMiddleware
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from llamaindex_ctxmgmt.topic_thread_block import TopicThreadBlock
from llamaindex_ctxmgmt.topic_thread_memory import TopicThreadMemory
from tests.adapters.test_llamaindex_contract import SOURDOUGH, SOURDOUGH_QUERY, conversation, turns_present
from tests.helpers import is_lc_memory, is_li_memory, memory_body, no_system_text
from tests.integration.test_langchain_agent import (
    CAT,
    arun_agent,
    run_agent,
    sent_turn_indices,
)
from tests.integration.test_llamaindex_engines import ask_block, chat_once

# -- LangChain: create_agent through TopicThreadMiddleware --------------------------------


def test_agent_model_receives_threads_relevant_turns_and_the_question(hashing_embedder):
    middleware = TopicThreadMiddleware(embedder=hashing_embedder, max_tokens=3000)
    # history(): 8 turns, turn 3 a tool-call turn; run_agent checks the system prompt, the
    # question last, whole turns in order, tool calls paired, the state keeping everything
    received, full, _ = run_agent(middleware, "What name did I give the grey cat from the shelter?")

    sent = sent_turn_indices(received, full)
    assert CAT in sent and sent[-1] == 8 and 7 in sent  # the cat turn, the newest turn, the question
    # thread states arrive as framed user-role memory messages (ctxmgmt.messages.framing), never as system
    states = [m for m in received[1:] if is_lc_memory(m)]
    assert all(memory_body(m.content).startswith("Topic thread") for m in states)
    assert not any(isinstance(m, SystemMessage) for m in received[1:])
    context = middleware.last_context
    assert context.blocks[0].kind == "system" and context.blocks[-1].kind == "current"
    assert context.tokens <= 3000
    assert "decay" in middleware.explain() and "threads" in middleware.strategy.explain()
    assert middleware.llm_calls == 0


async def test_agent_async_with_an_llm_compressor(hashing_embedder):
    compressor = RecordingListChatModel(responses=["- The user adopted a grey cat named Miso."])
    middleware = TopicThreadMiddleware(
        embedder=hashing_embedder, llm=compressor, keep_last=0, verbatim_turns=0
    )

    received = (await arun_agent(middleware, "My grey cat's name?")).received

    assert middleware.llm_calls == len(compressor.prompts) >= 8  # one per written-back turn
    assert "<conversation>" in compressor.prompts[0] and "grey cat named Miso" in compressor.prompts[0]
    states = [memory_body(m.content) for m in received[1:] if is_lc_memory(m)]
    assert any("The user adopted a grey cat named Miso." in s for s in states)
    assert no_system_text(received, "grey cat named Miso")


def test_middleware_rejects_bad_parameters():
    with pytest.raises(ConfigurationError):
        TopicThreadMiddleware(tau=7.0)
    with pytest.raises(ConfigurationError):
        TopicThreadMiddleware(llm="gpt")


# -- LlamaIndex: SimpleChatEngine with TopicThreadMemory ----------------------------------


def test_simple_chat_engine_receives_threads_and_relevant_turns(hashing_embedder):
    memory = TopicThreadMemory.from_defaults(chat_history=conversation(), embed_model=hashing_embedder)

    sent = chat_once(memory)  # checks the system prompt, the question last, the store lossless

    assert turns_present(sent) & SOURDOUGH
    states = [m for m in sent[1:] if is_li_memory(m)]
    assert all(memory_body(m.content).startswith("Topic thread") for m in states)
    assert not any(m.role == MessageRole.SYSTEM for m in sent[1:])
    assert memory.llm_calls == 0
    assert memory.last_context.details["threads"]


def test_llamaindex_llm_compressor_with_mock_llm(hashing_embedder):
    llm = PromptRecordingLLM()
    memory = TopicThreadMemory.from_defaults(
        llm=llm, chat_history=conversation(), embed_model=hashing_embedder, verbatim_turns=0
    )
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    selected = memory.get()
    assert memory.llm_calls == len(llm.prompts) >= 13
    assert any(llm.answer[2:] in memory_body(m.content) for m in selected if is_li_memory(m))
    assert no_system_text(selected, llm.answer[2:])
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)


# -- LlamaIndex: Memory with TopicThreadBlock ---------------------------------------------


async def test_memory_block_returns_threads_of_flushed_turns(hashing_embedder):
    block = TopicThreadBlock(embed_model=hashing_embedder)
    result = await ask_block(block)
    # default output "messages": the flushed sourdough thread comes back first, as messages (thread
    # states would be framed user-role memory messages); nothing with system authority
    assert "sourdough" in (result[0].content or "").lower() and turns_present(result[:-1]) & SOURDOUGH
    assert not any(m.role == MessageRole.SYSTEM for m in result)
    assert result[-1].content == SOURDOUGH_QUERY
    assert "threads" in block.explain()
    assert block.llm_calls == 0


async def test_memory_block_text_output(hashing_embedder):
    # output="text" (asked for): Memory puts the escaped text into its system message
    block = TopicThreadBlock(embed_model=hashing_embedder, output="text")
    result = await ask_block(block)
    assert result[0].role == MessageRole.SYSTEM
    assert "<topic_threads>" in result[0].content and "sourdough" in result[0].content.lower()
    assert result[-1].content == SOURDOUGH_QUERY
    assert TopicThreadBlock().output == "messages"
    with pytest.raises(ConfigurationError):
        TopicThreadBlock(max_slots=0)
