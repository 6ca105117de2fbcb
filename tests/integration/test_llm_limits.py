"""Bounded model calls in real framework runs: a hung LLM, a huge message, the limits' parameters.

The hung models block on a ``threading.Event`` until the test ends. Each test measures the wall
time of a selection against the configured ``llm_timeout`` with a generous margin: the point is
that the answer comes (from the offline fallback) instead of never.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, CompletionResponse
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import Field

from ctxmgmt import ConfigurationError
from ctxmgmt.components import llm_call
from ctxmgmt.components.decider import EmbeddedDecider
from ctxmgmt.components.llm_call import abandoned_calls
from langchain_ctxmgmt import DiscourseTreeMiddleware, SWinSummaryMiddleware
from langchain_ctxmgmt import SWinSummaryBuffer as LCSWinSummaryBuffer
from langchain_ctxmgmt.testing import RecordingListChatModel
from llamaindex_ctxmgmt import DiscourseTreeMemory, SWinSummaryBlock
from llamaindex_ctxmgmt import SWinSummaryBuffer as LISWinSummaryBuffer
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, TOPIC_TURNS, conversation
from tests.integration.test_langchain_agent import (
    SYSTEM_PROMPT,
    get_weather,
    history,
    recording_model,
)
from tests.integration.test_llamaindex_engines import RecordingLLM, memory_with_block

TIMEOUT = 0.2
"""The ``llm_timeout`` the tests configure, in seconds."""
MARGIN = 5.0
"""Slack for a loaded machine (embedding, selection, the agent's own model call)."""
RELEASED: list[threading.Event] = []


class HangingChatModel(FakeListChatModel):
    """LangChain chat model whose calls never return until the test ends; records the prompts."""

    responses: list[str] = Field(default_factory=lambda: ["- a late answer"])
    prompts: list[str] = Field(default_factory=list)
    release: Any = Field(default_factory=threading.Event, exclude=True)

    def model_post_init(self, context: Any) -> None:
        RELEASED.append(self.release)

    def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        self.prompts.append(messages[-1].content)
        self.release.wait()
        return "- a late answer that must be ignored"


class HangingLLM(MockLLM):
    """LlamaIndex LLM whose ``complete`` never returns until the test ends; records the prompts."""

    prompts: list[str] = Field(default_factory=list, exclude=True)
    release: Any = Field(default_factory=threading.Event, exclude=True)

    def model_post_init(self, context: Any) -> None:
        RELEASED.append(self.release)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        self.release.wait()
        return CompletionResponse(text="- a late answer that must be ignored")


@pytest.fixture(autouse=True)
def release_hung_calls() -> Iterator[None]:
    """Release every hung model at the end of the test; no abandoned call may outlive it."""
    yield
    for event in RELEASED:
        event.set()
    RELEASED.clear()
    deadline = time.monotonic() + 5
    while abandoned_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert abandoned_calls() == 0


def text_of(messages: list[Any]) -> str:
    return "\n".join(str(m.content) for m in messages)


def agent_run(middleware: Any, question: str) -> tuple[list[BaseMessage], dict[str, Any], float]:
    """``create_agent`` over ``history()`` and ``question``: (what the model got, result, seconds)."""
    model = recording_model(["Your cat is Miso."])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])
    start = time.perf_counter()
    result = agent.invoke({"messages": [*history(), HumanMessage(question, id="q")]})
    elapsed = time.perf_counter() - start
    (received,) = model.received
    return received, result, elapsed


# -- a hung LLM: the select waits llm_timeout, then the fallback answers ----------------------


def test_agent_with_a_hung_summariser_answers_after_the_timeout(caplog):
    summariser = HangingChatModel()
    middleware = SWinSummaryMiddleware(llm=summariser, llm_timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        received, result, elapsed = agent_run(middleware, "What did I name my cat?")

    assert elapsed < TIMEOUT + MARGIN  # one window (turns 0-5) to summarise: one hung call
    assert result["messages"][-1].content == "Your cat is Miso."
    # turn 0 (the cat's name) is not sent verbatim but its extractive summary is
    assert "t0-h" not in {m.id for m in received} and "Miso" in text_of(received)
    assert middleware.llm_calls == len(summariser.prompts) == 1
    assert "LLMTimeoutError" in caplog.text and "using the extractive summary" in caplog.text
    assert abandoned_calls() == 1


async def test_async_agent_with_a_hung_summariser_answers_after_the_timeout(caplog):
    summariser = HangingChatModel()
    middleware = SWinSummaryMiddleware(llm=summariser, llm_timeout=TIMEOUT)
    model = recording_model(["Your cat is Miso."])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        start = time.perf_counter()
        result = await agent.ainvoke({"messages": [*history(), HumanMessage("My cat's name?", id="q")]})
        elapsed = time.perf_counter() - start
    assert elapsed < TIMEOUT + MARGIN
    assert result["messages"][-1].content == "Your cat is Miso."
    assert "Miso" in text_of(model.received[0])
    assert middleware.llm_calls == len(summariser.prompts) == 1
    assert "LLMTimeoutError" in caplog.text


def test_hung_decider_calls_are_bounded_then_not_started(hashing_embedder, caplog):
    decider_model = HangingChatModel()
    middleware = DiscourseTreeMiddleware(embedder=hashing_embedder, llm=decider_model, llm_timeout=TIMEOUT)
    assert isinstance(middleware.strategy.decider.fallback, EmbeddedDecider)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        received, result, elapsed = agent_run(middleware, "What did I name my cat?")
    # every turn asks for a topic decision: the first hangs for TIMEOUT, the others are not
    # started while it runs (the embedded decider answers them at once)
    assert len(decider_model.prompts) == 1
    assert elapsed < TIMEOUT + MARGIN
    assert result["messages"][-1].content == "Your cat is Miso."
    assert middleware.llm_calls == 1  # refused calls were never made
    assert "LLMTimeoutError" in caplog.text and "CallNotStartedError" in caplog.text


def test_llamaindex_memory_with_a_hung_summariser_answers_after_the_timeout(caplog):
    llm = HangingLLM()
    memory = LISWinSummaryBuffer.from_defaults(llm=llm, llm_timeout=TIMEOUT, chat_history=conversation())
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        start = time.perf_counter()
        engine = SimpleChatEngine.from_defaults(
            llm=RecordingLLM(), memory=memory, system_prompt=SYSTEM_PROMPT
        )
        answer = engine.chat(SOURDOUGH_QUERY)
        elapsed = time.perf_counter() - start
    assert str(answer) == "Here is my answer."
    # two windows (turns 0-5 and 4-9) to summarise: the first call hangs for TIMEOUT, the second
    # is not started while it runs
    assert elapsed < TIMEOUT + MARGIN
    assert memory.llm_calls == len(llm.prompts) == 1
    assert "LLMTimeoutError" in caplog.text
    assert memory.strategy.windows and all(w["added"] for w in memory.strategy.windows)  # extractive items


async def test_llamaindex_async_get_with_a_hung_decider(hashing_embedder, caplog):
    llm = HangingLLM()
    memory = DiscourseTreeMemory.from_defaults(
        llm=llm, llm_timeout=TIMEOUT, embed_model=hashing_embedder, chat_history=conversation()[:6]
    )
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        start = time.perf_counter()
        selected = await memory.aget(input=SOURDOUGH_QUERY)
        elapsed = time.perf_counter() - start
    assert len(llm.prompts) == 1 and elapsed < TIMEOUT + MARGIN
    assert "sourdough" in text_of(selected).lower()
    assert memory.llm_calls == 1
    assert "LLMTimeoutError" in caplog.text


async def test_memory_block_with_a_hung_summariser_answers_after_the_timeout(caplog):
    llm = HangingLLM()
    block = SWinSummaryBlock(llm=llm, llm_timeout=TIMEOUT, window=4, overlap=1)
    memory = memory_with_block(block)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        await memory.aput_messages(conversation())
        await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        start = time.perf_counter()
        result = await memory.aget()
        elapsed = time.perf_counter() - start
    assert len(llm.prompts) == 1 and elapsed < TIMEOUT + MARGIN
    assert "sourdough" in text_of(result).lower()
    assert block.llm_calls == 1
    assert "LLMTimeoutError" in caplog.text


# -- a 1,000,000-character message: the prompt is capped, the history is not ----------------


HUGE = "My sourdough starter is called Bubbles. " + "crumb " * 170_000 + "I bake on Sundays."


def test_langchain_a_huge_message_is_capped_for_the_summariser_only():
    assert len(HUGE) > 1_000_000
    llm = RecordingListChatModel(responses=["- The user bakes sourdough."])
    memory = LCSWinSummaryBuffer(llm=llm, llm_max_input_chars=5_000)
    memory.save_context({"input": HUGE}, {"output": "Nice."})
    for user, answer in TOPIC_TURNS[1:6]:
        memory.save_context({"input": user}, {"output": answer or "ok"})
    (prompt,) = llm.prompts
    assert len(prompt) < 5_000 + 2_000  # the cap plus the instructions and the memory
    assert "called Bubbles" in prompt and "characters left out" in prompt
    assert memory.chat_memory.messages[0].content == HUGE  # the raw history keeps every character
    assert memory.llm_calls == 1


def test_llamaindex_a_huge_message_is_capped_for_the_summariser_only():
    llm = PromptRecordingLLM("- The user has a starter called Bubbles.")
    memory = LISWinSummaryBuffer.from_defaults(llm=llm, chat_history=[])
    memory.put(ChatMessage(role="user", content=HUGE))
    memory.put(ChatMessage(role="assistant", content="Nice."))
    for user, answer in TOPIC_TURNS[1:6]:
        memory.put(ChatMessage(role="user", content=user))
        memory.put(ChatMessage(role="assistant", content=answer or "ok"))
    start = time.perf_counter()
    memory.get(input=SOURDOUGH_QUERY)
    assert time.perf_counter() - start < MARGIN
    (prompt,) = llm.prompts
    assert len(prompt) < llm_call.MAX_INPUT_CHARS + 2_000
    assert "called Bubbles" in prompt and "I bake on Sundays." in prompt and "characters left out" in prompt
    assert memory.get_all()[0].content == HUGE


# -- the limits are adapter parameters --------------------------------------------------------


def test_the_limits_reach_the_llm_component():
    memory = LISWinSummaryBuffer.from_defaults(llm=MockLLM(), llm_timeout=2.5, llm_max_input_chars=9_000)
    summarizer = memory.strategy.summarizer
    assert (summarizer.timeout, summarizer.max_input_chars) == (2.5, 9_000)
    middleware = DiscourseTreeMiddleware(llm=HangingChatModel(), llm_timeout=None)
    assert middleware.strategy.decider.timeout is None  # None: wait forever, as before
    defaults = LCSWinSummaryBuffer(llm=RecordingListChatModel(responses=["- x"])).strategy.summarizer
    assert (defaults.timeout, defaults.max_input_chars) == (30.0, 24_000)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: SWinSummaryMiddleware(llm_timeout=0), "llm_timeout must be a finite number > 0 or None"),
        (lambda: LCSWinSummaryBuffer(llm_timeout="30"), "llm_timeout must be"),
        (lambda: LISWinSummaryBuffer.from_defaults(llm_timeout=-1), "llm_timeout must be"),
        (lambda: SWinSummaryBlock(llm_max_input_chars=10), "llm_max_input_chars must be an int >= 200"),
    ],
)
def test_bad_limits_are_configuration_errors(build, message):
    with pytest.raises(ConfigurationError, match=message):
        build()
