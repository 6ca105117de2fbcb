"""Interface parity with the framework classes users replace.

LlamaIndex memories against ``ChatMemoryBuffer``: ``to_string``/``from_string``,
``to_dict``/``from_dict`` (history and every serialisable parameter), ``get(initial_token_count=...)``
edge cases. LangChain classic memories against ``ConversationBufferMemory``: ``buffer``,
``buffer_as_str``, ``buffer_as_messages``. Every test runs for all five memories.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_classic.memory import ConversationBufferMemory
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer

import llamaindex_ctxmgmt as li
from ctxmgmt.components.decider import EmbeddedDecider
from ctxmgmt.messages.exceptions import BudgetExceededError, ConfigurationError
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, fill
from tests.adapters.test_llamaindex_contract import (
    MARATHON_QUERY,
    SOURDOUGH_QUERY,
    conversation,
    turn_messages,
)
from tests.helpers import LC_MEMORIES, LI_MEMORIES


def li_components(cls: type, embedder: Any) -> dict[str, Any]:
    """Fast components of a LlamaIndex memory (not serialised: passed again on restore)."""
    out: dict[str, Any] = {}
    if "embed_model" in cls.model_fields:
        out["embed_model"] = embedder
    if "entity_extractor" in cls.model_fields:
        out["entity_extractor"] = CapitalisedExtractor()
    return out


def lc_components(cls: type, embedder: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "embedder" in cls.model_fields:
        out["embedder"] = embedder
    if "entity_extractor" in cls.model_fields:
        out["entity_extractor"] = CapitalisedExtractor()
    if "decider" in cls.model_fields:
        out["decider"] = EmbeddedDecider(shift_model=None)
    return out


def changed(default: Any, choices: tuple[str, ...] = ()) -> Any:
    """A valid value other than ``default`` for a strategy parameter (a string: another choice)."""
    if isinstance(default, str):
        return next(c for c in choices if c != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    return round(default * 0.9 if default else 0.1, 4)


KEEP_DEFAULT = {"background"}
"""Parameters left at their default: ``background=True`` starts summary threads."""


def li_parameters(cls: type) -> dict[str, Any]:
    """Every serialisable strategy parameter of ``cls`` set to a non-default value."""
    choices = {p.name: p.choices for p in cls.strategy_class.config_class.params()}
    return {
        f.name: changed(f.default, choices.get(f.name, ()))
        for f in cls.adapter_fields
        if not f.component and f.name not in KEEP_DEFAULT
    }


def view(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role.value, m.content or "") for m in messages]


@pytest.fixture(params=LI_MEMORIES, ids=lambda cls: cls.__name__)
def li_class(request) -> type:
    return request.param


@pytest.fixture
def configured(li_class, hashing_embedder) -> li.StrategyMemory:
    """A memory with every parameter changed from its default, holding the conversation."""
    return li_class.from_defaults(
        chat_history=conversation(),
        chat_store_key="alice",
        token_limit=700,
        max_sessions=3,
        **li_parameters(li_class),
        **li_components(li_class, hashing_embedder),
    )


# -- LlamaIndex: serialisation ---------------------------------------------------------------


def assert_same_memory(clone: li.StrategyMemory, memory: li.StrategyMemory) -> None:
    assert type(clone) is type(memory)
    assert clone.get_all() == memory.get_all()
    assert clone.chat_store_key == "alice"
    for name in ("token_limit", "max_sessions", *li_parameters(type(memory))):
        assert getattr(clone, name) == getattr(memory, name), name
    assert clone.to_dict() == memory.to_dict()
    # the parameters reach the strategy: the clone selects what the original selects
    assert view(clone.get(input=SOURDOUGH_QUERY)) == view(memory.get(input=SOURDOUGH_QUERY))


def test_to_string_round_trip(configured, hashing_embedder):
    text = configured.to_string()
    assert isinstance(text, str) and json.loads(text) == configured.to_dict()
    clone = type(configured).from_string(text, **li_components(type(configured), hashing_embedder))
    assert_same_memory(clone, configured)


def test_to_dict_round_trip_keeps_every_parameter(configured, hashing_embedder):
    data = configured.to_dict()
    assert data["class_name"] == type(configured).__name__
    expected = {"token_limit", "chat_store_key", "max_sessions", *li_parameters(type(configured))}
    assert expected <= set(data)
    # components are not serialised; they are passed again
    assert not {"embed_model", "llm", "token_counter", "tokenizer_fn", "store"} & set(data)
    clone = type(configured).from_dict(data, **li_components(type(configured), hashing_embedder))
    assert_same_memory(clone, configured)
    # the dict survives JSON (the way to_string stores it)
    reloaded = type(configured).from_dict(
        json.loads(json.dumps(data)), **li_components(type(configured), hashing_embedder)
    )
    assert_same_memory(reloaded, configured)


def test_from_dict_accepts_an_old_style_chat_history(li_class, hashing_embedder):
    history = conversation()
    data = {"token_limit": 500, "chat_history": [m.model_dump() for m in history]}
    memory = li_class.from_dict(data, **li_components(li_class, hashing_embedder))
    assert view(memory.get_all()) == view(history)
    assert memory.token_limit == 500


def test_empty_memory_round_trip(li_class, hashing_embedder):
    memory = li_class.from_defaults(**li_components(li_class, hashing_embedder))
    clone = li_class.from_string(memory.to_string(), **li_components(li_class, hashing_embedder))
    assert clone.get_all() == [] and clone.get() == []


# -- LlamaIndex: initial_token_count as ChatMemoryBuffer handles it ---------------------------


def both(li_class: type, embedder: Any, history: list[ChatMessage], limit: int = 300) -> tuple[Any, Any]:
    """(our memory, a ChatMemoryBuffer), same history and token_limit."""
    ours = li_class.from_defaults(
        chat_history=history, token_limit=limit, **li_components(li_class, embedder)
    )
    buffer = ChatMemoryBuffer.from_defaults(chat_history=list(history), token_limit=limit)
    return ours, buffer


def test_initial_token_count_over_the_limit_raises_a_value_error(li_class, hashing_embedder):
    ours, buffer = both(li_class, hashing_embedder, conversation())
    with pytest.raises(ValueError):
        buffer.get(initial_token_count=301)
    with pytest.raises(ValueError) as raised:
        ours.get(initial_token_count=301)
    assert isinstance(raised.value, BudgetExceededError)
    with pytest.raises(ConfigurationError):
        ours.get(initial_token_count=-1)


async def test_initial_token_count_equal_to_the_limit(li_class, hashing_embedder):
    # the question waits: ChatMemoryBuffer returns it alone, so do we
    history = [*conversation(), ChatMessage(role="user", content=SOURDOUGH_QUERY)]
    ours, buffer = both(li_class, hashing_embedder, history)
    assert view(buffer.get(initial_token_count=300)) == [("user", SOURDOUGH_QUERY)]
    assert view(ours.get(initial_token_count=300)) == [("user", SOURDOUGH_QUERY)]
    assert view(await ours.aget(initial_token_count=300)) == [("user", SOURDOUGH_QUERY)]
    assert ours.get(initial_token_count=300)[0] is ours.get_all()[-1]  # the stored object
    # an empty history: both return nothing
    ours, buffer = both(li_class, hashing_embedder, [])
    assert buffer.get(initial_token_count=300) == [] == ours.get(initial_token_count=300)


def test_initial_token_count_leaving_too_little_room(li_class, hashing_embedder):
    question = ChatMessage(role="user", content="Please tell me " + "more " * 40 + "about sourdough.")
    ours, buffer = both(li_class, hashing_embedder, [*conversation(), question])
    # 30 tokens left cannot hold the 40-word question: the question alone, as ChatMemoryBuffer
    assert view(buffer.get(initial_token_count=270)) == view([question])
    assert view(ours.get(initial_token_count=270)) == view([question])
    # with initial_token_count 0 a question over token_limit stays an error (a configuration problem)
    ours.token_limit = buffer.token_limit = 30
    assert view(buffer.get()) == view([question])
    with pytest.raises(BudgetExceededError):
        ours.get()


def test_initial_token_count_keeps_a_tool_turn_whole(li_class, hashing_embedder):
    """Documented difference: ChatMemoryBuffer returns the newest message, we the newest turn."""
    agent_turn = turn_messages(6)[:-1]  # the weather question, the tool call, its result
    assert [m.role for m in agent_turn] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL]
    ours, buffer = both(li_class, hashing_embedder, [*conversation(), *agent_turn])
    assert view(buffer.get(initial_token_count=300)) == view(agent_turn[-1:])
    assert ours.get(initial_token_count=300) == agent_turn
    # no turn in progress (the last answer is final): ChatMemoryBuffer returns that answer, we nothing
    ours, buffer = both(li_class, hashing_embedder, conversation())
    assert view(buffer.get(initial_token_count=300)) == view(conversation()[-1:])
    assert ours.get(initial_token_count=300) == []


def test_initial_token_count_below_the_limit_still_selects(li_class, hashing_embedder):
    history = [*conversation(), ChatMessage(role="user", content=MARATHON_QUERY)]
    ours, _ = both(li_class, hashing_embedder, history)
    squeezed = ours.get(initial_token_count=200)
    assert squeezed[-1].content == MARATHON_QUERY and len(squeezed) >= 1
    assert ours.last_context is not None and ours.last_context.tokens <= 100


# -- LangChain classic: buffer properties as ConversationBufferMemory -------------------------


@pytest.mark.parametrize("cls", LC_MEMORIES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("return_messages", [False, True])
def test_buffer_properties_match_conversation_buffer_memory(cls, return_messages, hashing_embedder):
    ours = cls(
        return_messages=return_messages,
        human_prefix="User",
        ai_prefix="Bot",
        max_token_limit=120,
        **lc_components(cls, hashing_embedder),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConversationBufferMemory is deprecated
        reference = ConversationBufferMemory(
            return_messages=return_messages, human_prefix="User", ai_prefix="Bot"
        )
    fill(ours)
    fill(reference)

    assert ours.buffer_as_str == reference.buffer_as_str
    assert ours.buffer_as_str.startswith(f"User: {TURNS[0][0]}\nBot: {TURNS[0][1]}")
    assert ours.buffer_as_messages == reference.buffer_as_messages
    assert all(isinstance(m, HumanMessage | AIMessage) for m in ours.buffer_as_messages)
    assert ours.buffer == reference.buffer
    assert type(ours.buffer) is (list if return_messages else str)
    # the buffer is the full history, the selection is what the model gets
    selected = ours.load_memory_variables({"input": CAT_QUERY})["history"]
    if return_messages:
        assert len(selected) < len(ours.buffer_as_messages) == 2 * len(TURNS)
    else:
        assert len(selected) < len(ours.buffer_as_str)
    ours.buffer_as_messages.clear()  # a copy: the history is untouched
    assert len(ours.messages) == 2 * len(TURNS)
    ours.clear()
    assert ours.buffer_as_str == "" and ours.buffer_as_messages == []
