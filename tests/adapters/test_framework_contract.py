"""Framework-modelled contract suite: every ctxmgmt memory, in both frameworks.

The checks follow what the frameworks' own memory tests check of their classes (written here
from scratch, not copied):

- llama-index-core ``tests/memory/test_chat_memory_buffer.py`` and
  ``test_chat_summary_memory_buffer.py``: put/get, set, reset, ``token_limit``,
  ``initial_token_count``, ``to_dict``/``from_dict``, ``to_string``/``from_string``, pickling;
- llama-index-core ``tests/memory/test_memory_base.py`` and ``test_memory_blocks_base.py``:
  ``Memory`` flushing its queue into blocks, sessions, priority-ordered truncation
  (``atruncate``, priority 0 never truncated), insert methods, ``Memory.get()``;
- LangChain ``tests/unit_tests/chains/test_conversation.py``: prefixes, ``memory_key``,
  input/output key errors, ``clear``, the async methods, ``ConversationChain``;
- LangChain ``tests/unit_tests/agents/middleware``: ``create_agent`` with a fake chat model and a
  checkpointer (what the model receives, threads, streaming, ``ainvoke``).

Four base classes, each subclassed once per memory (5 memories x 4 = 20 classes):
:class:`LlamaIndexMemoryContract` (the ``BaseChatStoreMemory`` classes),
:class:`LlamaIndexBlockContract` (the ``Memory`` blocks), :class:`LangChainClassicContract`
(classic ``BaseMemory``) and :class:`LangChainMiddlewareContract` (``create_agent``
middlewares). A subclass sets ``memory_class`` and ``kwargs`` (construction arguments); fast
components (bag-of-words embedder, capitalised-word entity extractor, threshold decider) are
added for the classes that take them.

Deliberate differences from the framework classes, asserted as documented here: the memories
*select* (a small budget drops turns anywhere, not only the oldest; a summary, thread state or
entity tier may come first as framed memory messages), and with no room left ``get()`` returns the
whole turn in progress, not only the newest message.
"""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import warnings
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

import pytest
import pytest_asyncio
from langchain_classic.chains import ConversationChain
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import ContextChatEngine, SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.memory import Memory
from llama_index.core.memory.memory import InsertMethod
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import MessageStatus
from pydantic import Field

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt.components.decider import EmbeddedDecider
from ctxmgmt.messages.exceptions import ConfigurationError, InvalidMessageError
from ctxmgmt.store.sqlite import SQLiteStore
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, sent_tokens, words
from tests.adapters.test_llamaindex_contract import is_subsequence, tokens
from tests.helpers import memory_body
from tests.integration.test_langchain_agent import RecordingChatModel, checkpointed_agent
from tests.integration.test_llamaindex_engines import RecordingLLM

CAT_TURN = 2
"""Index in TURNS of the only turn that mentions the cat (and the word ``Miso``)."""
CAT_WORD = "Miso"
BUDGET = 60
"""A budget (whitespace words + 4 per message) below the 8 turns' ~230: selection must drop turns."""
SYSTEM_PROMPT = "You are a concise assistant."


async def assert_close_contract(make: Any, use: Any, url: str, closed: list[str]) -> None:
    """``close()`` and ``aclose()`` close a store the adapter opened from ``url`` once; then calls say closed.

    A store object passed in stays open. ``make(store=...)`` builds the adapter; ``use(adapter)``
    makes one call through its framework (sync, or a coroutine).
    """

    async def call(adapter: Any) -> None:
        done = use(adapter)
        if inspect.isawaitable(done):
            await done

    given = SQLiteStore(url.removeprefix("sqlite:///"))
    kept = make(store=given)
    await call(kept)
    kept.close()
    assert closed == []  # the caller's store: its owner closes it
    adapter = make(store=url)
    await call(adapter)
    adapter.close()
    adapter.close()
    path = url.removeprefix("sqlite:///")
    assert closed == [path]
    with pytest.raises(ConfigurationError, match="closed"):
        await call(adapter)
    reopened = make(store=url)  # the same file, closed from async code this time
    await call(reopened)
    await reopened.aclose()
    await reopened.aclose()
    assert closed == [path, path]
    with pytest.raises(ConfigurationError, match="closed"):
        await call(reopened)
    await kept.aclose()
    assert closed == [path, path]
    given.close()


def fast_components(cls: type, embedder: Any) -> dict[str, Any]:
    """Fast stand-ins for the components ``cls`` takes (none for the others)."""
    names = {f.name for f in cls.adapter_fields}  # type: ignore[attr-defined]
    out: dict[str, Any] = {name: embedder for name in ("embed_model", "embedder") if name in names}
    if "entity_extractor" in names:
        out["entity_extractor"] = CapitalisedExtractor()  # spaCy is slow to load
    if "decider" in names:
        # the bag-of-words embedder's cosines are below the default shift model's calibration
        out["decider"] = EmbeddedDecider(shift_model=None)
    return out


def is_memory_message(text: Any, role: str) -> bool:
    """A message the memory wrote (summary, thread state, entity tier): a framed memory message
    (:func:`ctxmgmt.messages.framing.memory_message`) in the default user role, never a system message."""
    return role in ("user", "human") and memory_body(text) is not None


def text_of(content: Any) -> str:
    """All text of a block's content or of a message list."""
    if isinstance(content, str):
        return content
    return "\n".join(str(getattr(m, "content", "") or "") for m in content)


# -- LlamaIndex helpers -----------------------------------------------------------------------


def li_history(turns: Sequence[tuple[str, str]] = TURNS) -> list[ChatMessage]:
    return [
        ChatMessage(role=role, content=text)
        for human, ai in turns
        for role, text in ((MessageRole.USER, human), (MessageRole.ASSISTANT, ai))
    ]


def li_user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def li_view(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role.value, m.content or "") for m in messages]


def assert_selection(selected: list[ChatMessage], stored: list[ChatMessage]) -> None:
    """The memory's own messages (summaries, states, tiers) come first; then stored objects, in
    chronological order."""
    stored_ids = {id(m) for m in stored}
    own = [m for m in selected if id(m) not in stored_ids]
    assert all(is_memory_message(m.content, m.role.value) for m in own)
    assert selected[: len(own)] == own
    assert is_subsequence(selected[len(own) :], stored)


class LlamaIndexMemoryContract:
    """What a ``BaseChatStoreMemory`` must do, modelled on ``ChatMemoryBuffer``'s tests."""

    memory_class: ClassVar[type[li.StrategyMemory]]
    kwargs: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def make(self, hashing_embedder):
        """``from_defaults`` with fast components, the subclass's kwargs and overrides."""

        def make(**overrides: Any) -> li.StrategyMemory:
            components = fast_components(self.memory_class, hashing_embedder)
            return self.memory_class.from_defaults(**{**components, **self.kwargs, **overrides})

        return make

    @pytest.fixture
    def asked(self, make) -> li.StrategyMemory:
        """The 8 turns and the cat question, within BUDGET words."""
        memory = make(chat_history=li_history(), token_limit=BUDGET, token_counter=words)
        memory.put(li_user(CAT_QUERY))
        return memory

    # put / get / set / reset ----------------------------------------------------------------
    def test_put_get(self, make):
        memory = make()
        message = li_user("first message")
        memory.put(message)
        assert memory.get() == [message] and memory.get()[0] is message
        assert memory.get_all() == [message]

    async def test_close_closes_the_store_it_opened(self, make, closed_stores):
        def use(memory: li.StrategyMemory) -> None:
            memory.put(li_user(CAT_QUERY))
            memory.get()

        await assert_close_contract(make, use, *closed_stores)

    def test_put_messages_keeps_every_object(self, make):
        memory = make()
        history = li_history()
        memory.put_messages(history)
        stored = memory.get_all()
        assert len(stored) == 16 and all(a is b for a, b in zip(stored, history, strict=True))

    def test_set_replaces_history_and_derived_state(self, asked):
        assert len(asked.get()) > 1  # earlier turns (or what was derived from them) are sent
        question = li_user("Which chords does a folk song use?")
        asked.set([question])
        assert asked.get_all() == [question]
        # nothing derived from the old history survives (no summary, thread, tier or embedding)
        assert asked.get() == [question]
        assert asked.get(input=CAT_QUERY) == [question]

    def test_reset(self, asked):
        asked.get()
        asked.reset()
        assert asked.get_all() == [] and asked.get() == []
        assert asked.chat_store_key not in asked.chat_store.get_keys()
        message = li_user("first message")
        asked.put(message)
        assert asked.get() == [message]

    # token_limit, order, input --------------------------------------------------------------
    def test_token_limit_is_respected_and_the_newest_comes_last(self, asked):
        selected = asked.get()
        assert tokens(asked, selected) <= BUDGET
        assert selected[-1] is asked.get_all()[-1]  # the question, last
        assert_selection(selected, asked.get_all())
        # ours selects: turns are dropped (not necessarily the oldest); the store keeps all
        assert len(selected) < len(asked.get_all()) == 17
        newest = li_user("And how old is the cat?")
        asked.put(newest)
        assert asked.get()[-1] is newest

    @pytest.mark.parametrize(
        "query",
        [CAT_QUERY, li_user(CAT_QUERY), QueryBundle(query_str=CAT_QUERY)],
        ids=["str", "ChatMessage", "QueryBundle"],
    )
    def test_get_input_kinds(self, make, query):
        memory = make(chat_history=li_history(), token_limit=BUDGET, token_counter=words)
        reference = li_view(memory.get(input=CAT_QUERY))
        assert li_view(memory.get(input=query)) == reference
        assert memory.last_context is not None and memory.last_context.query == CAT_QUERY
        # no input: the newest user message is the query
        memory.get()
        assert memory.last_context.query == TURNS[-1][0]
        with pytest.raises(InvalidMessageError):
            memory.get(input=42)

    def test_initial_token_count(self, asked):
        room = BUDGET - 20
        selected = asked.get(initial_token_count=20)
        assert tokens(asked, selected) <= room and selected[-1] is asked.get_all()[-1]
        with pytest.raises(ValueError, match="exceeds token limit"):
            asked.get(initial_token_count=BUDGET + 1)
        # no room left: the turn in progress alone (ChatMemoryBuffer sends the newest message alone)
        assert asked.get(initial_token_count=BUDGET) == asked.get_all()[-1:]

    def test_llm_calls_are_counted(self, make):
        """With ``llm=`` (ChatSummaryMemoryBuffer's ``llm``): every call the memory makes is counted."""
        llm = PromptRecordingLLM()
        deciders = {"decider": None} if "decider" in self.memory_class.model_fields else {}  # llm decides
        # 300 words: ACM summarises only when its summary tier has room (else straight to entities)
        memory = make(
            llm=llm, chat_history=li_history(TURNS * 2), token_limit=300, token_counter=words, **deciders
        )
        memory.put(li_user(CAT_QUERY))
        assert tokens(memory, memory.get()) <= 300
        assert memory.llm_calls == len(llm.prompts)
        if "llm" in self.memory_class.model_fields:  # it summarises or decides with the llm
            assert llm.prompts
        else:  # llm only sizes token_limit here
            assert llm.prompts == []

    # chat store keys -----------------------------------------------------------------------
    def test_chat_store_keys_never_see_each_other(self, make):
        store = SimpleChatStore()
        alice = make(chat_store=store, chat_store_key="alice", chat_history=li_history(TURNS[:4]))
        bob = make(chat_store=store, chat_store_key="bob", chat_history=li_history(TURNS[4:]))
        bob.put(li_user(CAT_QUERY))
        assert store.get_keys() == ["alice", "bob"]
        assert CAT_WORD not in text_of(bob.get()) + text_of(bob.get_all())
        assert CAT_WORD in text_of(alice.get(input=CAT_QUERY))
        # one memory object moved to another key selects from that key's history only
        alice_view = li_view(alice.get(input=CAT_QUERY))
        alice.chat_store_key = "bob"
        assert li_view(alice.get()) == li_view(bob.get())
        alice.chat_store_key = "alice"
        assert li_view(alice.get(input=CAT_QUERY)) == alice_view
        bob.reset()
        assert len(alice.get_all()) == 8 and store.get_keys() == ["alice"]

    # async -----------------------------------------------------------------------------------
    async def test_async_methods_match_sync(self, make, asked):
        memory = make(token_limit=BUDGET, token_counter=words)
        history = li_history()
        await memory.aput_messages(history[:-1])
        await memory.aput(history[-1])
        await memory.aput(li_user(CAT_QUERY))
        assert li_view(await memory.aget_all()) == li_view(asked.get_all())
        assert li_view(await memory.aget()) == li_view(asked.get())
        assert li_view(await memory.aget(input=CAT_QUERY, initial_token_count=20)) == li_view(
            asked.get(input=CAT_QUERY, initial_token_count=20)
        )
        await memory.aset(history[:2])
        assert await memory.aget_all() == history[:2]
        assert await memory.aget() == history[:2]
        await memory.areset()
        assert await memory.aget_all() == [] and await memory.aget() == []

    # serialisation ---------------------------------------------------------------------------
    def test_serialisation_round_trips(self, make, hashing_embedder):
        memory = make(chat_history=li_history(), chat_store_key="alice", token_limit=BUDGET)
        components = fast_components(self.memory_class, hashing_embedder)
        dumped = memory.model_dump()
        assert dumped["token_limit"] == BUDGET and dumped["chat_store_key"] == "alice"
        # components are not serialised
        assert not {"embed_model", "embedder", "llm", "token_counter", "tokenizer_fn", "store"} & set(dumped)
        assert json.loads(memory.to_string()) == memory.to_dict()
        assert json.loads(memory.model_dump_json()).items() <= memory.to_dict().items()
        clones = [
            self.memory_class.from_dict(memory.to_dict(), **components),
            self.memory_class.from_string(memory.to_string(), **components),
            self.memory_class.from_dict(dumped, **components),
            self.memory_class.from_string(memory.model_dump_json(), **components),
            pickle.loads(pickle.dumps(memory)),
        ]
        for clone in clones:
            assert type(clone) is self.memory_class
            assert clone.get_all() == memory.get_all()
            assert (clone.token_limit, clone.chat_store_key) == (BUDGET, "alice")
            assert li_view(clone.get(input=CAT_QUERY)) == li_view(memory.get(input=CAT_QUERY))

    # chat engines ---------------------------------------------------------------------------
    @pytest.fixture
    def spy(self, monkeypatch) -> list[list[ChatMessage]]:
        """Every list the memory class's ``get``/``aget`` returned, in call order."""
        calls: list[list[ChatMessage]] = []
        get, aget = self.memory_class.get, self.memory_class.aget

        def spy_get(memory: Any, *args: Any, **kwargs: Any) -> list[ChatMessage]:
            calls.append(get(memory, *args, **kwargs))
            return calls[-1]

        async def spy_aget(memory: Any, *args: Any, **kwargs: Any) -> list[ChatMessage]:
            calls.append(await aget(memory, *args, **kwargs))
            return calls[-1]

        monkeypatch.setattr(self.memory_class, "get", spy_get)
        monkeypatch.setattr(self.memory_class, "aget", spy_aget)
        return calls

    async def test_simple_chat_engine(self, make, spy):
        memory = make(chat_history=li_history(), token_limit=BUDGET + 10, token_counter=words)
        llm = RecordingLLM()
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM_PROMPT)
        assert engine.chat(CAT_QUERY).response == llm.answer
        received = llm.received[-1]
        assert received[0].role == MessageRole.SYSTEM and received[0].content == SYSTEM_PROMPT
        assert li_view(received[1:]) == li_view(spy[-1])  # exactly what the memory selected
        assert received[-1].content == CAT_QUERY
        # the engine counts its system prompt against token_limit (initial_token_count)
        assert tokens(memory, received[1:]) <= memory.token_limit - words(SYSTEM_PROMPT)
        assert len(received) - 1 < 17
        assert li_view(memory.get_all()) == li_view([*li_history(), li_user(CAT_QUERY)]) + [
            ("assistant", llm.answer)
        ]
        # async: the same contract
        await engine.achat("Which chords does a folk song use?")
        assert li_view(llm.received[-1][1:]) == li_view(spy[-1])
        assert llm.received[-1][-1].content == "Which chords does a folk song use?"
        assert len(memory.get_all()) == 20

    def test_context_chat_engine(self, make, spy):
        memory = make(chat_history=li_history(), token_limit=BUDGET + 10, token_counter=words)
        llm = RecordingLLM()
        index = VectorStoreIndex(
            [TextNode(text="Miso's vet appointment is on Friday.")], embed_model=MockEmbedding(embed_dim=8)
        )
        engine = ContextChatEngine.from_defaults(
            retriever=index.as_retriever(similarity_top_k=1),
            llm=llm,
            memory=memory,
            system_prompt=SYSTEM_PROMPT,
        )
        engine.chat(CAT_QUERY)
        received = llm.received[-1]
        assert received[0].role == MessageRole.SYSTEM
        assert SYSTEM_PROMPT in received[0].content and "vet appointment" in received[0].content
        assert memory.last_context is not None and memory.last_context.query == CAT_QUERY  # input=
        assert li_view(received[1:-1]) == li_view(spy[-1])
        assert CAT_QUERY in (received[-1].content or "")
        assert len(memory.get_all()) == 18  # the question and the answer were put


class TestKadaneDialMemory(LlamaIndexMemoryContract):
    memory_class = li.KadaneDialMemory


class TestSWinSummaryBuffer(LlamaIndexMemoryContract):
    memory_class = li.SWinSummaryBuffer
    kwargs = {"window": 4, "overlap": 1}  # 8 turns: two windows summarised


class TestDiscourseTreeMemory(LlamaIndexMemoryContract):
    memory_class = li.DiscourseTreeMemory


class TestACMTieredBuffer(LlamaIndexMemoryContract):
    memory_class = li.ACMTieredBuffer


class TestTopicThreadMemory(LlamaIndexMemoryContract):
    memory_class = li.TopicThreadMemory


# -- LlamaIndex Memory blocks -------------------------------------------------------------------


OPEN_MEMORIES: list[Memory] = []
"""``Memory`` objects made by :func:`memory_with`, whose database engines a test disposes of."""


def memory_with(block: li.StrategyMemoryBlock, session_id: str = "alice", **kwargs: Any) -> Memory:
    """A ``Memory`` of 400 tokens whose queue holds 160 (flushing 60 at a time) with ``block``."""
    memory = Memory.from_defaults(
        session_id=session_id,
        token_limit=400,
        chat_history_token_ratio=0.4,
        token_flush_size=60,
        memory_blocks=[block],
        async_database_uri="sqlite+aiosqlite:///:memory:",
        **kwargs,
    )
    OPEN_MEMORIES.append(memory)
    return memory


def contribution(result: list[ChatMessage], queue: list[ChatMessage]) -> str:
    """The text ``Memory.get()`` added to its queue: the block's messages or the system message."""
    extra = result[: len(result) - len(queue)]
    assert li_view(result[len(extra) :]) == li_view(queue)  # Memory's queue, untouched, last
    return text_of(extra)


class LlamaIndexBlockContract:
    """What a block must do inside ``llama_index.core.memory.Memory`` (its base and block tests)."""

    block_class: ClassVar[type[li.StrategyMemoryBlock]]
    kwargs: ClassVar[dict[str, Any]] = {}

    @pytest_asyncio.fixture(autouse=True, loop_scope="function")
    async def dispose_memories(self) -> AsyncIterator[None]:
        """Close the test's ``Memory`` databases in its own event loop, before the loop closes.

        Otherwise a connection closed by the garbage collector later hands its result to a
        closed loop (an exception in aiosqlite's thread, reported as a warning).
        """
        yield
        while OPEN_MEMORIES:
            engine = OPEN_MEMORIES.pop().sql_store._async_engine
            if engine is not None:
                await engine.dispose()

    @pytest.fixture
    def make_block(self, hashing_embedder):
        def make(**overrides: Any) -> li.StrategyMemoryBlock:
            components = fast_components(self.block_class, hashing_embedder)
            return self.block_class(**{**components, **self.kwargs, **overrides})

        return make

    async def test_close_closes_the_store_it_opened(self, make_block, closed_stores):
        async def use(block: li.StrategyMemoryBlock) -> None:
            memory = memory_with(block)
            await memory.aput_messages(li_history())
            await memory.aget(input=CAT_QUERY)

        await assert_close_contract(make_block, use, *closed_stores)

    async def test_flushed_turns_reach_the_block_losslessly(self, make_block):
        block = make_block()
        memory = memory_with(block)
        history = li_history()
        await memory.aput_messages(history)
        queue = await memory.aget_all(status=MessageStatus.ACTIVE)
        flushed = block.stored_messages("alice")
        assert flushed and queue and queue[0].role == MessageRole.USER  # whole turns flushed
        assert li_view(flushed + queue) == li_view(history)
        assert CAT_WORD in text_of(flushed) and CAT_WORD not in text_of(queue)
        assert not any("session_id" in m.additional_kwargs for m in flushed)  # Memory's tag removed

    @pytest.mark.parametrize("output", ["messages", "text"])
    async def test_memory_get_brings_back_the_flushed_turn(self, make_block, output):
        block = make_block(output=output)
        memory = memory_with(block)
        await memory.aput_messages(li_history())
        # Memory.get(input=...): the block selects for the input
        queue = await memory.aget_all(status=MessageStatus.ACTIVE)
        assert CAT_WORD in contribution(await memory.aget(input=CAT_QUERY), queue)
        await memory.aput(li_user(CAT_QUERY))
        result = await memory.aget()
        queue = await memory.aget_all(status=MessageStatus.ACTIVE)
        assert result[-1].content == CAT_QUERY
        if output == "text":  # one system message with the block in its template tag
            assert result[0].role == MessageRole.SYSTEM
            assert f"<{block.name}>" in (result[0].content or "")
            assert not block.text_header or block.text_header in (result[0].content or "")
        else:
            assert not any("session_id" in m.additional_kwargs for m in result)
        assert CAT_WORD in contribution(result, queue)
        assert block.last_context is not None and block.last_context.query == CAT_QUERY
        # asked again, the same
        assert li_view(await memory.aget()) == li_view(result)

    def test_sync_memory_api(self, make_block):
        memory = memory_with(make_block())
        memory.put_messages(li_history())
        memory.put(li_user(CAT_QUERY))
        result = memory.get()
        assert result[-1].content == CAT_QUERY
        assert CAT_WORD in contribution(result, memory.get_all(status=MessageStatus.ACTIVE))

    async def test_insert_method_user(self, make_block):
        memory = memory_with(make_block(output="text"), insert_method=InsertMethod.USER)
        await memory.aput_messages(li_history())
        await memory.aput(li_user(CAT_QUERY))
        result = await memory.aget()
        assert not any(m.role == MessageRole.SYSTEM for m in result)
        assert result[-1].role == MessageRole.USER
        assert CAT_WORD in (result[-1].content or "") and CAT_QUERY in (result[-1].content or "")

    async def test_sessions_never_see_each_other(self, make_block):
        block = make_block()  # one block shared by two users' Memory objects
        alice, bob = memory_with(block, "alice"), memory_with(block, "bob")
        await alice.aput_messages(li_history())
        await bob.aput_messages(li_history([*TURNS[3:], *TURNS[3:]]))  # no cat
        for memory in (alice, bob):
            await memory.aput(li_user(CAT_QUERY))
        assert block.stored_messages("bob") and CAT_WORD not in text_of(block.stored_messages("bob"))
        assert CAT_WORD not in text_of(await bob.aget())
        assert CAT_WORD in text_of(await alice.aget())
        block.clear_session("alice")
        assert block.stored_messages("alice") == []
        assert CAT_WORD not in text_of(await alice.aget())  # the cat turn was flushed, now forgotten
        assert block.stored_messages("bob")

    async def test_block_api(self, make_block):
        block = make_block()
        history = li_history()
        await block.aput(history, session_id="s")  # as Memory calls it
        question = [li_user(CAT_QUERY)]
        assert CAT_WORD in text_of(await block.aget(question, session_id="s"))
        assert await block.aget([], session_id="s") in ("", [])  # no query
        assert await block.aget(question, session_id="other") in ("", [])
        assert li_view(block.stored_messages("s")) == li_view(history)

    async def test_atruncate_selects_within_fewer_tokens(self, make_block):
        block = make_block()
        await block.aput(li_history(), session_id="s")
        content = await block.aget([li_user(CAT_QUERY)], session_id="s")
        assert block.last_context is not None
        full = block.last_context.tokens
        assert await block.atruncate(content, 0) is content
        truncated = await block.atruncate(content, full // 2)
        assert truncated is None or block.last_context.tokens <= full - full // 2
        assert await block.atruncate(content, full) is None  # nothing fits
        assert await block.atruncate("content the block never returned", 10) is None

    @pytest.mark.parametrize("priority", [0, 1])
    async def test_memory_truncates_by_priority(self, make_block, priority):
        async def block_part(room: int | None) -> str:
            memory = memory_with(make_block(priority=priority))
            await memory.aput_messages(li_history())
            await memory.aput(li_user(CAT_QUERY))
            queue = await memory.aget_all(status=MessageStatus.ACTIVE)
            if room is not None:  # the queue stays; the block gets `room` tokens beside it
                memory.token_limit = sum(memory._estimate_token_count(m) for m in queue) + room
            return contribution(await memory.aget(), queue)

        full, squeezed = await block_part(None), await block_part(5)
        assert CAT_WORD in full
        if priority == 0:  # never truncated
            assert squeezed == full
        else:
            assert len(squeezed) < len(full)


class TestKadaneDialBlock(LlamaIndexBlockContract):
    block_class = li.KadaneDialBlock


class TestSWinSummaryBlock(LlamaIndexBlockContract):
    block_class = li.SWinSummaryBlock


class TestDiscourseTreeBlock(LlamaIndexBlockContract):
    block_class = li.DiscourseTreeBlock


class TestACMTieredBlock(LlamaIndexBlockContract):
    block_class = li.ACMTieredBlock


class TestTopicThreadBlock(LlamaIndexBlockContract):
    block_class = li.TopicThreadBlock


# -- LangChain classic memories ----------------------------------------------------------------


class RecordingListLLM(FakeListLLM):
    """FakeListLLM that records every prompt it is sent."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return super()._call(prompt, *args, **kwargs)

    async def _acall(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return await super()._acall(prompt, *args, **kwargs)


def fill(memory: lc.StrategyMemory, turns: Sequence[tuple[str, str]] = TURNS) -> None:
    for human, ai in turns:
        memory.save_context({"input": human}, {"output": ai})


SPEAKER = {HumanMessage: "Human", AIMessage: "AI", SystemMessage: "System"}


def assert_lc_selection(selected: list[BaseMessage], saved: list[BaseMessage]) -> None:
    """The memory's own messages come first; then saved objects, in order."""
    own = [m for m in selected if not any(m is s for s in saved)]
    assert all(is_memory_message(m.content, m.type) for m in own) and selected[: len(own)] == own
    positions = [next(i for i, s in enumerate(saved) if s is m) for m in selected[len(own) :]]
    assert positions == sorted(positions)


class LangChainClassicContract:
    """What a classic ``BaseMemory`` must do (LangChain's conversation memory tests)."""

    memory_class: ClassVar[type[lc.StrategyMemory]]
    kwargs: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def make(self, hashing_embedder):
        def make(**overrides: Any) -> lc.StrategyMemory:
            components = fast_components(self.memory_class, hashing_embedder)
            return self.memory_class(**{**components, **self.kwargs, **overrides})

        return make

    async def test_close_closes_the_store_it_opened(self, make, closed_stores):
        def use(memory: lc.StrategyMemory) -> None:
            memory.save_context({"input": "bar"}, {"output": "foo"})
            memory.load_memory_variables({"input": CAT_QUERY})

        await assert_close_contract(make, use, *closed_stores)

    @pytest.mark.parametrize(
        ("prefixes", "expected"),
        [
            ({"ai_prefix": "Assistant"}, "Human: bar\nAssistant: foo"),
            ({"human_prefix": "Friend"}, "Friend: bar\nAI: foo"),
        ],
        ids=["ai_prefix", "human_prefix"],
    )
    async def test_prefixes_and_memory_key(self, make, prefixes, expected):
        memory = make(memory_key="foo", **prefixes)
        memory.save_context({"input": "bar"}, {"output": "foo"})
        assert memory.memory_variables == ["foo"]
        assert memory.load_memory_variables({}) == {"foo": expected}
        twin = make(memory_key="foo", **prefixes)
        await twin.asave_context({"input": "bar"}, {"output": "foo"})
        assert await twin.aload_memory_variables({}) == {"foo": expected}

    def test_input_and_output_keys(self, make):
        memory = make(memory_key="baz")
        memory.save_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})  # the memory key is no input
        assert [m.content for m in memory.messages] == ["bar", "foo"]
        good_inputs, good_outputs = {"foo": "bar", "baz": "foo"}, {"bar": "foo"}
        for inputs, outputs in [
            ({"foo": "bar", "foo1": "bar"}, good_outputs),  # two candidate inputs
            ({"baz": "bar"}, good_outputs),  # only the memory key
            (good_inputs, {}),  # no output
            (good_inputs, {"foo": "bar", "foo1": "bar"}),  # two candidate outputs
        ]:
            with pytest.raises(ValueError):
                memory.save_context(inputs, outputs)
        assert len(memory.messages) == 2  # a refused call stores nothing
        explicit = make(input_key="question", output_key="answer", return_messages=True)
        explicit.save_context({"question": "Hello there", "lang": "en"}, {"answer": "Hi!", "score": "1"})
        assert [m.content for m in explicit.messages] == ["Hello there", "Hi!"]
        explicit.load_memory_variables({"question": CAT_QUERY, "lang": "en"})
        assert explicit.last_context is not None and explicit.last_context.query == CAT_QUERY

    async def test_clear(self, make):
        memory = make(memory_key="baz")
        memory.save_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})
        memory.clear()
        assert memory.messages == [] and memory.load_memory_variables({}) == {"baz": ""}
        as_messages = make(memory_key="baz", return_messages=True)
        await as_messages.asave_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})
        await as_messages.aclear()
        assert as_messages.messages == [] and await as_messages.aload_memory_variables({}) == {"baz": []}

    async def test_budget_and_both_output_forms(self, make):
        as_messages = make(return_messages=True, max_token_limit=BUDGET, token_counter=words)
        as_text = make(max_token_limit=BUDGET, token_counter=words)
        fill(as_messages)
        fill(as_text)
        selected = as_messages.load_memory_variables({"input": CAT_QUERY})["history"]
        assert sent_tokens(selected) <= BUDGET
        assert 0 < len(selected) < len(as_messages.messages) == 16  # turns dropped, history kept
        assert_lc_selection(selected, as_messages.messages)
        text = as_text.load_memory_variables({"input": CAT_QUERY})["history"]
        assert text == "\n".join(f"{SPEAKER[type(m)]}: {m.content}" for m in selected)
        assert (await as_messages.aload_memory_variables({"input": CAT_QUERY}))["history"] == selected

    def test_pickle_and_deep_copy(self, make):
        """As ``ConversationBufferMemory``: a copy has the history and parameters, and its own history."""
        memory = make(return_messages=True, max_token_limit=BUDGET, token_counter=words)
        fill(memory)
        expected = [m.content for m in memory.load_memory_variables({"input": CAT_QUERY})["history"]]
        for clone in (
            pickle.loads(pickle.dumps(memory)),
            memory.model_copy(deep=True),
            copy.deepcopy(memory),
        ):
            assert type(clone) is self.memory_class and clone.max_token_limit == BUDGET
            assert [m.content for m in clone.messages] == [m.content for m in memory.messages]
            # the derived state travels with the copy: the same selection
            assert [
                m.content for m in clone.load_memory_variables({"input": CAT_QUERY})["history"]
            ] == expected
            clone.save_context({"input": "One more question?"}, {"output": "Sure."})
            assert len(memory.messages) == 16 and len(clone.messages) == 18

    async def test_conversation_chain(self, make):
        llm = RecordingListLLM(responses=["dummy"] * 12)
        prompt = PromptTemplate(input_variables=["foo", "bar"], template="{foo} {bar}")
        memory = make(memory_key="foo", token_counter=words)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConversationChain is deprecated
            chain = ConversationChain(llm=llm, prompt=prompt, memory=memory, input_key="bar")
        chain.invoke({"bar": "My grey cat is called Miso."})
        assert llm.prompts[-1] == " My grey cat is called Miso."
        chain.invoke({"bar": "What is my grey cat called?"})
        assert llm.prompts[-1] == "Human: My grey cat is called Miso.\nAI: dummy What is my grey cat called?"
        # a longer conversation under a small budget: the prompt holds a selection
        fill(memory)
        memory.max_token_limit = BUDGET
        await chain.ainvoke({"bar": CAT_QUERY})
        assert llm.prompts[-1].endswith(" " + CAT_QUERY)
        lines = llm.prompts[-1][: -len(CAT_QUERY) - 1].split("\n")
        messages: list[str] = []  # a framed memory message spans several lines
        for line in lines:
            if line.startswith(("Human: ", "AI: ")):
                messages.append(line.split(": ", 1)[1])
            else:
                messages[-1] += "\n" + line
        assert sum(words(text) + 4 for text in messages) <= BUDGET
        assert len(messages) < 20
        assert len(memory.messages) == 2 * (2 + len(TURNS) + 1)  # every turn saved

    def test_runnable_with_a_chat_prompt(self, make):
        memory = make(return_messages=True, max_token_limit=BUDGET, token_counter=words)
        fill(memory)
        model = RecordingChatModel(messages=iter(["Your cat is called Miso."]))
        prompt = ChatPromptTemplate.from_messages(
            [("system", SYSTEM_PROMPT), MessagesPlaceholder("history"), ("human", "{input}")]
        )
        load = RunnableLambda(lambda inputs: memory.load_memory_variables(inputs)["history"])
        chain = RunnablePassthrough.assign(history=load) | prompt | model
        expected = memory.load_memory_variables({"input": CAT_QUERY})["history"]
        answer = chain.invoke({"input": CAT_QUERY})
        memory.save_context({"input": CAT_QUERY}, {"output": answer})
        (received,) = model.received
        assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
        assert isinstance(received[-1], HumanMessage) and received[-1].content == CAT_QUERY
        assert received[1:-1] == expected and sent_tokens(received[1:-1]) <= BUDGET
        assert memory.messages[-1] is answer and len(memory.messages) == 18


class TestKadaneDialClassic(LangChainClassicContract):
    memory_class = lc.KadaneDialMemory


class TestSWinSummaryClassic(LangChainClassicContract):
    memory_class = lc.SWinSummaryBuffer
    kwargs = {"window": 4, "overlap": 1}


class TestDiscourseTreeClassic(LangChainClassicContract):
    memory_class = lc.DiscourseTreeMemory


class TestACMTieredClassic(LangChainClassicContract):
    memory_class = lc.ACMTieredBuffer


class TestTopicThreadClassic(LangChainClassicContract):
    memory_class = lc.TopicThreadMemory


# -- LangChain create_agent middlewares --------------------------------------------------------

ANSWER = "Your grey cat is called Miso."
MAX_TOKENS = BUDGET + words(SYSTEM_PROMPT) + 4
"""The middleware budget counts the system message too: BUDGET words for the conversation."""


def lc_history(turns: Sequence[tuple[str, str]] = TURNS, tag: str = "t") -> list[BaseMessage]:
    return [
        m
        for i, (human, ai) in enumerate(turns)
        for m in (HumanMessage(human, id=f"{tag}{i}-h"), AIMessage(ai, id=f"{tag}{i}-a"))
    ]


def thread(name: str) -> Any:
    return {"configurable": {"thread_id": name}}


def agent_with(
    middleware: Any, replies: list[Any], *, streaming: bool = False, store: Any = None
) -> tuple[Any, Any]:
    """(recording fake model, ``create_agent`` graph with ``middleware``, a checkpointer and ``store``)."""
    model = RecordingChatModel(messages=iter(replies), disable_streaming=not streaming)
    return model, checkpointed_agent(model, middleware, system_prompt=SYSTEM_PROMPT, store=store)


def assert_received(received: list[BaseMessage], full: list[BaseMessage], max_tokens: int) -> None:
    """System prompt first, the question last, saved messages chronological, within the budget."""
    assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
    assert received[-1].id == full[-1].id
    position = {m.id: i for i, m in enumerate(full)}
    sent = [position[m.id] for m in received if m.id in position]
    assert sent == sorted(sent) and len(sent) < len(full)  # a selection, in order
    own = [m for m in received[1:] if m.id not in position]
    assert all(is_memory_message(m.content, m.type) for m in own)  # summaries, states, tiers
    assert sent_tokens(received) <= max_tokens


class LangChainMiddlewareContract:
    """What an ``AgentMiddleware`` must do in ``create_agent`` (fake model, checkpointer)."""

    middleware_class: ClassVar[type[lc.StrategyMiddleware]]
    kwargs: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def make(self, hashing_embedder):
        def make(**overrides: Any) -> lc.StrategyMiddleware:
            components = fast_components(self.middleware_class, hashing_embedder)
            return self.middleware_class(**{**components, **self.kwargs, **overrides})

        return make

    def test_model_receives_the_selection(self, make):
        middleware = make(max_tokens=MAX_TOKENS, token_counter=words)
        model, agent = agent_with(middleware, [ANSWER])
        full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        result = agent.invoke({"messages": full}, thread("t"))
        (received,) = model.received
        assert_received(received, full, MAX_TOKENS)
        assert middleware.last_context is not None and middleware.last_context.query == CAT_QUERY
        # the agent state keeps the whole conversation; the selection was for the call only
        assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]
        assert result["messages"][-1].content == ANSWER

    async def test_close_closes_the_store_it_opened(self, make, closed_stores):
        def use(middleware: lc.StrategyMiddleware) -> None:
            _, agent = agent_with(middleware, [ANSWER])
            agent.invoke({"messages": [*lc_history(), HumanMessage(CAT_QUERY)]}, thread("t"))

        await assert_close_contract(make, use, *closed_stores)

    def test_threads_never_see_each_other(self, make):
        middleware = make()
        model, agent = agent_with(middleware, ["Noted."] * 3)
        agent.invoke({"messages": [*lc_history(TURNS[:4], "a"), HumanMessage("Thanks!")]}, thread("a"))
        agent.invoke({"messages": [*lc_history(TURNS[4:], "b"), HumanMessage(CAT_QUERY)]}, thread("b"))
        assert CAT_WORD not in text_of(model.received[-1])
        # thread a again: the checkpointer restores its history, the middleware selects from it
        agent.invoke({"messages": [HumanMessage(CAT_QUERY)]}, thread("a"))
        assert CAT_WORD in text_of(model.received[-1])
        assert middleware.conversation("a") is not middleware.conversation("b")

    def test_streaming(self, make):
        full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        middleware = make(max_tokens=MAX_TOKENS, token_counter=words)
        model, agent = agent_with(middleware, [ANSWER], streaming=True)
        chunks = [
            message
            for message, _ in agent.stream({"messages": full}, thread("t"), stream_mode="messages")
            if isinstance(message, AIMessageChunk)
        ]
        assert len(chunks) > 1 and "".join(str(c.content) for c in chunks) == ANSWER
        (received,) = model.received
        assert_received(received, full, MAX_TOKENS)
        state = agent.get_state(thread("t")).values["messages"]
        assert [m.id for m in state[: len(full)]] == [m.id for m in full] and state[-1].content == ANSWER

    async def test_ainvoke_matches_invoke(self, make):
        full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
        sync_model, sync_agent = agent_with(make(max_tokens=MAX_TOKENS, token_counter=words), [ANSWER])
        async_model, async_agent = agent_with(make(max_tokens=MAX_TOKENS, token_counter=words), [ANSWER])
        sync_agent.invoke({"messages": full}, thread("t"))
        result = await async_agent.ainvoke({"messages": full}, thread("t"))
        (received,) = async_model.received
        assert_received(received, full, MAX_TOKENS)
        assert [(type(m), m.content) for m in received] == [
            (type(m), m.content) for m in sync_model.received[0]
        ]
        assert len(result["messages"]) == len(full) + 1

    def test_tool_turn_in_progress_is_sent_whole(self, make):
        call = {"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}
        middleware = make(max_tokens=MAX_TOKENS + 40, token_counter=words)
        model, agent = agent_with(middleware, [AIMessage("", tool_calls=[call]), AIMessage("Sunny in Oslo.")])
        full = [*lc_history(), HumanMessage("What is the weather in Oslo?", id="q")]
        result = agent.invoke({"messages": full}, thread("t"))
        first, second = model.received
        assert first[-1].id == "q"
        question, tool_call, tool_result = second[-3:]
        assert question.id == "q" and isinstance(tool_call, AIMessage) and tool_call.tool_calls
        assert isinstance(tool_result, LCToolMessage) and tool_result.tool_call_id == "call-1"
        assert "Oslo" in str(tool_result.content)
        assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]
        assert result["messages"][-1].content == "Sunny in Oslo."


class TestKadaneDialMiddleware(LangChainMiddlewareContract):
    middleware_class = lc.KadaneDialMiddleware


class TestSWinSummaryMiddleware(LangChainMiddlewareContract):
    middleware_class = lc.SWinSummaryMiddleware
    kwargs = {"window": 4, "overlap": 1}


class TestDiscourseTreeMiddleware(LangChainMiddlewareContract):
    middleware_class = lc.DiscourseTreeMiddleware


class TestACMTieredMiddleware(LangChainMiddlewareContract):
    middleware_class = lc.ACMTieredMiddleware


class TestTopicThreadMiddleware(LangChainMiddlewareContract):
    middleware_class = lc.TopicThreadMiddleware
