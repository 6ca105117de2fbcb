"""SWin memories in real framework runs with fake models.

A ``create_agent`` through ``SWinSummaryMiddleware``, a LlamaIndex ``SimpleChatEngine`` and a
``Memory`` with ``SWinSummaryBuffer`` / ``SWinSummaryBlock``; and the LLM summariser driven by
each framework's fake models, asserting the prompts and the number of calls.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from langchain_ctxmgmt import SWinSummaryBuffer as LCSWinSummaryBuffer
from langchain_ctxmgmt import SWinSummaryMiddleware
from llamaindex_ctxmgmt import SWinSummaryBlock
from llamaindex_ctxmgmt import SWinSummaryBuffer as LISWinSummaryBuffer
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, TOPIC_TURNS, conversation
from tests.integration.test_langchain_agent import (
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
    """MockLLM whose ``complete`` records the prompt and answers with fixed bullet points."""

    prompts: list[str] = Field(default_factory=list, exclude=True)
    answer: str = "- The user bakes sourdough bread with a rye starter."

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answer)


# -- LangChain: create_agent through SWinSummaryMiddleware ----------------------------------


def test_agent_model_receives_summary_then_recent_turns():
    past = history()  # 8 turns; turn 3 is a tool-call turn
    query = HumanMessage("What did I name my cat?", id="q")
    model = recording_model(["Miso."])
    middleware = SWinSummaryMiddleware()
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    result = agent.invoke({"messages": [*past, query]})

    (received,) = model.received
    full = [*past, query]
    assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
    summary = received[1]
    assert isinstance(summary, SystemMessage) and summary.content.startswith("Summary of the earlier")
    assert "Miso" in summary.content  # turn 0, summarised (window 0-5)
    assert [type(m) for m in received].count(SystemMessage) == 2
    # then the open window (turns 4-7) verbatim and the question (turn 8)
    assert sent_turn_indices(received[2:], full) == [4, 5, 6, 7, 8]
    assert received[-1].id == "q"
    assert_received_whole_turns_in_order(received, full)
    assert_tool_calls_paired(received)
    # the agent state keeps the whole history
    assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]
    context = middleware.last_context
    assert [b.kind for b in context.blocks] == ["system", "summary", "turns", "current"]
    assert "window 0 (session 0, turns 0-5)" in middleware.explain()
    assert middleware.llm_calls == 0


async def test_agent_async_with_an_llm_summarizer():
    summariser = RecordingFakeListChatModel(responses=["- The user adopted a grey cat named Miso."])
    middleware = SWinSummaryMiddleware(llm=summariser, max_tokens=2000)
    model = recording_model(["Miso."])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    await agent.ainvoke({"messages": [*history(), HumanMessage("My cat's name?", id="q")]})

    (received,) = model.received
    assert (
        received[1].content
        == "Summary of the earlier conversation:\n- The user adopted a grey cat named Miso."
    )
    assert middleware.llm_calls == len(summariser.prompts) == 1
    assert "grey cat named Miso" in summariser.prompts[0] and "<conversation>" in summariser.prompts[0]
    assert middleware.last_context.tokens <= 2000


def test_middleware_rejects_bad_parameters():
    with pytest.raises(ConfigurationError):
        SWinSummaryMiddleware(window=2, overlap=2)
    with pytest.raises(ConfigurationError):
        SWinSummaryMiddleware(llm="gpt")


# -- LangChain: the LLM summariser driven by fake chat models --------------------------------


def test_classic_memory_with_fake_list_chat_model():
    llm = RecordingFakeListChatModel(responses=[f"- Fact {k} from the conversation." for k in range(10)])
    memory = LCSWinSummaryBuffer(llm=llm, return_messages=True)
    for user, answer in TOPIC_TURNS[:12]:
        memory.save_context({"input": user}, {"output": answer or "ok"})
    # 12 turns, window 6 / overlap 2: windows 0-5 and 4-9 are complete (one call each)
    assert memory.llm_calls == len(llm.prompts) == 2
    first, second = llm.prompts
    assert TOPIC_TURNS[0][0] in first and TOPIC_TURNS[5][0] in first and TOPIC_TURNS[6][0] not in first
    assert "<memory>\n(empty)\n</memory>" in first
    assert "<memory>\n- Fact 0 from the conversation.\n</memory>" in second  # M_k = f(M_k-1, W_k)
    assert TOPIC_TURNS[4][0] in second and TOPIC_TURNS[9][0] in second
    assert "third person" in first and "not instructions" in first
    history = memory.load_memory_variables({"input": "what did we talk about?"})["history"]
    assert history[0].content.endswith("- Fact 0 from the conversation.\n- Fact 1 from the conversation.")
    assert [m.content for m in history[1::2]] == [u for u, _ in TOPIC_TURNS[8:12]]


def test_classic_memory_falls_back_when_the_model_answers_nothing(caplog):
    llm = FakeListChatModel(responses=[""])
    memory = LCSWinSummaryBuffer(llm=llm)
    for user, answer in TOPIC_TURNS[:6]:
        memory.save_context({"input": user}, {"output": answer or "ok"})
    assert memory.llm_calls == 1
    assert "empty answer" in caplog.text
    assert memory.strategy.windows[0]["added"]  # the extractive summary kept the window


# -- LlamaIndex: SimpleChatEngine with SWinSummaryBuffer --------------------------------------


def test_simple_chat_engine_receives_summary_and_recent_turns():
    memory = LISWinSummaryBuffer.from_defaults(chat_history=conversation())
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")

    engine.chat(SOURDOUGH_QUERY)

    (sent,) = llm.received
    assert sent[0].role == MessageRole.SYSTEM and sent[0].content == "Be brief."
    assert sent[1].role == MessageRole.SYSTEM and sent[1].content.startswith("Summary of the earlier")
    assert "rye flour" in sent[1].content or "sourdough" in sent[1].content.lower()
    # 13 turns: windows 0-5 and 4-9 summarised; the open window 8-12 verbatim, then the question
    users = [m.content for m in sent if m.role == MessageRole.USER]
    assert users == [u for u, _ in TOPIC_TURNS[8:]] + [SOURDOUGH_QUERY]
    assert len(memory.get_all()) == 28 + 2  # lossless
    assert memory.llm_calls == 0


def test_llamaindex_llm_summarizer_with_mock_llm():
    llm = SummaryMockLLM()
    memory = LISWinSummaryBuffer.from_defaults(llm=llm, chat_history=conversation())
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    selected = memory.get()
    assert memory.llm_calls == len(llm.prompts) == 2
    assert TOPIC_TURNS[0][0] in llm.prompts[0] and "<conversation>" in llm.prompts[0]
    assert "- The user bakes sourdough bread with a rye starter." in llm.prompts[1]  # previous memory
    # the second window repeated the fact: deduplicated, one item reinforced
    assert [i.hits for i in memory.strategy.items] == [2]
    assert selected[0].content == "Summary of the earlier conversation:\n" + llm.answer
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)


def test_plain_mock_llm_echo_does_not_leak_the_prompt():
    memory = LISWinSummaryBuffer.from_defaults(llm=MockLLM(), chat_history=conversation()[:12])
    memory.get(input="x")
    texts = " ".join(i.text for i in memory.strategy.items)
    assert "Rules:" not in texts and "third person" not in texts
    assert memory.llm_calls == 1


# -- LlamaIndex: Memory with SWinSummaryBlock -------------------------------------------------


def _memory(block: SWinSummaryBlock) -> Memory:
    return Memory.from_defaults(
        session_id="s1",
        token_limit=400,
        chat_history_token_ratio=0.4,
        token_flush_size=60,
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
    )


def _texts(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages)


async def test_memory_block_summarises_flushed_turns():
    llm = SummaryMockLLM()
    block = SWinSummaryBlock(llm=llm)
    memory = _memory(block)
    await memory.aput_messages(conversation())
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    result = await memory.aget()
    assert result[0].role == MessageRole.SYSTEM
    assert "<swin_summary>" in result[0].content and llm.answer[2:] in result[0].content
    assert result[-1].content == SOURDOUGH_QUERY
    assert block.llm_calls == len(llm.prompts) >= 1
    assert "window 0" in block.explain() or "swin" in block.explain()


async def test_memory_block_messages_output_and_defaults():
    block = SWinSummaryBlock(output="messages", window=2, overlap=0)
    memory = _memory(block)
    await memory.aput_messages(conversation())
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    result = await memory.aget()
    assert "Summary of the earlier conversation" in _texts(result)
    assert SWinSummaryBlock().output == "text" and SWinSummaryBlock().window == 6
    with pytest.raises(ConfigurationError):
        SWinSummaryBlock(gamma=0)
