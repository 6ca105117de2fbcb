"""The receipt's stable-prefix tokens, as the real frameworks show them (fake models).

LangChain: ``create_agent`` with ``GenericFakeChatModel`` through ``KadaneDialMiddleware``; the
receipt is in each reply's ``response_metadata["ctxmgmt"]``. LlamaIndex: a ``SimpleChatEngine``
with ``MockLLM`` over ``KadaneDialMemory``; the receipt is ``memory.last_context.receipt()``.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM

from ctxmgmt.session.layout import stable_prefix_tokens
from langchain_ctxmgmt import KadaneDialMiddleware
from langchain_ctxmgmt.testing import RecordingChatModel
from llamaindex_ctxmgmt import KadaneDialMemory

PAIRS = [
    ("I adopted a grey cat named Miso from the shelter.", "Miso is a lovely name."),
    ("My sourdough starter smells like acetone.", "Feed it more often."),
    ("The car engine rattles when cold.", "Check the heat shield."),
    ("What did I name my grey cat?", "You named her Miso."),
]


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"Sunny in {city}."


class _Model(RecordingChatModel):
    disable_streaming: bool = True


def test_langchain_reply_carries_the_stable_prefix(hashing_embedder) -> None:
    """A tool loop's second call repeats the first call's whole context: all of it is stable."""
    call = {"id": "c1", "name": "get_weather", "args": {"city": "Lisbon"}}
    replies = [ai for _, ai in PAIRS] + [AIMessage("", tool_calls=[call]), "Sunny in Lisbon."]
    model = _Model(messages=iter(replies))
    middleware = KadaneDialMiddleware(embedder=hashing_embedder)
    agent = create_agent(model, [get_weather], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    receipts = []
    for human, _ in PAIRS:
        state = agent.invoke({"messages": [HumanMessage(human)]}, config)
        receipts.append(state["messages"][-1].response_metadata["ctxmgmt"])
    assert receipts[0]["stable_prefix_tokens"] == 0  # the thread's first call
    assert all(0 <= r["stable_prefix_tokens"] <= r["tokens"] for r in receipts)

    state = agent.invoke({"messages": [HumanMessage("Weather in Lisbon?")]}, config)
    tool_call, answer = state["messages"][-3], state["messages"][-1]
    first = tool_call.response_metadata["ctxmgmt"]
    second = answer.response_metadata["ctxmgmt"]
    assert second["stable_prefix_tokens"] == first["tokens"] > 0
    assert second["tokens"] > first["tokens"]  # plus the tool call and its result
    context = middleware.conversation("t1").last_context
    assert context is not None and context.receipt() == second


def test_llamaindex_last_context_carries_the_stable_prefix(hashing_embedder) -> None:
    memory = KadaneDialMemory.from_defaults(embed_model=hashing_embedder)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    previous = None
    figures = []
    for human, _ in PAIRS:
        engine.chat(human)
        context = memory.last_context
        assert context is not None
        expected = stable_prefix_tokens(
            memory.strategy.token_counter,
            context.messages(),
            None if previous is None else previous.messages(),
        )
        figures.append(context.receipt()["stable_prefix_tokens"])
        assert figures[-1] == expected
        previous = context
    assert figures[0] == 0
    memory.get()
    memory.get()  # the same call again: every message of it repeats
    again = memory.last_context
    assert again is not None and again.receipt()["stable_prefix_tokens"] == again.tokens > 0
