"""The summariser/decider calls a memory makes never show in the agent's stream or state.

LangChain: a streamed ``create_agent`` with ``SWinSummaryMiddleware(llm=...)`` and
``DiscourseTreeMiddleware(llm=...)`` whose internal models are called during the run
(``stream_mode="messages"`` and ``astream_events(version="v2")``): only the agent's answer comes
out, no event comes from the internal models, and the state holds no internal message.

LlamaIndex: a streamed ``FunctionAgent`` with ``SWinSummaryBuffer(llm=...)`` and with
``Memory`` + ``SWinSummaryBlock(llm=...)``: the workflow's events carry only the agent's answer.
LlamaIndex's instrumentation (a global dispatcher, not the agent's stream) does see the
summariser's call, as ``LLMCompletionStartEvent``/``LLMCompletionEndEvent`` of the summariser's
own ``complete`` span, never as the ``LLMChat*`` events of the agent's streamed answer.
"""

from __future__ import annotations

from typing import Any

import llama_index.core.instrumentation as instrument
from langchain.agents import create_agent
from langchain.agents.middleware.internal_call_transformer import INTERNAL_CALL_METADATA_KEY
from langchain.agents.middleware.summarization import _summary_config
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from llama_index.core.agent.workflow import AgentInput, AgentOutput, AgentStream
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from pydantic import Field

from ctxmgmt.adapter.kit import INTERNAL_CALL_SOURCE
from langchain_ctxmgmt import DiscourseTreeMiddleware, SWinSummaryMiddleware
from langchain_ctxmgmt._llm import complete_with, internal_call_config
from langchain_ctxmgmt.testing import RecordingChatModel, RecordingListChatModel
from llamaindex_ctxmgmt import SWinSummaryBlock, SWinSummaryBuffer
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, conversation
from tests.integration.test_langchain_agent import history
from tests.integration.test_llamaindex_engines import (
    WeatherLLM,
    memory_with_block,
    weather_agent,
)

SUMMARY = "- INTERNAL SUMMARY: the user adopted a grey cat named Miso."
DECISION = '{"action": "continue", "topic": 0}'
ANSWER = "Your cat is called Miso."
QUESTION = "What did I name my cat?"

# -- LangChain -----------------------------------------------------------------------------------


class InternalModel(RecordingListChatModel):
    """An internal (summariser/decider) model that records every call, streamed or not."""


class AgentModel(RecordingChatModel):
    """The agent's own model: streams its answer word by word, records what it received."""


def _streamed_agent(embedder: Any) -> tuple[Any, AgentModel, InternalModel, InternalModel, list[BaseMessage]]:
    summariser = InternalModel(responses=[SUMMARY])
    decider = InternalModel(responses=[DECISION])
    middleware = [
        SWinSummaryMiddleware(llm=summariser),
        DiscourseTreeMiddleware(llm=decider, embedder=embedder),
    ]
    model = AgentModel(messages=iter([AIMessage(ANSWER, id="answer")]))
    agent = create_agent(model, [], middleware=middleware, checkpointer=InMemorySaver())
    full = [*history(), HumanMessage(QUESTION, id="q")]
    return agent, model, summariser, decider, full


def _internal_texts(summariser: InternalModel, decider: InternalModel) -> list[str]:
    assert summariser.prompts and decider.prompts  # both were called during the streamed run
    return [SUMMARY, DECISION, "INTERNAL SUMMARY", '"action"']


def _assert_state_clean(agent: Any, config: dict[str, Any], full: list[BaseMessage]) -> None:
    messages = agent.get_state(config).values["messages"]
    assert [m.id for m in messages[: len(full)]] == [m.id for m in full]
    assert len(messages) == len(full) + 1 and messages[-1].content == ANSWER
    for m in messages:
        assert not isinstance(m, SystemMessage)
        assert "INTERNAL SUMMARY" not in str(m.content) and '"action"' not in str(m.content)


def _assert_agent_saw_the_summary(model: AgentModel) -> None:
    (received,) = model.received  # the internal calls did their job: the summary reached the agent
    # as a framed memory message (ctxmgmt.messages.framing), never with system authority
    assert any(isinstance(m, HumanMessage) and "INTERNAL SUMMARY" in str(m.content) for m in received)
    assert not any(isinstance(m, SystemMessage) and "INTERNAL SUMMARY" in str(m.content) for m in received)


def test_messages_stream_yields_only_the_answer(hashing_embedder):
    agent, model, summariser, decider, full = _streamed_agent(hashing_embedder)
    config = {"configurable": {"thread_id": "t1"}}

    chunks = list(agent.stream({"messages": full}, config, stream_mode="messages"))

    internal = _internal_texts(summariser, decider)
    assert chunks, "the agent's answer streams"
    for chunk, metadata in chunks:
        assert isinstance(chunk, AIMessageChunk)
        assert not any(text in str(chunk.content) for text in internal)
        assert metadata.get("lc_source") != INTERNAL_CALL_SOURCE
        assert INTERNAL_CALL_METADATA_KEY not in metadata
    assert "".join(str(c.content) for c, _ in chunks) == ANSWER
    _assert_agent_saw_the_summary(model)
    _assert_state_clean(agent, config, full)


async def test_astream_events_show_only_the_agent_model(hashing_embedder):
    agent, model, summariser, decider, full = _streamed_agent(hashing_embedder)
    config = {"configurable": {"thread_id": "t2"}}

    events = [e async for e in agent.astream_events({"messages": full}, config, version="v2")]

    internal = _internal_texts(summariser, decider)
    chat_events = [e for e in events if e["event"].startswith("on_chat_model_")]
    assert chat_events and {e["name"] for e in chat_events} == {"AgentModel"}
    streamed = "".join(
        str(e["data"]["chunk"].content) for e in events if e["event"] == "on_chat_model_stream"
    )
    assert streamed == ANSWER
    for e in events:
        assert e["name"] not in {"InternalModel", INTERNAL_CALL_SOURCE}
        assert INTERNAL_CALL_SOURCE not in e.get("tags", [])
        assert INTERNAL_CALL_METADATA_KEY not in e.get("metadata", {})
        data = e["data"]
        if e["event"].startswith("on_chat_model_"):
            # the agent model's input holds the summary (the middleware's job); its output must not
            data = {k: v for k, v in data.items() if k != "input"}
        assert not any(text in str(data) for text in internal), e["event"]
    _assert_agent_saw_the_summary(model)
    _assert_state_clean(agent, config, full)


def test_internal_call_config_matches_langchain_summarization_middleware():
    ours = internal_call_config()
    theirs = _summary_config()  # SummarizationMiddleware's config for its own summary call
    assert set(theirs["metadata"]) <= set(ours["metadata"])
    assert ours["metadata"][INTERNAL_CALL_METADATA_KEY] == theirs["metadata"][INTERNAL_CALL_METADATA_KEY]
    assert ours["callbacks"] == [] and "nostream" in ours["tags"]


def test_internal_call_outside_an_agent_still_answers():
    model = InternalModel(responses=[SUMMARY])
    complete = complete_with(model)
    assert complete is not None and complete("Summarise this.") == SUMMARY
    assert model.prompts == ["Summarise this."]


# -- LlamaIndex ----------------------------------------------------------------------------------

LI_SUMMARY = "- INTERNAL SUMMARY: the user bakes sourdough bread with a rye starter."


class _InstrumentationLog(BaseEventHandler):
    """Records the class name and span of every LlamaIndex instrumentation event."""

    events: list[tuple[str, str]] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "InstrumentationLog"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.events.append((type(event).__name__, str(event.span_id)))


async def _stream_agent(memory: Any, summariser: PromptRecordingLLM) -> list[tuple[str, str]]:
    """Run a streamed ``FunctionAgent`` over ``memory``; check its events; the instrumentation log."""
    dispatcher = instrument.get_dispatcher()
    log = _InstrumentationLog()
    dispatcher.add_event_handler(log)
    before = len(summariser.prompts)
    try:
        handler = weather_agent(WeatherLLM()).run(user_msg=SOURDOUGH_QUERY, memory=memory)
        events = [event async for event in handler.stream_events()]
        result = await handler
    finally:
        dispatcher.event_handlers.remove(log)

    assert len(summariser.prompts) > before  # the summariser ran during the agent's run
    assert str(result) == "Here is my answer."
    deltas = [e.delta for e in events if isinstance(e, AgentStream)]
    assert "".join(deltas) == "Here is my answer."
    for event in events:
        if isinstance(event, AgentInput):
            continue  # the agent LLM's input holds the memory's summary: that is the memory's job
        assert "INTERNAL SUMMARY" not in str(event), type(event).__name__
    outputs = [e for e in events if isinstance(e, AgentOutput)]
    assert [str(o.response.content) for o in outputs] == ["Here is my answer."]

    # the instrumentation log: the summariser's call is a completion span of its own
    theirs = [name for name, span in log.events if span.startswith("PromptRecordingLLM.")]
    assert theirs and set(theirs) <= {"LLMCompletionStartEvent", "LLMCompletionEndEvent"}
    return log.events


async def test_function_agent_stream_with_a_summary_buffer():
    summariser = PromptRecordingLLM(answer=LI_SUMMARY)
    memory = SWinSummaryBuffer.from_defaults(llm=summariser, chat_history=conversation())
    await _stream_agent(memory, summariser)
    assert all("INTERNAL SUMMARY" not in str(m.content) for m in memory.get_all())


async def test_function_agent_stream_with_a_summary_block():
    summariser = PromptRecordingLLM(answer=LI_SUMMARY)
    memory = memory_with_block(SWinSummaryBlock(llm=summariser))
    await memory.aput_messages(conversation()[:-4])  # the run's own puts make the next flush
    await _stream_agent(memory, summariser)
    assert all("INTERNAL SUMMARY" not in str(m.content) for m in await memory.aget_all())
