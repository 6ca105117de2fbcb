"""Real LlamaIndex chat engines, agents and Memory running with KadaneDialMemory / KadaneDialBlock.

The LLMs are LlamaIndex's own mocks, subclassed to record exactly what they receive.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    ImageBlock,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import Memory
from llama_index.core.memory.memory import InsertMethod
from llama_index.core.schema import TextNode
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.tools import FunctionTool

from ctxmgmt import KadaneDialStrategy, TopicThreadStrategy
from ctxmgmt.messages.exceptions import ConfigurationError
from llamaindex_ctxmgmt import KadaneDialBlock, KadaneDialMemory, TopicThreadBlock
from llamaindex_ctxmgmt._block import DEFAULT_BLOCK_TOKENS
from llamaindex_ctxmgmt.testing import RecordingFunctionLLM
from tests.adapters.test_llamaindex_contract import (
    MARATHON,
    MARATHON_QUERY,
    PANDAS,
    SOURDOUGH,
    SOURDOUGH_QUERY,
    TOMATOES,
    TOOL_CALL_ID,
    TOPIC_TURNS,
    WEATHER,
    WEATHER_QUERY,
    conversation,
    tokens,
    turns_present,
)

SYSTEM_PROMPT = "You are a concise assistant."


class RecordingLLM(MockLLM):
    """A chat MockLLM that records every message list and prompt it receives."""

    received: list[list[ChatMessage]] = Field(default_factory=list, exclude=True)
    prompts: list[str] = Field(default_factory=list, exclude=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(is_chat_model=True, **kwargs)

    answer: str = "Here is my answer."

    def _reply(self, messages: Sequence[ChatMessage]) -> str:
        self.received.append(list(messages))
        # a condense step sent as chat (CondenseQuestionChatEngine): answer with the follow-up
        prompt = (messages[-1].content or "") if messages else ""
        match = re.search(r"(?:Follow Up Input: |<Follow Up Message>\n)(.*)\n", prompt)
        return match.group(1) if match else self.answer

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=self._reply(messages)))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """Streams the same reply word by word (``astream_chat`` of ``CustomLLM`` wraps this)."""
        words = self._reply(messages).split(" ")

        def gen() -> ChatResponseGen:
            text = ""
            for i, word in enumerate(words):
                delta = word if i == 0 else f" {word}"
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

        return gen()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        # the condense step: answer with the follow-up question itself
        match = re.search(r"Follow Up Input: (.*)\n", prompt)
        return CompletionResponse(text=match.group(1) if match else "Here is my answer.")


class WeatherLLM(RecordingFunctionLLM):
    """A recording function-calling LLM that calls ``get_weather`` for weather questions."""

    def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"Weather report: {last.content}")
        if "weather" in (last.content or "").lower():
            call = ToolCallBlock(
                tool_call_id=f"call_new_{len(self.received) - 1}",
                tool_name="get_weather",
                tool_kwargs={"city": "Oslo"},
            )
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content="Here is my answer.")


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: -2 C, heavy snow"


def assert_selected(messages: Sequence[ChatMessage], relevant: set[int], excluded: set[int]) -> set[int]:
    """Every relevant turn is there, no excluded one, and at most two other turns.

    KadaneDial's last pass may add one weak span and the neighbour term may widen a span
    by a turn, so the turns next to a relevant span are not asserted absent.
    """
    present = turns_present(messages)
    assert relevant <= present
    assert not present & excluded
    assert len(present - relevant) <= 2
    return present


def user_texts(messages: Sequence[ChatMessage]) -> list[str]:
    return [m.content for m in messages if m.role == MessageRole.USER]


def assert_chronological(messages: Sequence[ChatMessage]) -> None:
    """Topic turns appear in conversation order."""
    order = [i for text in user_texts(messages) for i, (u, _) in enumerate(TOPIC_TURNS) if u == text]
    assert order == sorted(order)


def has_old_tool_call(messages: Sequence[ChatMessage]) -> tuple[bool, bool]:
    """(the old Oslo tool call is present, its result is present)."""
    call = any(
        isinstance(b, ToolCallBlock) and b.tool_call_id == TOOL_CALL_ID for m in messages for b in m.blocks
    )
    result = any(
        m.role == MessageRole.TOOL and m.additional_kwargs.get("tool_call_id") == TOOL_CALL_ID
        for m in messages
    )
    return call, result


def chat_once(memory: Any, query: str = SOURDOUGH_QUERY) -> list[ChatMessage]:
    """One ``SimpleChatEngine`` exchange (system prompt, ``query``) over ``memory``: what the LLM got.

    Asserts what holds for every memory: one LLM call, the system prompt first, the question
    last, and the memory stores both the question and the answer (the history is lossless).
    """
    before = len(memory.get_all())
    llm = RecordingLLM()
    SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT).chat(query)
    (sent,) = llm.received
    assert sent[0].role == MessageRole.SYSTEM and sent[0].content == SYSTEM_PROMPT
    assert sent[-1].role == MessageRole.USER and sent[-1].content == query
    assert len(memory.get_all()) == before + 2
    return sent


def weather_agent(llm: WeatherLLM, system_prompt: str = SYSTEM_PROMPT) -> FunctionAgent:
    """A ``FunctionAgent`` with the ``get_weather`` tool."""
    return FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=get_weather)], llm=llm, system_prompt=system_prompt
    )


@pytest.fixture
def memory(hashing_embedder) -> KadaneDialMemory:
    memory = KadaneDialMemory.from_defaults(embed_model=hashing_embedder)
    memory.set(conversation())
    return memory


# -- SimpleChatEngine: puts the user message, then get() -------------------------------------


def test_simple_chat_engine_sends_relevant_turns_only(memory):
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT)

    engine.chat(SOURDOUGH_QUERY)
    (sent,) = llm.received
    assert sent[0].role == MessageRole.SYSTEM and sent[0].content == SYSTEM_PROMPT
    assert sent[-1].role == MessageRole.USER and sent[-1].content == SOURDOUGH_QUERY
    assert_selected(sent, SOURDOUGH, PANDAS | WEATHER | TOMATOES)
    assert has_old_tool_call(sent) == (False, False)
    assert_chronological(sent)
    # the memory's messages are passed through as the very objects stored
    stored = memory.get_all()
    assert all(any(m is s for s in stored) for m in sent[1:])

    engine.chat(MARATHON_QUERY)
    sent = llm.received[-1]
    assert_selected(sent, MARATHON, SOURDOUGH | PANDAS)
    assert sent[-1].content == MARATHON_QUERY

    history = memory.get_all()
    assert len(history) == 28 + 4
    assert [m.content for m in history[-4:]] == [
        SOURDOUGH_QUERY,
        "Here is my answer.",
        MARATHON_QUERY,
        "Here is my answer.",
    ]
    assert engine.chat_history == history


async def test_simple_chat_engine_async(memory):
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    await engine.achat(MARATHON_QUERY)
    assert_selected(llm.received[-1], MARATHON, SOURDOUGH | PANDAS)
    assert len(await memory.aget_all()) == 30


def test_simple_chat_engine_prefix_tokens_count_against_the_limit(memory):
    llm = RecordingLLM()
    long_system = "You answer questions about cooking, programming, running and gardening. " * 8
    memory.token_limit = 260
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=long_system)
    engine.chat(SOURDOUGH_QUERY)
    sent = llm.received[-1]
    prefix = len(memory.tokenizer_fn(long_system))
    assert prefix > 80
    assert tokens(memory, sent[1:]) <= 260 - prefix
    assert sent[-1].content == SOURDOUGH_QUERY
    assert turns_present(sent) & SOURDOUGH


def test_simple_chat_engine_with_the_real_embedder(default_embedder):
    memory = KadaneDialMemory.from_defaults(chat_history=conversation(), embed_model=default_embedder)
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    # no word in common with the sourdough turns' key terms except "bread"
    engine.chat("My homemade bread is gummy inside. What should I change when baking it?")
    assert_selected(llm.received[-1], SOURDOUGH, PANDAS | WEATHER | TOMATOES)
    engine.chat("Is it still cold and snowy in Norway's capital?")
    sent = llm.received[-1]
    assert_selected(sent, WEATHER, SOURDOUGH | PANDAS | TOMATOES)
    assert has_old_tool_call(sent) == (True, True)
    assert len(memory.get_all()) == 32


# -- CondensePlusContextChatEngine: get(input=...) before the user message is put ----------


def _retriever():
    nodes = [
        TextNode(text="Sourdough proofing guide: bulk ferment 4-6 hours, then proof 1-2 hours."),
        TextNode(text="Marathon taper guide: cut weekly volume by 40% in the last two weeks."),
    ]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_retriever(similarity_top_k=2)


def test_condense_plus_context_chat_engine(memory):
    llm = RecordingLLM()
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=_retriever(), llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT
    )
    response = engine.chat(SOURDOUGH_QUERY)
    assert str(response) == "Here is my answer."
    assert memory.last_context.query == SOURDOUGH_QUERY  # get(input=...) before the put

    # the condense prompt carries the selected history only
    (condense,) = llm.prompts
    for i in SOURDOUGH:
        assert TOPIC_TURNS[i][0] in condense
    for i in PANDAS | WEATHER | TOMATOES:
        assert TOPIC_TURNS[i][0] not in condense

    # the answering call: system prompt with the retrieved context, the selected turns, the question
    sent = llm.received[-1]
    assert sent[0].role == MessageRole.SYSTEM and "Sourdough proofing guide" in sent[0].content
    assert_selected(sent, SOURDOUGH, PANDAS | WEATHER | TOMATOES)
    assert sent[-1].role == MessageRole.USER and SOURDOUGH_QUERY in sent[-1].content
    assert_chronological(sent[:-1])

    history = memory.get_all()
    assert len(history) == 30 and history[-2].content == SOURDOUGH_QUERY


async def test_condense_plus_context_chat_engine_async(memory):
    llm = RecordingLLM()
    engine = CondensePlusContextChatEngine.from_defaults(retriever=_retriever(), llm=llm, memory=memory)
    await engine.achat(MARATHON_QUERY)
    assert_selected(llm.received[-1], MARATHON, SOURDOUGH | PANDAS)
    assert len(await memory.aget_all()) == 30


# -- FunctionAgent: aget(), aget(input=...), aput_messages with tool messages ---------------


async def test_function_agent_without_a_tool_call(memory):
    llm = WeatherLLM()
    result = await weather_agent(llm).run(user_msg=SOURDOUGH_QUERY, memory=memory)
    assert str(result) == "Here is my answer."
    (sent,) = llm.received
    assert sent[0].content == SYSTEM_PROMPT and sent[-1].content == SOURDOUGH_QUERY
    assert_selected(sent, SOURDOUGH, PANDAS | WEATHER | TOMATOES)
    assert has_old_tool_call(sent) == (False, False)  # the old tool turn left whole
    assert len(memory.get_all()) == 30


async def test_function_agent_with_tool_calls(memory):
    llm = WeatherLLM()
    agent = weather_agent(llm)
    result = await agent.run(user_msg=WEATHER_QUERY, memory=memory)
    assert str(result) == "Weather report: Oslo: -2 C, heavy snow"

    first, second = llm.received
    # the old weather turn is relevant: its call and its result come together, in order
    assert has_old_tool_call(first) == (True, True)
    assert_selected(first, WEATHER, SOURDOUGH | TOMATOES)
    assert first[-1].content == WEATHER_QUERY
    # second call (after the tool ran): aget(input=...) + the agent's scratchpad
    assert memory.last_context.query == WEATHER_QUERY
    assert [m.role for m in second[-3:]] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL]
    assert second[-1].additional_kwargs["tool_call_id"] == "call_new_0"

    # everything the agent put is stored: user, tool call, tool result, final answer
    history = memory.get_all()
    assert len(history) == 28 + 4
    assert [m.role for m in history[-4:]] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]

    # a later unrelated question: neither weather turn (old or new) is split from its result
    await agent.run(user_msg=MARATHON_QUERY, memory=memory)
    sent = llm.received[-1]
    new_call = any(
        isinstance(b, ToolCallBlock) and b.tool_call_id == "call_new_0" for m in sent for b in m.blocks
    )
    new_result = any(m.additional_kwargs.get("tool_call_id") == "call_new_0" for m in sent)
    assert new_call == new_result
    old_call, old_result = has_old_tool_call(sent)
    assert old_call == old_result
    assert MARATHON <= turns_present(sent)


# -- Memory with KadaneDialBlock: flushed turns come back when relevant -----------------------


def memory_with_block(
    block: Any,
    *,
    session_id: str = "session-1",
    token_limit: int = 400,
    chat_history_token_ratio: float = 0.4,
    token_flush_size: int = 60,
    **kwargs: Any,
) -> Memory:
    """A LlamaIndex ``Memory`` (400 tokens, flushing 60 at a time) with ``block`` as its memory block.

    In memory (SQLite); ``kwargs`` are more ``Memory.from_defaults`` arguments.
    """
    return Memory.from_defaults(
        session_id=session_id,
        token_limit=token_limit,
        chat_history_token_ratio=chat_history_token_ratio,
        token_flush_size=token_flush_size,
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **kwargs,
    )


async def ask_block(block: Any, history: list[ChatMessage] | None = None, **kwargs: Any) -> list[ChatMessage]:
    """Put ``history`` (default the conversation) and the sourdough question into a ``Memory`` with
    ``block`` (see :func:`memory_with_block` for ``kwargs``); what its ``aget()`` returns."""
    memory = memory_with_block(block, **kwargs)
    await memory.aput_messages(conversation() if history is None else history)
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    return await memory.aget()


def test_sync_memory_get_selects_on_threads_that_outlive_its_event_loops(hashing_embedder, monkeypatch):
    # Memory.get runs aget in a new event loop per call; the block's selection must not get a new
    # thread (and a new torch thread team) each time, as asyncio.to_thread would give it.
    threads: list[threading.Thread] = []
    select = KadaneDialStrategy.select

    def recording_select(self: KadaneDialStrategy, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return select(self, *args, **kwargs)

    monkeypatch.setattr(KadaneDialStrategy, "select", recording_select)
    block = KadaneDialBlock(embed_model=hashing_embedder)
    memory = memory_with_block(block)
    memory.put_messages(conversation())
    for _ in range(3):
        result = memory.get(input=SOURDOUGH_QUERY)
        assert SOURDOUGH <= turns_present(result)

    assert len(threads) >= 3
    assert all(t.name.startswith("ctxmgmt") and t.is_alive() for t in threads)


@pytest.mark.parametrize(
    ("block_class", "strategy_class", "first_budgets"),
    [
        # its budget only trims: one selection, within the cap
        (KadaneDialBlock, KadaneDialStrategy, [DEFAULT_BLOCK_TOKENS]),
        # its budget fills: its own selection first, then again within the cap as it is larger
        (TopicThreadBlock, TopicThreadStrategy, [None, DEFAULT_BLOCK_TOKENS]),
    ],
)
async def test_block_without_token_limit_selects_at_most_memorys_default_block_share(
    block_class, strategy_class, first_budgets, hashing_embedder, monkeypatch
):
    # token_limit None: the block returns at most 9,000 tokens (what Memory leaves its blocks by
    # default), not everything relevant in a long conversation, which Memory would count and cut.
    budgets: list[int | None] = []
    select = strategy_class.select

    def recording_select(self: Any, query: str, *, budget: int | None = None) -> Any:
        budgets.append(budget)
        return select(self, query, budget=budget)

    monkeypatch.setattr(strategy_class, "select", recording_select)
    block = block_class(embed_model=hashing_embedder)
    memory = memory_with_block(block)
    flushed = [  # as Memory flushes them: tagged with its session
        ChatMessage(
            role=m.role,
            content=f"{m.content} (copy {k}, {'with more words ' * 200})",
            additional_kwargs={"session_id": "session-1"},
        )
        for k in range(10)
        for m in conversation()
    ]
    await block.aput(flushed)
    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    await memory.aget()

    assert budgets[: len(first_budgets)] == first_budgets
    strategy = block.conversation("session-1").strategy
    assert select(strategy, SOURDOUGH_QUERY).tokens > DEFAULT_BLOCK_TOKENS
    assert select(strategy, SOURDOUGH_QUERY, budget=DEFAULT_BLOCK_TOKENS).tokens <= DEFAULT_BLOCK_TOKENS


async def test_memory_block_brings_back_relevant_flushed_turns(hashing_embedder):
    block = KadaneDialBlock(embed_model=hashing_embedder)
    memory = memory_with_block(block)
    history = conversation()
    await memory.aput_messages(history)
    active = await memory.aget_all(status=MessageStatus.ACTIVE)
    flushed = block.stored_messages("session-1")
    assert flushed and active
    # lossless: what was flushed plus what is still queued is the whole conversation
    assert [m.content for m in flushed + active] == [m.content for m in history]
    assert not any("session_id" in m.additional_kwargs for m in flushed)
    assert SOURDOUGH <= turns_present(flushed)

    await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    result = await memory.aget()
    present = turns_present(result)
    assert SOURDOUGH <= present
    assert not present & (PANDAS | WEATHER) - turns_present(active)
    assert result[-1].content == SOURDOUGH_QUERY
    assert_chronological(result[:-1])
    # recalled turns come first, then Memory's queue
    assert [m.content for m in result[-len(active) - 1 :]] == [m.content for m in active] + [SOURDOUGH_QUERY]
    assert block.last_context.query == SOURDOUGH_QUERY

    # Memory.get(input=...) selects for the input instead
    result = await memory.aget(input="Which pandas call writes the DataFrame to parquet?")
    assert PANDAS & turns_present(result)


async def test_memory_block_text_output(hashing_embedder):
    block = KadaneDialBlock(embed_model=hashing_embedder, output="text")
    result = await ask_block(block)
    assert result[0].role == MessageRole.SYSTEM
    text = result[0].content
    assert "<kadanedial_memory>" in text and block.text_header in text
    assert "rye flour" in text  # the first sourdough turn, flushed long ago
    assert "pandas" not in text

    block = KadaneDialBlock(embed_model=hashing_embedder, output="text")
    result = await ask_block(block, insert_method=InsertMethod.USER)
    assert result[-1].role == MessageRole.USER
    assert "rye flour" in result[-1].content and SOURDOUGH_QUERY in result[-1].content


async def test_memory_block_is_truncated_by_reselection(hashing_embedder):
    async def recalled(block: KadaneDialBlock, token_limit: int) -> set[int]:
        memory = memory_with_block(block)
        await memory.aput_messages(conversation())
        await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        memory.token_limit = token_limit  # the queue stays as it is; the blocks must fit the rest
        queued = turns_present(await memory.aget_all(status=MessageStatus.ACTIVE))
        return turns_present(await memory.aget()) - queued

    full = await recalled(KadaneDialBlock(embed_model=hashing_embedder), 400)
    assert SOURDOUGH < full
    squeezed = await recalled(KadaneDialBlock(embed_model=hashing_embedder), 250)
    assert squeezed and squeezed < full
    assert squeezed <= SOURDOUGH  # the least relevant turn went first
    # priority 0: Memory never truncates the block
    assert await recalled(KadaneDialBlock(embed_model=hashing_embedder, priority=0), 250) == full


async def test_memory_block_keeps_sessions_apart(hashing_embedder):
    block = KadaneDialBlock(embed_model=hashing_embedder)
    await block.aput(conversation()[:6], session_id="a")
    await block.aput(conversation()[6:12], session_id="b")
    query = [ChatMessage(role="user", content=SOURDOUGH_QUERY)]
    assert turns_present(await block.aget(query, session_id="a")) & SOURDOUGH
    assert not turns_present(await block.aget(query, session_id="b")) & SOURDOUGH
    assert await block.aget(query, session_id="nobody") == []
    assert await block.aget([], session_id="a") == []


def test_memory_block_defaults_and_validation():
    block = KadaneDialBlock()  # no arguments: bundled embedder, loaded on first use only
    assert (block.name, block.priority, block.output, block.token_limit) == (
        "kadanedial_memory",
        1,
        "messages",
        None,
    )
    assert block.stored_messages() == []
    assert "nothing selected yet" in block.explain()
    Memory.from_defaults(memory_blocks=[block], async_database_uri="sqlite+aiosqlite:///:memory:")
    with pytest.raises(ConfigurationError):
        KadaneDialBlock(tau=float("nan"))
    with pytest.raises(ConfigurationError):
        KadaneDialBlock(token_limit=0)


async def test_memory_block_keeps_media_and_skips_unusable_messages(hashing_embedder):
    block = KadaneDialBlock(embed_model=hashing_embedder)
    image = ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/cat.png")])
    reply = ChatMessage(role="assistant", content="a cat")
    unusable = ChatMessage(role="user", blocks=[])
    with pytest.warns(UserWarning, match="skipped a flushed message"):
        await block.aput([image, unusable, reply], session_id="s")
    stored = block.stored_messages("s")
    assert [m.blocks for m in stored] == [image.blocks, reply.blocks]


def test_simple_chat_engine_over_budget_sends_an_old_question_without_its_long_reply(hashing_embedder):
    """Assistant chats: a budget too small for a long reply still carries what the user said."""
    past = [
        m
        for user, reply in TOPIC_TURNS
        for m in (
            ChatMessage(role=MessageRole.USER, content=user),
            ChatMessage(role=MessageRole.ASSISTANT, content=" ".join([reply or "Noted."] * 40)),
        )
    ]
    memory = KadaneDialMemory.from_defaults(chat_history=past, embed_model=hashing_embedder, token_limit=400)
    llm = RecordingLLM()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT)
    engine.chat(SOURDOUGH_QUERY)

    sent = llm.received[-1]
    assert sent[-1].content == SOURDOUGH_QUERY
    assert tokens(memory, sent[1:]) <= 400
    context = memory.last_context
    cut = sorted(context.user_only_turns)
    assert cut and turns_present(sent) & SOURDOUGH
    stored = memory.get_all()
    assert all(any(m is s for s in stored) for m in sent[1:])  # the stored objects themselves
    for t in cut:  # that turn's user message is sent, its reply is not
        user, reply = past[2 * t], past[2 * t + 1]
        assert any(m.content == user.content for m in sent)
        assert not any(m.content == reply.content for m in sent)
    assert len(stored) == len(past) + 2  # nothing of the history is lost
