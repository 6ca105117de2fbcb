"""SWin memories in real framework runs with fake models.

A ``create_agent`` through ``SWinSummaryMiddleware``, a LlamaIndex ``SimpleChatEngine`` and a
``Memory`` with ``SWinSummaryBuffer`` / ``SWinSummaryBlock``; and the LLM summariser driven by
each framework's fake models, asserting the prompts and the number of calls.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import MockLLM

from ctxmgmt import ConfigurationError
from ctxmgmt.messages.framing import frame_memory
from langchain_ctxmgmt import SWinSummaryBuffer as LCSWinSummaryBuffer
from langchain_ctxmgmt import SWinSummaryMiddleware
from langchain_ctxmgmt.testing import RecordingListChatModel
from llamaindex_ctxmgmt import SWinSummaryBlock
from llamaindex_ctxmgmt import SWinSummaryBuffer as LISWinSummaryBuffer
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, TOPIC_TURNS, conversation
from tests.helpers import is_lc_memory, is_li_memory, memory_body, no_system_text
from tests.integration.test_langchain_agent import (
    arun_agent,
    run_agent,
    sent_turn_indices,
)
from tests.integration.test_llamaindex_engines import ask_block, chat_once

# -- LangChain: create_agent through SWinSummaryMiddleware ----------------------------------


def test_agent_model_receives_summary_then_recent_turns():
    middleware = SWinSummaryMiddleware()
    # history(): 8 turns, turn 3 a tool-call turn; run_agent checks the system prompt, the
    # question last, whole turns in order, tool calls paired, the state keeping everything
    received, full, _ = run_agent(middleware, "What did I name my cat?")

    # the summary: a framed user-role memory message (ctxmgmt.messages.framing), never a system message
    summary = received[1]
    assert is_lc_memory(summary) and memory_body(summary.content).startswith("Summary of the earlier")
    assert "Miso" in summary.content  # turn 0, summarised (window 0-5)
    assert [type(m) for m in received].count(SystemMessage) == 1  # the app's system prompt only
    assert no_system_text(received, "Miso")
    # then the open window (turns 4-7) verbatim and the question (turn 8)
    assert sent_turn_indices(received[2:], full) == [4, 5, 6, 7, 8]
    context = middleware.last_context
    assert [b.kind for b in context.blocks] == ["system", "summary", "turns", "current"]
    assert "window 0 (session 0, turns 0-5)" in middleware.explain()
    assert middleware.llm_calls == 0


async def test_agent_async_with_an_llm_summarizer():
    summariser = RecordingListChatModel(responses=["- The user adopted a grey cat named Miso."])
    middleware = SWinSummaryMiddleware(llm=summariser, max_tokens=2000)

    received = (await arun_agent(middleware, "My cat's name?")).received

    assert received[1].content == frame_memory(
        "Summary of the earlier conversation:\n- The user adopted a grey cat named Miso."
    )
    assert is_lc_memory(received[1]) and no_system_text(received, "grey cat named Miso")
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
    llm = RecordingListChatModel(responses=[f"- Fact {k} from the conversation." for k in range(10)])
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
    assert is_lc_memory(history[0])
    body = memory_body(history[0].content)
    assert body.endswith("- Fact 0 from the conversation.\n- Fact 1 from the conversation.")
    assert [m.content for m in history[1::2]] == [u for u, _ in TOPIC_TURNS[8:12]]


def test_classic_memory_falls_back_when_the_model_answers_nothing(caplog):
    llm = FakeListChatModel(responses=[""])
    memory = LCSWinSummaryBuffer(llm=llm)
    for user, answer in TOPIC_TURNS[:6]:
        memory.save_context({"input": user}, {"output": answer or "ok"})
    assert memory.llm_calls == 1
    assert "no usable item" in caplog.text  # an empty answer: the extractive summary, with a warning
    assert memory.strategy.windows[0]["added"]  # the extractive summary kept the window


# -- LlamaIndex: SimpleChatEngine with SWinSummaryBuffer --------------------------------------


def test_simple_chat_engine_receives_summary_and_recent_turns():
    memory = LISWinSummaryBuffer.from_defaults(chat_history=conversation())

    sent = chat_once(memory)  # checks the system prompt, the question last, the store lossless

    # the summary: a framed user-role memory message (ctxmgmt.messages.framing), never a system message
    assert is_li_memory(sent[1]) and memory_body(sent[1].content).startswith("Summary of the earlier")
    assert "rye flour" in sent[1].content or "sourdough" in sent[1].content.lower()
    assert [m.role for m in sent].count(MessageRole.SYSTEM) == 1  # the app's system prompt only
    # 13 turns: windows 0-5 and 4-9 summarised; the open window 8-12 verbatim, then the question
    users = [m.content for m in sent if m.role == MessageRole.USER and not is_li_memory(m)]
    assert users == [u for u, _ in TOPIC_TURNS[8:]] + [SOURDOUGH_QUERY]
    assert memory.llm_calls == 0


def test_llamaindex_llm_summarizer_with_mock_llm():
    llm = PromptRecordingLLM()
    memory = LISWinSummaryBuffer.from_defaults(llm=llm, chat_history=conversation())
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    selected = memory.get()
    assert memory.llm_calls == len(llm.prompts) == 2
    assert TOPIC_TURNS[0][0] in llm.prompts[0] and "<conversation>" in llm.prompts[0]
    assert "- The user bakes sourdough bread with a rye starter." in llm.prompts[1]  # previous memory
    # the second window repeated the fact: deduplicated, one item reinforced
    assert [i.hits for i in memory.strategy.items] == [2]
    assert is_li_memory(selected[0])
    assert selected[0].content == frame_memory("Summary of the earlier conversation:\n" + llm.answer)
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)


def test_plain_mock_llm_echo_does_not_leak_the_prompt():
    memory = LISWinSummaryBuffer.from_defaults(llm=MockLLM(), chat_history=conversation()[:12])
    memory.get(input="x")
    texts = " ".join(i.text for i in memory.strategy.items)
    assert "Rules:" not in texts and "third person" not in texts
    assert memory.llm_calls == 1


# -- LlamaIndex: Memory with SWinSummaryBlock -------------------------------------------------


def _texts(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages)


async def test_memory_block_summarises_flushed_turns():
    llm = PromptRecordingLLM()
    block = SWinSummaryBlock(llm=llm)
    result = await ask_block(block)
    # default output "messages": the summary as a framed user-role memory message, never system
    assert is_li_memory(result[0]) and llm.answer[2:] in memory_body(result[0].content)
    assert no_system_text(result, llm.answer[2:])
    assert result[-1].content == SOURDOUGH_QUERY
    assert block.llm_calls == len(llm.prompts) >= 1
    assert "window 0" in block.explain() or "swin" in block.explain()


async def test_memory_block_text_output_and_defaults():
    # output="text" (asked for): Memory puts the escaped text into its system message
    block = SWinSummaryBlock(output="text", window=2, overlap=0)
    result = await ask_block(block)
    assert result[0].role == MessageRole.SYSTEM and "<swin_summary>" in result[0].content
    assert "Summary of the earlier conversation" in _texts(result)
    assert SWinSummaryBlock().output == "messages" and SWinSummaryBlock().window == 6
    with pytest.raises(ConfigurationError):
        SWinSummaryBlock(gamma=0)
