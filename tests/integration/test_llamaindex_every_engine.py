"""Every LlamaIndex chat engine and agent with every ctxmgmt memory, offline.

Engines: ``SimpleChatEngine``, ``ContextChatEngine``, ``CondensePlusContextChatEngine``,
``CondenseQuestionChatEngine``, each sync, async, streaming and async streaming. Agents:
``FunctionAgent``, ``ReActAgent`` and a two-agent ``AgentWorkflow`` (with a handoff), run
and streamed through ``handler.stream_events()``. The LLMs are LlamaIndex's mocks, recording
what they receive; retrieval runs over a tiny in-memory index with ``MockEmbedding``.

Each test spies on the memory's ``get``/``aget`` and asserts that the LLM received exactly
what the memory returned, in the place the engine puts it, and that the memory kept every
message (the history is lossless).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import AgentStream, AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.tools import FunctionTool

from llamaindex_ctxmgmt import (
    ACMTieredBuffer,
    DiscourseTreeMemory,
    KadaneDialMemory,
    StrategyMemory,
    SWinSummaryBuffer,
    TopicThreadMemory,
)
from llamaindex_ctxmgmt.testing import RecordingFunctionLLM
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH_QUERY,
    TOPIC_TURNS,
    WEATHER_QUERY,
    conversation,
    tokens,
)
from tests.integration.test_llamaindex_engines import (
    SYSTEM_PROMPT,
    RecordingLLM,
    WeatherLLM,
    get_weather,
    weather_agent,
)

MEMORY_CLASSES: list[type[StrategyMemory]] = [
    KadaneDialMemory,
    SWinSummaryBuffer,
    DiscourseTreeMemory,
    ACMTieredBuffer,
    TopicThreadMemory,
]
TOKEN_LIMIT = 400
"""Below the conversation's size (about 550 tokens): every memory has to select."""
ANSWER = "Here is my answer."
WEATHER_ANSWER = "Weather report: Oslo: -2 C, heavy snow"
MODES = ["sync", "async", "stream", "astream"]


def make_memory(cls: type[StrategyMemory], embedder: Any) -> StrategyMemory:
    """``cls`` holding the test conversation; fast components (memories that embed nothing take none)."""
    kwargs: dict[str, Any] = {}
    if "embed_model" in cls.model_fields:
        kwargs["embed_model"] = embedder
    if "entity_extractor" in cls.model_fields:
        kwargs["entity_extractor"] = CapitalisedExtractor()  # spaCy is slow to load
    return cls.from_defaults(chat_history=conversation(), token_limit=TOKEN_LIMIT, **kwargs)


@pytest.fixture(params=MEMORY_CLASSES, ids=lambda cls: cls.__name__)
def memory(request, hashing_embedder) -> StrategyMemory:
    return make_memory(request.param, hashing_embedder)


@pytest.fixture
def selections(memory, monkeypatch) -> list[tuple[Any, list[ChatMessage]]]:
    """Every ``(input, returned messages)`` of the memory's ``get``/``aget``, in call order."""
    calls: list[tuple[Any, list[ChatMessage]]] = []
    cls = type(memory)
    get, aget = cls.get, cls.aget

    def spy_get(self: Any, input: Any = None, **kwargs: Any) -> list[ChatMessage]:
        result = get(self, input, **kwargs)
        calls.append((input, list(result)))
        return result

    async def spy_aget(self: Any, input: Any = None, **kwargs: Any) -> list[ChatMessage]:
        result = await aget(self, input, **kwargs)
        calls.append((input, list(result)))
        return result

    monkeypatch.setattr(cls, "get", spy_get)
    monkeypatch.setattr(cls, "aget", spy_aget)
    return calls


# -- helpers ---------------------------------------------------------------------------------


def view(messages: Sequence[ChatMessage]) -> list[tuple[str, str, tuple[str, ...]]]:
    """What identifies a message for the LLM: role, text, tool call ids."""
    return [
        (
            m.role.value,
            m.content or "",
            tuple(b.tool_call_id or "" for b in m.blocks if isinstance(b, ToolCallBlock)),
        )
        for m in messages
    ]


def assert_selected(memory: StrategyMemory, selected: list[ChatMessage], question: str) -> None:
    """A real selection: within the budget, less than the whole history, made for ``question``."""
    assert 0 < tokens(memory, selected) <= TOKEN_LIMIT
    assert tokens(memory, selected) < tokens(memory, conversation())
    assert memory.last_context is not None and memory.last_context.query == question


def assert_history_grew(memory: StrategyMemory, before: int, question: str, answer: str) -> None:
    history = memory.get_all()
    assert [m.content for m in history[:before]] == [m.content for m in conversation()]
    assert [(m.role, m.content) for m in history[before:]] == [
        (MessageRole.USER, question),
        (MessageRole.ASSISTANT, answer),
    ]


def unselected_user_texts(selected: Sequence[ChatMessage]) -> list[str]:
    """User messages of the conversation that no selected message contains (verbatim or summary)."""
    texts = [m.content or "" for m in selected]
    return [user for user, _ in TOPIC_TURNS if not any(user in t for t in texts)]


def wait_until(done: Callable[[], bool], timeout: float = 5.0) -> None:
    """Streaming engines write the answer to memory from a thread once the stream is read."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the engine did not store the streamed answer"
        time.sleep(0.005)


def ask(engine: Any, mode: str, question: str, memory: StrategyMemory, before: int) -> str:
    """One exchange with ``engine`` in ``mode``; waits until the memory holds the answer."""
    stored = lambda: len(memory.get_all()) == before + 2  # noqa: E731

    if mode == "sync":
        return str(engine.chat(question))
    if mode == "stream":
        text = "".join(engine.stream_chat(question).response_gen)
        wait_until(stored)
        return text

    async def run() -> str:
        if mode == "async":
            return str(await engine.achat(question))
        response = await engine.astream_chat(question)
        text = "".join([token async for token in response.async_response_gen()])
        deadline = time.monotonic() + 5
        while not stored():  # the write is a task of this loop
            assert time.monotonic() < deadline, "the engine did not store the streamed answer"
            await asyncio.sleep(0.005)
        return text

    return asyncio.run(run())


def retriever() -> Any:
    return index().as_retriever(similarity_top_k=2)


def index() -> VectorStoreIndex:
    nodes = [
        TextNode(text="Sourdough proofing guide: bulk ferment 4-6 hours, then proof 1-2 hours."),
        TextNode(text="Marathon taper guide: cut weekly volume by 40% in the last two weeks."),
    ]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


# -- input types ---------------------------------------------------------------------------


def test_every_input_type_selects_for_its_text(memory):
    by_str = view(memory.get(input=SOURDOUGH_QUERY))
    assert view(memory.get(input=QueryBundle(query_str=SOURDOUGH_QUERY))) == by_str
    assert memory.last_context.query == SOURDOUGH_QUERY
    assert view(memory.get(input=ChatMessage(role="user", content=SOURDOUGH_QUERY))) == by_str
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    assert view(memory.get(input=None))[:-1] == view(memory.get(input=SOURDOUGH_QUERY))[:-1]
    assert memory.last_context.query == SOURDOUGH_QUERY


async def test_async_get_accepts_a_query_bundle(memory):
    selected = await memory.aget(input=QueryBundle(query_str=SOURDOUGH_QUERY))
    assert view(selected) == view(memory.get(input=SOURDOUGH_QUERY))


# -- chat engines --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_simple_chat_engine(memory, selections, mode):
    """Puts the question, then ``get()``: the LLM gets the system prompt and the selection."""
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT)
    before = len(memory.get_all())
    assert ask(engine, mode, SOURDOUGH_QUERY, memory, before) == ANSWER

    (sent,) = llm.received
    ((query, selected),) = selections
    assert query is None
    assert view(sent) == view([ChatMessage(role="system", content=SYSTEM_PROMPT), *selected])
    assert sent[-1].content == SOURDOUGH_QUERY
    assert_selected(memory, selected, SOURDOUGH_QUERY)
    assert tokens(memory, sent) <= TOKEN_LIMIT  # the system prompt counts against the limit
    assert_history_grew(memory, before, SOURDOUGH_QUERY, ANSWER)


@pytest.mark.parametrize("mode", MODES)
def test_context_chat_engine(memory, selections, mode):
    """``get(input=...)`` before the put; retrieved context in the system message."""
    llm = RecordingLLM()
    engine = ContextChatEngine.from_defaults(
        retriever=retriever(), llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT
    )
    before = len(memory.get_all())
    assert ask(engine, mode, SOURDOUGH_QUERY, memory, before) == ANSWER

    (sent,) = llm.received
    ((query, selected),) = selections
    assert str(query.query_str if isinstance(query, QueryBundle) else query) == SOURDOUGH_QUERY
    assert sent[0].role == MessageRole.SYSTEM
    assert "Sourdough proofing guide" in sent[0].content and SYSTEM_PROMPT in sent[0].content
    assert view(sent[1:-1]) == view(selected)
    assert sent[-1].role == MessageRole.USER and SOURDOUGH_QUERY in sent[-1].content
    assert_selected(memory, selected, SOURDOUGH_QUERY)
    assert_history_grew(memory, before, SOURDOUGH_QUERY, ANSWER)


@pytest.mark.parametrize("mode", MODES)
def test_condense_plus_context_chat_engine(memory, selections, mode):
    """``get(input=...)`` feeds both the condense prompt and the answering call."""
    llm = RecordingLLM()
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=retriever(), llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT
    )
    before = len(memory.get_all())
    assert ask(engine, mode, SOURDOUGH_QUERY, memory, before) == ANSWER

    ((query, selected),) = selections
    assert query == SOURDOUGH_QUERY
    assert_selected(memory, selected, SOURDOUGH_QUERY)
    (condense,) = llm.prompts  # the condense step: the selection, rendered, and nothing else
    for message in selected:
        assert (message.content or "") in condense
    for text in unselected_user_texts(selected):
        assert text not in condense
    (sent,) = llm.received
    assert sent[0].role == MessageRole.SYSTEM and "Sourdough proofing guide" in sent[0].content
    assert view(sent[1:-1]) == view(selected)
    assert sent[-1].role == MessageRole.USER and SOURDOUGH_QUERY in sent[-1].content
    assert_history_grew(memory, before, SOURDOUGH_QUERY, ANSWER)


@pytest.mark.parametrize("mode", MODES)
def test_condense_question_chat_engine(memory, selections, mode):
    """``get(input=...)`` feeds the condense call; the query engine answers the standalone question."""
    llm = RecordingLLM()
    query_engine = index().as_query_engine(llm=llm, streaming=mode in ("stream", "astream"))
    engine = CondenseQuestionChatEngine.from_defaults(query_engine=query_engine, llm=llm, memory=memory)
    before = len(memory.get_all())
    assert ask(engine, mode, SOURDOUGH_QUERY, memory, before) == ANSWER

    ((query, selected),) = selections
    assert query == SOURDOUGH_QUERY
    assert_selected(memory, selected, SOURDOUGH_QUERY)
    condense, answer = llm.received
    prompt = condense[-1].content
    assert f"<Follow Up Message>\n{SOURDOUGH_QUERY}" in prompt
    for message in selected:
        assert (message.content or "") in prompt
    for text in unselected_user_texts(selected):
        assert text not in prompt
    # the standalone question (the mock condenses to the question itself) and the context
    assert SOURDOUGH_QUERY in answer[-1].content and "Sourdough proofing guide" in answer[-1].content
    assert_history_grew(memory, before, SOURDOUGH_QUERY, ANSWER)


# -- agents ----------------------------------------------------------------------------------


async def run_agent(agent: Any, question: str, memory: StrategyMemory, stream: bool) -> tuple[str, str]:
    """(final answer, streamed text); ``stream`` reads ``handler.stream_events()`` first."""
    handler = agent.run(user_msg=question, memory=memory)
    streamed = ""
    if stream:
        streamed = "".join([ev.delta async for ev in handler.stream_events() if isinstance(ev, AgentStream)])
    return str(await handler), streamed


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_function_agent(memory, selections, stream):
    llm = WeatherLLM()
    before = len(memory.get_all())
    answer, streamed = await run_agent(weather_agent(llm), WEATHER_QUERY, memory, stream)
    assert answer == WEATHER_ANSWER
    if stream:
        assert streamed.endswith(WEATHER_ANSWER)

    first, second = llm.received
    input_, selected = selections[0]
    assert view(first) == view([ChatMessage(role="system", content=SYSTEM_PROMPT), *selected])
    assert first[-1].content == WEATHER_QUERY
    assert_selected(memory, selected, WEATHER_QUERY)
    # after the tool ran: the memory's selection again, then the call and its result
    assert view(second[-2:]) == view(memory.get_all()[before + 1 : before + 3])
    assert second[-1].additional_kwargs["tool_call_id"] == "call_new_0"
    history = memory.get_all()
    assert [m.role for m in history[before:]] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    assert history[-1].content == WEATHER_ANSWER


class ReActLLM(RecordingFunctionLLM):
    """Mock LLM answering in ReAct's text format: one weather tool step, then the answer."""

    def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
        last = messages[-1].content or ""
        if last.startswith("Observation:"):
            observed = last.removeprefix("Observation:").strip()
            text = f"Thought: I can answer without using any more tools.\nAnswer: Weather report: {observed}"
        elif "weather" in last.lower():
            text = 'Thought: I need the weather tool.\nAction: get_weather\nAction Input: {"city": "Oslo"}'
        else:
            text = f"Thought: I can answer without using any more tools.\nAnswer: {ANSWER}"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_react_agent(memory, selections, stream):
    llm = ReActLLM()
    agent = ReActAgent(
        tools=[FunctionTool.from_defaults(fn=get_weather)], llm=llm, system_prompt=SYSTEM_PROMPT
    )
    before = len(memory.get_all())
    answer, streamed = await run_agent(agent, WEATHER_QUERY, memory, stream)
    assert answer == WEATHER_ANSWER
    if stream:
        assert streamed.endswith(WEATHER_ANSWER) and "Action: get_weather" in streamed

    first, second = llm.received
    _, selected = selections[0]
    # the ReAct header (tools, format, our system prompt), then the memory's selection
    assert first[0].role == MessageRole.SYSTEM and SYSTEM_PROMPT in first[0].content
    assert "get_weather" in first[0].content
    assert view(first[1:]) == view(selected)
    assert first[-1].content == WEATHER_QUERY
    assert_selected(memory, selected, WEATHER_QUERY)
    assert second[-1].content == "Observation: Oslo: -2 C, heavy snow"
    history = memory.get_all()
    assert history[before].content == WEATHER_QUERY and len(history) > before + 1


class RouterLLM(RecordingFunctionLLM):
    """The front agent's mock LLM: hands every question over to the weather agent."""

    def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
        call = ToolCallBlock(
            tool_call_id="call_handoff",
            tool_name="handoff",
            tool_kwargs={"to_agent": "weather", "reason": "a weather question"},
        )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


class HandedOverWeatherLLM(WeatherLLM):
    """The weather agent's mock LLM: after the handoff, it calls ``get_weather`` first."""

    def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
        last = messages[-1]
        if last.role == MessageRole.TOOL and last.additional_kwargs.get("tool_call_id") == "call_handoff":
            call = ToolCallBlock(
                tool_call_id="call_weather", tool_name="get_weather", tool_kwargs={"city": "Oslo"}
            )
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        return super().respond(messages)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_agent_workflow_with_a_handoff(memory, selections, stream):
    router_llm, weather_llm = RouterLLM(), HandedOverWeatherLLM()
    router = FunctionAgent(
        name="router",
        description="Routes questions.",
        system_prompt="You route questions.",
        llm=router_llm,
        can_handoff_to=["weather"],
    )
    weather = FunctionAgent(
        name="weather",
        description="Answers weather questions.",
        system_prompt=SYSTEM_PROMPT,
        tools=[FunctionTool.from_defaults(fn=get_weather)],
        llm=weather_llm,
    )
    workflow = AgentWorkflow(agents=[router, weather], root_agent="router")
    before = len(memory.get_all())
    answer, streamed = await run_agent(workflow, WEATHER_QUERY, memory, stream)
    assert answer == WEATHER_ANSWER
    if stream:
        assert streamed.endswith(WEATHER_ANSWER)

    # the router's only call: its system prompt (with the handoff note), the selection
    (routed,) = router_llm.received
    _, selected = selections[0]
    assert routed[0].role == MessageRole.SYSTEM and "You route questions." in routed[0].content
    assert view(routed[1:]) == view(selected)
    assert_selected(memory, selected, WEATHER_QUERY)
    # the weather agent's first call: its own system prompt, then a selection of the memory
    first = weather_llm.received[0]
    assert first[0].content.startswith(SYSTEM_PROMPT)
    assert any(view(first[1 : 1 + len(s)]) == view(s) for _, s in selections[1:])
    assert WEATHER_QUERY in [m.content for m in first]
    history = memory.get_all()
    assert history[before].content == WEATHER_QUERY
    assert history[-1].content == WEATHER_ANSWER
    # the handoff call and its result are stored together
    handoff = [
        m for m in history if any(getattr(b, "tool_call_id", None) == "call_handoff" for b in m.blocks)
    ]
    results = [m for m in history if m.additional_kwargs.get("tool_call_id") == "call_handoff"]
    assert len(handoff) == len(results) == 1
