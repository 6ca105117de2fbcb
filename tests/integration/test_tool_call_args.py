"""Deep and huge tool-call arguments never stop a thread nor cost their size (issue 33, item 13).

Arguments nested 600-900 deep are valid JSON (``json.loads`` reads them) but used to raise a raw
``RecursionError`` on every call, so the thread was dead; one 20 MB argument took 18-58 s and
over 150 MB on the first call and was re-read (``repr``) on every later one. The memory now
reads a bounded copy of each call (:mod:`ctxmgmt.messages.tool_args`) while the caller's message, with
its arguments untouched, is what the model receives.

Through LangChain ``create_agent`` (a fake chat model recording its input) and LlamaIndex
chat memory ``get`` and ``Memory`` blocks.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from ctxmgmt import Message, Turn
from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.tokens import CallableTokenCounter, default_token_counter
from ctxmgmt.messages.tool_args import (
    MAX_ARGS_CHARS,
    SIZE_KEY,
    measure,
)
from langchain_ctxmgmt import KadaneDialMiddleware, SWinSummaryMiddleware
from llamaindex_ctxmgmt import KadaneDialBlock, KadaneDialMemory, SWinSummaryBuffer
from tests.integration.test_langchain_agent import get_weather, recording_model
from tests.integration.test_llamaindex_engines import memory_with_block

DEPTHS = [600, 900]
BIG = "x" * 20_000_000
"""A 20 MB argument (one long word: the slowest kind of text for a BPE tokenizer)."""


def nested(depth: int) -> Any:
    """A value nested ``depth`` lists deep, built as a model's JSON would be (``json.loads``)."""
    return json.loads("[" * depth + "1" + "]" * depth)


def built(depth: int) -> Any:
    """A value nested ``depth`` lists deep, past what ``json.loads`` could read."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def depth_of(value: Any) -> int:
    return measure(value)[1]


class LongestText:
    """A ``str -> int`` token counter that records the longest text it was asked to count."""

    def __init__(self) -> None:
        self.longest = 0

    def __call__(self, text: str) -> int:
        self.longest = max(self.longest, len(text))
        return len(text.split()) + len(text) // 8


def lc_past(args: dict[str, Any]) -> list[BaseMessage]:
    return [
        HumanMessage("Store this payload, please."),
        AIMessage("", tool_calls=[{"id": "c1", "name": "get_weather", "args": args}]),
        ToolMessage("stored", tool_call_id="c1", name="get_weather"),
        AIMessage("Stored."),
    ]


MIDDLEWARES = {
    "kadanedial": lambda embedder, counter: KadaneDialMiddleware(
        embedder=embedder, token_counter=counter, max_tokens=3000
    ),
    "swin": lambda embedder, counter: SWinSummaryMiddleware(token_counter=counter, max_tokens=3000),
}


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("name", list(MIDDLEWARES))
def test_langchain_agent_keeps_answering_with_deeply_nested_arguments(name, depth, hashing_embedder):
    args = {"payload": nested(depth)}
    model = recording_model([f"Answer {k}." for k in range(3)])
    agent = create_agent(model, [get_weather], middleware=[MIDDLEWARES[name](hashing_embedder, None)])
    messages: list[BaseMessage] = lc_past(args)
    for k in range(3):  # every call used to raise RecursionError
        result = agent.invoke({"messages": [*messages, HumanMessage(f"Is the payload stored ({k})?")]})
        assert result["messages"][-1].content == f"Answer {k}."
        messages = result["messages"]
    sent_calls = [m for m in model.received[-1] if isinstance(m, AIMessage) and m.tool_calls]
    if name == "swin":  # its recent turns: the call is sent as the caller's message, untouched
        assert sent_calls and measure(sent_calls[0].tool_calls[0]["args"]) == measure(args)
    assert all(depth_of(m.tool_calls[0]["args"]) == depth + 1 for m in sent_calls)


@pytest.mark.parametrize("name", list(MIDDLEWARES))
def test_langchain_agent_never_reads_a_20mb_argument_in_full(name, hashing_embedder):
    counter = LongestText()
    model = recording_model(["Warm.", *(f"Answer {k}." for k in range(3))])
    middleware = MIDDLEWARES[name](hashing_embedder, counter)
    agent = create_agent(model, [get_weather], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("warm up")]})
    messages: list[BaseMessage] = lc_past({"blob": BIG})
    for k in range(3):
        tracemalloc.start()
        start = time.perf_counter()
        result = agent.invoke({"messages": [*messages, HumanMessage(f"Is it stored ({k})?")]})
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result["messages"][-1].content == f"Answer {k}."
        messages = result["messages"]
        assert peak < 16_000_000, f"call {k} allocated {peak / 1e6:.0f} MB"  # before: 160 MB
        assert seconds < 10  # before: 18-58 s (loose: a shared machine)
    assert counter.longest < 2 * MAX_ARGS_CHARS  # the 20 MB were never counted as text
    received = model.received[-1]
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in received)  # ~5M tokens: left out
    assert isinstance(received[-1], HumanMessage) and received[-1].content == "Is it stored (2)?"
    assert messages[1].tool_calls[0]["args"]["blob"] is BIG  # the history keeps the argument


def li_past(kwargs: dict[str, Any], *, openai_style: bool = False) -> list[ChatMessage]:
    if openai_style:  # OpenAI's raw form: the arguments as one JSON string
        call = ChatMessage(
            role=MessageRole.ASSISTANT,
            content="",
            additional_kwargs={
                "tool_calls": [{"id": "c1", "function": {"name": "store", "arguments": json.dumps(kwargs)}}]
            },
        )
    else:
        call = ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[ToolCallBlock(tool_call_id="c1", tool_name="store", tool_kwargs=kwargs)],
        )
    return [
        ChatMessage(role=MessageRole.USER, content="Store this payload, please."),
        call,
        ChatMessage(role=MessageRole.TOOL, content="stored", additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role=MessageRole.ASSISTANT, content="Stored."),
    ]


@pytest.mark.parametrize("openai_style", [False, True], ids=["tool_call_block", "openai_kwargs"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_llamaindex_chat_memory_get_with_deeply_nested_arguments(depth, openai_style, hashing_embedder):
    past = li_past({"payload": nested(depth)}, openai_style=openai_style)
    for memory, keeps_the_turn in (
        (
            KadaneDialMemory.from_defaults(chat_history=past, embed_model=hashing_embedder, token_limit=3000),
            False,
        ),
        (SWinSummaryBuffer.from_defaults(chat_history=past, token_limit=3000), True),  # recent turns
    ):
        for k in range(3):  # every call used to raise RecursionError
            memory.put(ChatMessage(role=MessageRole.USER, content=f"Is the payload stored ({k})?"))
            sent = memory.get()
            assert sent[-1].content == f"Is the payload stored ({k})?"
            if keeps_the_turn:  # the caller's message, its arguments as they were
                assert any(m is past[1] for m in sent)
            memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Yes ({k})."))
        assert all(a is b for a, b in zip(memory.get_all(), past, strict=False))


def test_llamaindex_chat_memory_get_with_a_20mb_argument(hashing_embedder):
    counter = LongestText()
    past = li_past({"blob": BIG}, openai_style=True)
    memory = SWinSummaryBuffer.from_defaults(chat_history=past, token_counter=counter, token_limit=3000)
    for k in range(3):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"Is it stored ({k})?"))
        tracemalloc.start()
        sent = memory.get()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert sent[-1].content == f"Is it stored ({k})?"
        assert not any(m is past[1] for m in sent)  # ~5M tokens: left out
        assert peak < 16_000_000, f"call {k} allocated {peak / 1e6:.0f} MB"
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Yes ({k})."))
    assert counter.longest < 2 * MAX_ARGS_CHARS


def test_llamaindex_memory_block_with_nested_arguments(hashing_embedder):
    # Memory's own SQL chat store refuses arguments past pydantic's serialisation depth (about
    # 250 levels) before any block sees them; below it, the block reads its bounded copy.
    block = KadaneDialBlock(embed_model=hashing_embedder)
    memory = memory_with_block(block, token_limit=3000)
    past = li_past({"payload": nested(200)})
    for i in range(12):
        past += [
            ChatMessage(role=MessageRole.USER, content=f"Filler question {i} about sourdough?"),
            ChatMessage(role=MessageRole.ASSISTANT, content=f"Filler answer {i}."),
        ]

    async def run() -> list[ChatMessage]:
        await memory.aput_messages(past)
        await memory.aput(ChatMessage(role="user", content="Which payload did I store?"))
        return await memory.aget()

    sent = asyncio.run(run())
    assert sent[-1].content == "Which payload did I store?"
    calls = [b for m in sent for b in m.blocks if isinstance(b, ToolCallBlock)]
    assert all(depth_of(c.tool_kwargs) == 201 for c in calls)  # sent as stored, never cut


# -- the core: messages with cut calls (bounding itself: tests/unit/messages/test_tool_args.py) ----


def test_message_with_cut_arguments_renders_counts_and_round_trips():
    message = Message(
        "assistant", "", tool_calls=({"id": "c", "name": "store", "args": {"blob": "word " * 400_000}},)
    )
    assert message.tool_calls[0][SIZE_KEY] > 2_000_000
    turn = Turn(0, (Message("user", "store it"), message))
    assert len(turn.text) < 5_000 and "characters]" in turn.text
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    counter = default_token_counter()
    estimate = message_tokens(counter, message)
    exact = counter.count(json.dumps({"blob": "word " * 400_000}))
    assert 0.9 * exact < estimate < 1.1 * exact + 100  # the cut call still weighs what it costs


def test_deep_arguments_never_raise_anywhere_the_memory_reads_them():
    message = Message("assistant", "", tool_calls=({"id": "c", "name": "f", "args": built(5_000)},))
    turn = Turn(0, (Message("user", "go"), message))
    assert turn.fingerprint and message_tokens(CallableTokenCounter(len), message) > 0
