"""Every selector in LCEL chains, as ``create_react_agent``'s ``pre_model_hook`` and as a ``StateGraph`` node.

The checks the middlewares pass (what the model receives, threads, streaming, tool calls,
restart from a store), through the real LangChain and LangGraph entry points with a recording
fake chat model. One base class, subclassed once per memory.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, ClassVar, TypedDict

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

import langchain_ctxmgmt as lc
from ctxmgmt import ConfigurationError
from tests.adapters.test_framework_contract import (
    CAT_QUERY,
    CAT_WORD,
    SYSTEM_PROMPT,
    assert_close_contract,
    assert_received,
    fast_components,
    lc_history,
    text_of,
    thread,
)
from tests.adapters.test_langchain_contract import TURNS, words
from tests.integration.test_langchain_agent import RecordingChatModel, get_weather

MAX_TOKENS = 90
ANSWER = "Your cat is called Miso."
HOOK_TOKENS = MAX_TOKENS - words(SYSTEM_PROMPT) - 4
"""The hook's budget: ``create_react_agent`` adds its prompt (words + 4 per message) after the hook."""


def react_agent(selector: Any, replies: list[Any], **kwargs: Any) -> tuple[RecordingChatModel, Any]:
    """(recording fake model, ``create_react_agent`` with ``selector`` as its ``pre_model_hook``)."""
    from langgraph.prebuilt import create_react_agent

    model = RecordingChatModel(messages=iter(replies), disable_streaming=not kwargs.pop("streaming", False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
        agent = create_react_agent(
            model,
            [get_weather],
            prompt=SYSTEM_PROMPT,
            pre_model_hook=selector,
            checkpointer=InMemorySaver(),
            **kwargs,
        )
    return model, agent


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    llm_input_messages: list[BaseMessage]


class LangChainSelectorContract:
    """What a selector must do as a Runnable, a ``pre_model_hook`` and a graph node."""

    selector_class: ClassVar[type[lc.StrategySelector]]
    kwargs: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def make(self, hashing_embedder):
        def make(**overrides: Any) -> lc.StrategySelector:
            components = fast_components(self.selector_class, hashing_embedder)
            return self.selector_class(**{**components, **self.kwargs, **overrides})

        return make

    def full(self) -> list[BaseMessage]:
        return [SystemMessage(SYSTEM_PROMPT, id="s"), *lc_history(), HumanMessage(CAT_QUERY, id="q")]

    def test_lcel_chain_sends_the_model_the_selection(self, make):
        selector = make(max_tokens=MAX_TOKENS, token_counter=words)
        model = RecordingChatModel(messages=iter([ANSWER]))
        full = self.full()
        answer = (selector | model).invoke(full, thread("t"))
        (received,) = model.received
        assert_received(received, full, MAX_TOKENS)
        assert answer.content == ANSWER and selector.last_context.query == CAT_QUERY
        assert all(a is b for a, b in zip(received[:1], full[:1], strict=True))  # the caller's objects

    async def test_close_closes_the_store_it_opened(self, make, closed_stores):
        def use(selector: lc.StrategySelector) -> None:
            selector.invoke([*lc_history(), HumanMessage(CAT_QUERY)], thread("t"))

        await assert_close_contract(make, use, *closed_stores)

    def test_prompt_template_then_selector_then_model(self, make):
        prompt = ChatPromptTemplate.from_messages(
            [("system", SYSTEM_PROMPT), MessagesPlaceholder("history"), ("human", "{question}")]
        )
        selector = make(max_tokens=MAX_TOKENS, token_counter=words)
        model = RecordingChatModel(messages=iter([ANSWER]))
        (prompt | selector | model).invoke({"history": lc_history(), "question": CAT_QUERY}, thread("p"))
        (received,) = model.received
        assert received[0].content == SYSTEM_PROMPT and received[-1].content == CAT_QUERY
        assert len(received) < len(lc_history()) + 2

    async def test_ainvoke_matches_invoke(self, make):
        full = self.full()
        a, b = (
            make(max_tokens=MAX_TOKENS, token_counter=words),
            make(max_tokens=MAX_TOKENS, token_counter=words),
        )
        sync = a.invoke(full, thread("t"))
        async_ = await b.ainvoke(full, thread("t"))
        assert [m.content for m in sync] == [m.content for m in async_]

    def test_lcel_streaming(self, make):
        selector = make(max_tokens=MAX_TOKENS, token_counter=words)
        model = RecordingChatModel(messages=iter([ANSWER]), disable_streaming=False)
        full = self.full()
        chunks = list((selector | model).stream(full, thread("t")))
        assert len(chunks) > 1 and "".join(str(c.content) for c in chunks) == ANSWER
        assert_received(model.received[0], full, MAX_TOKENS)

    def test_pre_model_hook_sends_the_selection_and_keeps_the_state(self, make):
        selector = make(max_tokens=HOOK_TOKENS, token_counter=words)
        model, agent = react_agent(selector, [ANSWER])
        history = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        result = agent.invoke({"messages": history}, thread("t"))
        (received,) = model.received
        assert_received(received, history, MAX_TOKENS)
        assert [m.id for m in result["messages"][: len(history)]] == [m.id for m in history]
        assert result["messages"][-1].content == ANSWER

    def test_pre_model_hook_threads_never_see_each_other(self, make):
        selector = make()
        model, agent = react_agent(selector, ["Noted."] * 3)
        agent.invoke({"messages": [*lc_history(TURNS[:4], "a"), HumanMessage("Thanks!")]}, thread("a"))
        agent.invoke({"messages": [*lc_history(TURNS[4:], "b"), HumanMessage(CAT_QUERY)]}, thread("b"))
        assert CAT_WORD not in text_of(model.received[-1])
        agent.invoke({"messages": [HumanMessage(CAT_QUERY)]}, thread("a"))
        assert CAT_WORD in text_of(model.received[-1])
        assert selector.conversation("a") is not selector.conversation("b")

    def test_pre_model_hook_streams(self, make):
        selector = make(max_tokens=HOOK_TOKENS, token_counter=words)
        model, agent = react_agent(selector, [ANSWER], streaming=True)
        history = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        chunks = [
            m
            for m, _ in agent.stream({"messages": history}, thread("t"), stream_mode="messages")
            if isinstance(m, AIMessageChunk)
        ]
        assert len(chunks) > 1 and "".join(str(c.content) for c in chunks) == ANSWER
        assert_received(model.received[0], history, MAX_TOKENS)

    def test_pre_model_hook_sends_a_tool_turn_whole(self, make):
        call = {"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}
        selector = make(max_tokens=HOOK_TOKENS + 40, token_counter=words)
        model, agent = react_agent(selector, [AIMessage("", tool_calls=[call]), AIMessage("Sunny in Oslo.")])
        history = [*lc_history(), HumanMessage("What is the weather in Oslo?", id="q")]
        result = agent.invoke({"messages": history}, thread("t"))
        first, second = model.received
        assert first[-1].id == "q"
        question, tool_call, tool_result = second[-3:]
        assert question.id == "q" and isinstance(tool_call, AIMessage) and tool_call.tool_calls
        assert isinstance(tool_result, LCToolMessage) and tool_result.tool_call_id == "call-1"
        assert result["messages"][-1].content == "Sunny in Oslo."

    def test_state_graph_node(self, make):
        selector = make(max_tokens=MAX_TOKENS, token_counter=words)
        model = RecordingChatModel(messages=iter([ANSWER]))

        def call_model(state: State) -> dict[str, Any]:
            return {"messages": [model.invoke(state["llm_input_messages"])]}

        graph = StateGraph(State)
        graph.add_node("select", selector)
        graph.add_node("model", call_model)
        graph.add_edge(START, "select")
        graph.add_edge("select", "model")
        app = graph.compile(checkpointer=InMemorySaver())
        full = self.full()
        result = app.invoke({"messages": full}, thread("g"))
        assert_received(model.received[0], full, MAX_TOKENS)
        assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]

    def test_restart_from_the_graph_store_recomputes_nothing(self, make, hashing_embedder):
        store = InMemoryStore()
        history = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        first = make()
        _, agent = react_agent(first, [ANSWER], store=store)
        agent.invoke({"messages": history}, thread("r"))
        assert store.list_namespaces(prefix=("ctxmgmt",))  # the graph's store holds the state
        restarted = make()
        embeds = len(getattr(hashing_embedder, "calls", []))
        _, again = react_agent(restarted, [ANSWER], store=store)
        again.invoke({"messages": history}, thread("r"))
        assert len(restarted.conversation("r").strategy) == len(first.conversation("r").strategy)
        if hasattr(hashing_embedder, "calls"):
            assert len(hashing_embedder.calls) - embeds <= 1  # the question only

    def test_a_bad_input_is_a_ctxmgmt_error(self, make):
        from ctxmgmt import CtxMgmtError

        with pytest.raises(CtxMgmtError):
            make().invoke(42)
        with pytest.raises(CtxMgmtError):
            make().invoke({"other": []})


class TestKadaneDialSelector(LangChainSelectorContract):
    selector_class = lc.KadaneDialSelector


class TestSWinSummarySelector(LangChainSelectorContract):
    selector_class = lc.SWinSummarySelector
    kwargs = {"window": 4, "overlap": 1}


class TestDiscourseTreeSelector(LangChainSelectorContract):
    selector_class = lc.DiscourseTreeSelector


class TestACMTieredSelector(LangChainSelectorContract):
    selector_class = lc.ACMTieredSelector


class TestTopicThreadSelector(LangChainSelectorContract):
    selector_class = lc.TopicThreadSelector


def test_two_instances_of_one_middleware_in_one_agent_with_names(hashing_embedder):
    """``name=`` makes two instances of one class welcome in one agent (and in one store)."""
    from langchain.agents import create_agent

    wide = lc.KadaneDialMiddleware(embedder=hashing_embedder, name="wide")
    narrow = lc.KadaneDialMiddleware(
        embedder=hashing_embedder, name="narrow", max_tokens=MAX_TOKENS, token_counter=words
    )
    model = RecordingChatModel(messages=iter([ANSWER]))
    agent = create_agent(model, [get_weather], middleware=[wide, narrow], checkpointer=InMemorySaver())
    history = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    agent.invoke({"messages": history}, thread("n"))
    (received,) = model.received
    assert received[-1].id == "q" and len(received) < len(history)
    assert wide.name == "wide" and narrow.name == "narrow"
    assert wide.conversation("n").key != narrow.conversation("n").key
    with pytest.raises(ConfigurationError):
        lc.KadaneDialMiddleware(name="")
