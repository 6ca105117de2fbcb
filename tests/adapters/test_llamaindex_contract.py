"""Contract suite every LlamaIndex ctxmgmt memory passes (the langchain-tests pattern).

Subclass :class:`LlamaIndexMemoryContract` and override the ``memory`` fixture to return an
empty memory; every check below then runs for that class. The conversation helpers are also
used by the integration tests.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
from pydantic_core import PydanticSerializationError

from ctxmgmt.components.budget import messages_tokens
from ctxmgmt.messages.exceptions import BudgetExceededError, ConfigurationError, InvalidMessageError
from llamaindex_ctxmgmt import KadaneDialMemory
from llamaindex_ctxmgmt._convert import to_messages
from tests.helpers import is_li_memory

# -- a long multi-topic conversation with one tool turn ------------------------------------

TOPIC_TURNS: list[tuple[str, str]] = [
    # 0-2 sourdough
    (
        "I want to bake sourdough bread. How often should I feed my sourdough starter?",
        "Feed the sourdough starter daily with equal weights of rye flour and water.",
    ),
    (
        "My sourdough loaf came out dense and flat. What went wrong with the dough?",
        "A dense sourdough loaf usually means the starter was weak or the dough was under-proofed.",
    ),
    (
        "What oven temperature should I bake the sourdough loaf at?",
        "Bake the sourdough loaf in a Dutch oven at 250 C for 20 minutes, then uncovered at 230 C.",
    ),
    # 3-5 pandas
    (
        "In Python, my pandas merge raises a KeyError. How do I debug it?",
        "Print df.columns for both pandas DataFrames; the merge key column is probably misspelled.",
    ),
    (
        "How do I group a pandas DataFrame by two columns and sum?",
        "Use df.groupby(['region', 'year'])['sales'].sum() in pandas.",
    ),
    (
        "How can I write the pandas DataFrame to a parquet file?",
        "Call df.to_parquet('sales.parquet') after installing pyarrow.",
    ),
    # 6 weather, answered with a tool call (see conversation())
    ("What is the weather in Oslo today?", ""),
    # 7-9 marathon
    (
        "I signed up for my first marathon. How many kilometres per week should I run?",
        "Build up to 50-70 kilometres per week, with one long run every weekend.",
    ),
    (
        "What should I eat the night before the marathon?",
        "Eat a carbohydrate-rich dinner such as pasta or rice the night before the marathon.",
    ),
    (
        "My knees hurt after long runs. Should I worry before the marathon?",
        "Reduce your weekly running, ice the knees and see a physiotherapist if the pain lasts.",
    ),
    # 10-11 tomatoes
    (
        "My tomato plants have yellow leaves. What is wrong with the garden?",
        "Yellow tomato leaves often mean overwatering or a nitrogen deficiency in the soil.",
    ),
    (
        "When should I harvest the tomatoes?",
        "Harvest tomatoes when they are fully coloured and slightly soft.",
    ),
    # 12 novel
    ("Can you recommend a science fiction novel?", "Try The Left Hand of Darkness by Ursula K. Le Guin."),
]
SOURDOUGH, PANDAS, WEATHER, MARATHON, TOMATOES = {0, 1, 2}, {3, 4, 5}, {6}, {7, 8, 9}, {10, 11}
SOURDOUGH_QUERY = "How long to proof sourdough dough for a sourdough loaf?"
MARATHON_QUERY = "Marathon taper: reduce kilometres before the marathon?"
WEATHER_QUERY = "Oslo weather: still snow in Oslo?"
TOOL_CALL_ID = "call_oslo_1"


def turn_messages(index: int) -> list[ChatMessage]:
    """The ChatMessages of topic turn ``index`` (turn 6 holds a tool call and its result)."""
    user, answer = TOPIC_TURNS[index]
    if index == 6:
        return [
            ChatMessage(role=MessageRole.USER, content=user),
            ChatMessage(
                role=MessageRole.ASSISTANT,
                blocks=[
                    ToolCallBlock(
                        tool_call_id=TOOL_CALL_ID, tool_name="get_weather", tool_kwargs={"city": "Oslo"}
                    )
                ],
            ),
            ChatMessage(
                role=MessageRole.TOOL,
                content="Oslo: 3 C, light snow",
                additional_kwargs={"tool_call_id": TOOL_CALL_ID},
            ),
            ChatMessage(role=MessageRole.ASSISTANT, content="It is 3 C with light snow in Oslo right now."),
        ]
    return [
        ChatMessage(role=MessageRole.USER, content=user),
        ChatMessage(role=MessageRole.ASSISTANT, content=answer),
    ]


def conversation() -> list[ChatMessage]:
    """Fresh ChatMessages of the whole conversation (13 turns, 28 messages)."""
    return [m for i in range(len(TOPIC_TURNS)) for m in turn_messages(i)]


def turns_present(selected: list[ChatMessage]) -> set[int]:
    """Topic turns whose user message is among ``selected`` (by text)."""
    texts = {m.content for m in selected if m.role == MessageRole.USER}
    return {i for i, (user, _) in enumerate(TOPIC_TURNS) if user in texts}


def is_subsequence(selected: list[ChatMessage], history: list[ChatMessage]) -> bool:
    """Every selected message is one of ``history``'s objects (identity), in history order."""
    positions = [next((i for i, h in enumerate(history) if h is m), -1) for m in selected]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


def ask(memory, query: str = SOURDOUGH_QUERY) -> list[ChatMessage]:
    """Put the whole conversation, then ``query`` as the newest user message; what ``get()`` sends."""
    memory.put_messages(conversation())
    memory.put(ChatMessage(role="user", content=query))
    return memory.get()


def tokens(memory, messages: list[ChatMessage]) -> int:
    """Tokens of ``messages`` as the memory's own counter counts them."""
    return messages_tokens(memory.strategy.token_counter, to_messages(messages))


def _components(memory):
    """The memory's components (embedder, extractor, ...): copies of it are given them again."""
    return {f.name: getattr(memory, f.name) for f in memory.adapter_fields if f.component}


class JsonFileChatStore(BaseChatStore):
    """A minimal file-backed chat store (any BaseChatStore must work, not only SimpleChatStore)."""

    path: str

    def _load(self) -> dict[str, list[dict]]:
        p = Path(self.path)
        return json.loads(p.read_text()) if p.exists() else {}

    def _save(self, data: dict[str, list[dict]]) -> None:
        Path(self.path).write_text(json.dumps(data))

    def set_messages(self, key, messages):
        data = self._load()
        data[key] = [m.model_dump(mode="json") for m in messages]
        self._save(data)

    def get_messages(self, key):
        return [ChatMessage.model_validate(d) for d in self._load().get(key, [])]

    def add_message(self, key, message):
        self.set_messages(key, [*self.get_messages(key), message])

    def delete_messages(self, key):
        data = self._load()
        gone = data.pop(key, None)
        self._save(data)
        return None if gone is None else [ChatMessage.model_validate(d) for d in gone]

    def delete_message(self, key, idx):
        messages = self.get_messages(key)
        gone = messages.pop(idx)
        self.set_messages(key, messages)
        return gone

    def delete_last_message(self, key):
        return self.delete_message(key, -1)

    def get_keys(self):
        return list(self._load())


# -- the contract ---------------------------------------------------------------------------


class LlamaIndexMemoryContract:
    """Checks every ctxmgmt LlamaIndex memory must pass. Override ``memory``."""

    @pytest.fixture
    def memory(self, hashing_embedder):
        """An empty memory of the class under test (fast embedder)."""
        raise NotImplementedError

    # lossless history -----------------------------------------------------------------
    def test_empty(self, memory):
        assert memory.get_all() == []
        assert memory.get() == []
        assert memory.get(input="anything at all") == []

    def test_get_all_is_exactly_what_was_put(self, memory):
        history = [ChatMessage(role="system", content="You are terse."), *conversation()]
        history.append(
            ChatMessage(role="assistant", content="thinking done", additional_kwargs={"name": "bot"})
        )
        memory.put_messages(history[:10])
        for message in history[10:]:
            memory.put(message)
        stored = memory.get_all()
        assert len(stored) == len(history)
        assert all(a is b for a, b in zip(stored, history, strict=True))

    def test_get_all_returns_a_copy_of_the_list(self, memory):
        memory.put_messages(conversation()[:4])
        memory.get_all().clear()
        assert len(memory.get_all()) == 4

    def test_set_replaces_and_reset_clears(self, memory):
        memory.put_messages(conversation())
        replacement = turn_messages(0) + turn_messages(3)
        memory.set(replacement)
        assert memory.get_all() == replacement
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        assert turns_present(memory.get()) <= {0, 3}
        memory.reset()
        assert memory.get_all() == []
        assert memory.get() == []

    # selection ------------------------------------------------------------------------
    def test_get_returns_stored_objects_in_chronological_order(self, memory):
        selected = ask(memory)
        assert selected
        assert is_subsequence(selected, memory.get_all())

    def test_turn_in_progress_is_always_last(self, memory):
        memory.put_messages(conversation())
        question = ChatMessage(role="user", content="Something completely new: how do volcanoes form?")
        memory.put(question)
        assert memory.get()[-1] is question
        assert memory.get(input=MARATHON_QUERY)[-1] is question

    def test_system_messages_come_first(self, memory):
        system = ChatMessage(role="system", content="You are a helpful assistant.")
        memory.put_messages([system, *conversation()])
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        assert memory.get()[0] is system

    def test_query_inference(self, memory):
        memory.put_messages(conversation())
        # CondensePlusContextChatEngine: get(input=...) before the user message is put
        memory.get(input=MARATHON_QUERY)
        assert memory.last_context.query == MARATHON_QUERY
        # SimpleChatEngine / ContextChatEngine: the user message is put first, get() has no input
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        memory.get()
        assert memory.last_context.query == SOURDOUGH_QUERY
        # agents after a tool call: aget(input=...) with the user message already stored
        memory.get(input=ChatMessage(role="user", content=WEATHER_QUERY))
        assert memory.last_context.query == WEATHER_QUERY

    def test_tool_call_and_result_stay_together(self, memory):
        memory.put_messages(conversation())
        history = memory.get_all()
        call, result = history[13], history[14]
        assert call.blocks[0].block_type == "tool_call" and result.role == MessageRole.TOOL
        for query in (WEATHER_QUERY, SOURDOUGH_QUERY, MARATHON_QUERY, "tomato harvest"):
            selected = memory.get(input=query)
            has_call = any(m is call for m in selected)
            has_result = any(m is result for m in selected)
            assert has_call == has_result, query

    def test_token_limit_is_respected(self, memory):
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        full = tokens(memory, memory.get_all())
        memory.token_limit = full // 3
        selected = memory.get()
        assert 0 < tokens(memory, selected) <= memory.token_limit
        assert selected[-1].content == SOURDOUGH_QUERY

    def test_initial_token_count_is_subtracted(self, memory):
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        memory.token_limit = 200
        free = memory.get()
        squeezed = memory.get(initial_token_count=120)
        assert tokens(memory, free) <= 200
        assert tokens(memory, squeezed) <= 80
        assert len(squeezed) <= len(free)

    def test_initial_token_count_errors(self, memory):
        memory.put_messages(conversation())
        with pytest.raises(BudgetExceededError):  # a ValueError, as ChatMemoryBuffer raises
            memory.get(initial_token_count=memory.token_limit + 1)
        # no room left and no turn in progress: nothing to send (tests/adapters/test_interface_parity.py)
        assert memory.get(initial_token_count=memory.token_limit) == []
        with pytest.raises(ConfigurationError):
            memory.get(initial_token_count=-1)

    def test_turn_in_progress_over_budget_raises(self, memory):
        memory.token_limit = 20
        memory.put(ChatMessage(role="user", content="word " * 100))
        with pytest.raises(BudgetExceededError):
            memory.get()

    # bad input ------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "bad",
        [
            "a plain string",
            ChatMessage(role="user", content=""),
            ChatMessage(role="user", content="   "),
            ChatMessage(role="assistant", blocks=[]),
        ],
        ids=["str", "empty", "blank", "no-blocks"],
    )
    def test_bad_messages_are_rejected_before_storing(self, memory, bad):
        memory.put_messages(turn_messages(0))
        with pytest.raises(InvalidMessageError):
            memory.put(bad)
        with pytest.raises(InvalidMessageError):
            memory.put_messages([*turn_messages(1), bad])
        with pytest.raises(InvalidMessageError):
            memory.set([bad])
        assert len(memory.get_all()) == 2

    @pytest.mark.parametrize(
        "blocks",
        [
            [ImageBlock(url="https://example.com/cat.png")],
            [TextBlock(text="look"), ImageBlock(url="https://example.com/cat.png")],
        ],
        ids=["image", "text+image"],
    )
    def test_media_messages_are_stored_untouched(self, memory, blocks):
        message = ChatMessage(role="user", blocks=blocks)
        memory.put_messages(turn_messages(0))
        memory.put(message)
        assert memory.get_all()[-1].blocks == blocks
        assert memory.get()[-1].blocks == blocks  # the turn in progress, media included

    def test_bad_input_type_is_rejected(self, memory):
        memory.put_messages(turn_messages(0))
        with pytest.raises(InvalidMessageError):
            memory.get(input=42)

    def test_assistant_with_only_tool_calls_is_accepted(self, memory):
        memory.put_messages(turn_messages(6))
        assert len(memory.get_all()) == 4

    # async ----------------------------------------------------------------------------
    async def test_async_parity(self, memory):
        history = conversation()
        await memory.aput_messages(history[:6])
        for message in history[6:]:
            await memory.aput(message)
        assert await memory.aget_all() == memory.get_all()
        assert all(a is b for a, b in zip(await memory.aget_all(), history, strict=True))
        await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        sync_selected = memory.get()
        async_selected = await memory.aget()
        assert len(async_selected) == len(sync_selected)
        assert all(a is b for a, b in zip(async_selected, sync_selected, strict=True))
        async_input = await memory.aget(input=MARATHON_QUERY, initial_token_count=10)
        assert [id(m) for m in async_input] == [
            id(m) for m in memory.get(input=MARATHON_QUERY, initial_token_count=10)
        ]
        await memory.aset(turn_messages(2))
        assert await memory.aget_all() == turn_messages(2)
        await memory.areset()
        assert await memory.aget_all() == []
        assert await memory.aget() == []

    async def test_async_rejects_bad_messages(self, memory):
        with pytest.raises(InvalidMessageError):
            await memory.aput(ChatMessage(role="user", content=""))
        with pytest.raises(InvalidMessageError):
            await memory.aput_messages([ChatMessage(role="user", content="ok"), "bad"])
        with pytest.raises(InvalidMessageError):
            await memory.aset(["bad"])
        assert await memory.aget_all() == []

    async def test_concurrent_agets_agree(self, memory):
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        results = await asyncio.gather(*(memory.aget() for _ in range(4)))
        assert all([id(m) for m in r] == [id(m) for m in results[0]] for r in results)

    # chat stores ------------------------------------------------------------------------
    def test_shared_chat_store_and_keys(self, memory):
        store = SimpleChatStore()
        memory.chat_store = store
        memory.chat_store_key = "alice"
        memory.put_messages(conversation())
        other = type(memory).from_defaults(chat_store=store, chat_store_key="alice", **_components(memory))
        assert other.get_all() == memory.get_all()
        bob = type(memory).from_defaults(chat_store=store, chat_store_key="bob", **_components(memory))
        assert bob.get_all() == []
        bob.put_messages(turn_messages(0))
        assert len(memory.get_all()) == 28
        assert store.get_keys() == ["alice", "bob"]

    def test_file_backed_chat_store_persists_history(self, memory, tmp_path):
        path = tmp_path / "history.json"
        memory.chat_store = JsonFileChatStore(path=str(path))
        memory.put_messages(conversation())
        # a new process: a new store object and a new memory over the same file
        restored = type(memory).from_defaults(
            chat_store=JsonFileChatStore(path=str(path)), **_components(memory)
        )
        assert restored.get_all() == memory.get_all()
        restored.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        selected = restored.get()
        assert selected[-1].content == SOURDOUGH_QUERY
        # both memories read the same file, so both now see the new question
        assert [m.content for m in selected] == [m.content for m in memory.get()]

    async def test_file_backed_chat_store_async(self, memory, tmp_path):
        memory.chat_store = JsonFileChatStore(path=str(tmp_path / "history.json"))
        await memory.aput_messages(conversation())
        await memory.aput(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        assert len(await memory.aget_all()) == 29
        assert (await memory.aget())[-1].content == SOURDOUGH_QUERY

    def test_simple_chat_store_persist(self, memory, tmp_path):
        store = SimpleChatStore()
        memory.chat_store = store
        memory.put_messages(conversation())
        path = tmp_path / "chat_store.json"
        try:
            store.persist(persist_path=str(path))
        except PydanticSerializationError as exc:  # pragma: no cover - depends on the pydantic version
            if "index_key" not in str(exc):
                raise
            pytest.skip(
                "upstream bug: SimpleChatStore.persist() fails under pydantic >= 2.14 (llama-index-core "
                "passes its serializer's info as an index key, an error since pydantic/pydantic#13506); "
                "docs/composing.md says so to users"
            )
        restored = type(memory).from_defaults(
            chat_store=SimpleChatStore.from_persist_path(str(path)), **_components(memory)
        )
        assert restored.get_all() == memory.get_all()

    def test_to_dict_round_trip(self, memory):
        memory.put_messages(conversation())
        data = memory.to_dict()
        assert data["class_name"] == type(memory).class_name()
        clone = type(memory).from_dict(data, **_components(memory))
        assert clone.get_all() == memory.get_all()
        assert clone.token_limit == memory.token_limit

    # construction -----------------------------------------------------------------------
    def test_constructs_without_arguments(self, memory):
        cls = type(memory)
        assert cls().get_all() == []
        assert cls.from_defaults().get_all() == []
        assert callable(cls().tokenizer_fn)

    def test_from_defaults_options(self, memory):
        cls = type(memory)
        history = conversation()
        seeded = cls.from_defaults(chat_history=history, **_components(memory))
        assert seeded.get_all() == history
        llm = MockLLM()
        assert cls.from_defaults(llm=llm).token_limit == math.floor(llm.metadata.context_window * 0.75)
        assert cls.from_defaults(token_limit=123).token_limit == 123
        with pytest.raises((ConfigurationError, TypeError)):
            cls.from_defaults(not_an_option=1)
        with pytest.raises(ConfigurationError):
            cls.from_defaults(token_limit=0)
        with pytest.raises(InvalidMessageError):
            cls.from_defaults(chat_history=[ChatMessage(role="user", content="")])

    def test_tokenizer_fn_agrees_with_the_budget(self, memory):
        text = "How long to proof sourdough dough?"
        assert len(memory.tokenizer_fn(text)) == memory.strategy.token_counter.count(text)
        words = type(memory).from_defaults(tokenizer_fn=str.split, **_components(memory))
        assert words.strategy.token_counter.count("one two three") == 3
        counted = type(memory).from_defaults(token_counter=len, **_components(memory))
        assert len(counted.tokenizer_fn("abcd")) == 4

    def test_explain_and_last_context(self, memory):
        assert "get()" in memory.explain()
        memory.put_messages(conversation())
        memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
        memory.get()
        assert memory.last_context is not None
        assert memory.last_context.query == SOURDOUGH_QUERY
        assert SOURDOUGH_QUERY in memory.explain()


class OwnMessagesFirstContract:
    """Checks for memories that send messages of their own (a summary, thread states) first.

    Set ``own_messages`` to how many the sourdough query gets (None: any number).
    """

    own_messages: int | None = None

    def test_get_returns_stored_objects_in_chronological_order(self, memory):
        """The memory's own messages are framed user-role memory messages (never system), first;
        then stored objects, in order."""
        selected = ask(memory)
        stored = memory.get_all()
        own = [m for m in selected if not any(m is s for s in stored)]
        assert self.own_messages is None or len(own) == self.own_messages
        assert all(is_li_memory(m) for m in own)
        assert not any(m.role == MessageRole.SYSTEM for m in own)
        assert all(a is b for a, b in zip(selected, own, strict=False))  # first
        assert is_subsequence(selected[len(own) :], stored)

    def test_own_messages_are_stable(self, memory):
        """Asked again, the memory sends the very same objects (its own messages included)."""
        memory.put_messages(conversation())
        for query in ("x", SOURDOUGH_QUERY):
            first, again = memory.get(input=query), memory.get(input=query)
            assert len(first) == len(again) and all(a is b for a, b in zip(first, again, strict=True))


class TestKadaneDialMemoryContract(LlamaIndexMemoryContract):
    @pytest.fixture
    def memory(self, hashing_embedder):
        return KadaneDialMemory.from_defaults(embed_model=hashing_embedder)

    def test_relevant_turns_selected_for_the_newest_user_message(self, memory):
        present = turns_present(ask(memory))
        assert SOURDOUGH <= present
        assert not present & (PANDAS | WEATHER | TOMATOES)
        assert len(present - SOURDOUGH) <= 1  # KadaneDial's last pass may add one weak span

    def test_input_overrides_the_newest_user_message(self, memory):
        memory.put_messages(conversation())
        present = turns_present(memory.get(input=MARATHON_QUERY))
        assert MARATHON <= present
        assert not present & (SOURDOUGH | PANDAS | WEATHER)

    def test_tool_turn_selected_whole_when_relevant(self, memory):
        memory.put_messages(conversation())
        selected = memory.get(input=WEATHER_QUERY)
        assert 6 in turns_present(selected)
        start = next(i for i, m in enumerate(selected) if m.content == TOPIC_TURNS[6][0])
        assert [m.role for m in selected[start : start + 4]] == [
            MessageRole.USER,
            MessageRole.ASSISTANT,
            MessageRole.TOOL,
            MessageRole.ASSISTANT,
        ]
        assert not turns_present(selected) & (SOURDOUGH | MARATHON | TOMATOES)

    def test_defaults_and_parameters_reach_the_strategy(self, hashing_embedder):
        from llamaindex_ctxmgmt import KadaneDialBlock
        from tests.adapters.test_langchain_contract import KADANEDIAL_DEFAULTS

        names = tuple(KADANEDIAL_DEFAULTS)
        memory = KadaneDialMemory.from_defaults(embed_model=hashing_embedder)
        block = KadaneDialBlock(embed_model=hashing_embedder)
        for adapter in (memory, block):
            assert {n: getattr(adapter, n) for n in names} == KADANEDIAL_DEFAULTS
        assert {n: getattr(memory.strategy, n) for n in names} == KADANEDIAL_DEFAULTS
        params = dict(zip(names, (0.2, 0.5, 2, 0.7, 2.0, 0.1, None), strict=True))
        tuned = KadaneDialMemory.from_defaults(embed_model=hashing_embedder, **params)
        assert {n: getattr(tuned.strategy, n) for n in names} == params

    def test_embeddings_are_computed_once(self, memory, hashing_embedder):
        memory.put_messages(conversation())
        memory.get(input=SOURDOUGH_QUERY)
        embedded = sum(hashing_embedder.calls)
        memory.get(input=MARATHON_QUERY)
        memory.get(input=WEATHER_QUERY)
        assert sum(hashing_embedder.calls) == embedded + 2  # only the two queries
        memory.put_messages(
            [
                ChatMessage(role="user", content="A new topic: volcanoes?"),
                ChatMessage(role="assistant", content="Lava."),
            ]
        )
        memory.get(input=SOURDOUGH_QUERY)
        assert sum(hashing_embedder.calls) == embedded + 2 + 2  # one new turn, one query

    def test_llamaindex_embedding_model_is_accepted(self):
        memory = KadaneDialMemory.from_defaults(embed_model=MockEmbedding(embed_dim=8))
        selected = ask(memory)
        assert selected[-1].content == SOURDOUGH_QUERY
        assert is_subsequence(selected, memory.get_all())

    def test_strategy_parameters(self, hashing_embedder):
        params = {"keep_last": 2, "tau": 0.8, "theta": 1.5, "lexical_weight": 0.0, "sharpness": 1.0}
        params["neighbour_weight"] = 0.0
        memory = KadaneDialMemory.from_defaults(embed_model=hashing_embedder, **params)
        assert {name: getattr(memory.strategy, name) for name in params} == params
        assert {11, 12} <= turns_present(ask(memory))
        with pytest.raises(ConfigurationError):
            KadaneDialMemory.from_defaults(tau=float("nan"))
        with pytest.raises(ConfigurationError):
            KadaneDialMemory(keep_last=-1)
        with pytest.raises(ConfigurationError):
            KadaneDialMemory(lexical_weight=-0.5)
        with pytest.raises(ConfigurationError):
            KadaneDialMemory(sharpness=0)
