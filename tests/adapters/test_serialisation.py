"""Serialisation says what it keeps: ``to_dict`` stores every parameter and names the components.

For every memory of both frameworks: ``to_dict`` holds every serialisable parameter (the
method's, the adapter's, the LLM call limits) and lists the components that were set under
``"custom_components"``; ``from_dict`` with those components passed again selects exactly as the
original; without them it raises a ``ConfigurationError`` naming each one (a token counter only
warns), instead of silently substituting the defaults (an LLM summariser turning extractive).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from llama_index.core.base.llms.types import ChatMessage

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt.adapter.kit import CUSTOM_COMPONENTS_KEY
from ctxmgmt.components.decider import EmbeddedDecider, LLMDecider
from ctxmgmt.components.summarizer import LLMSummarizer
from ctxmgmt.messages.exceptions import ConfigurationError
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS, fill
from tests.adapters.test_llamaindex_contract import SOURDOUGH_QUERY, conversation
from tests.helpers import LC_MEMORIES, LI_MEMORIES

MEMORIES = LI_MEMORIES + LC_MEMORIES
DECISION = '{"action": "continue", "topic": null, "node": null}'
SUMMARY = "- The user talked about plans and problems."


def field_names(cls: type) -> set[str]:
    return {f.name for f in cls.adapter_fields}


def answer_for(cls: type) -> str:
    return DECISION if cls.strategy_class.llm_component == "decider" else SUMMARY


def components(cls: type, embedder: Any) -> dict[str, Any]:
    """Every component ``cls`` takes, set to a custom (fast, deterministic) one."""
    names = field_names(cls)
    out: dict[str, Any] = {}
    for name in ("embed_model", "embedder"):
        if name in names:
            out[name] = embedder
    if "entity_extractor" in names:
        out["entity_extractor"] = CapitalisedExtractor()
    if "llm" in names:  # the LLM stands in for the summariser or decider
        out["llm"] = (
            PromptRecordingLLM(answer=answer_for(cls))
            if issubclass(cls, li.StrategyMemory)
            else FakeListChatModel(responses=[answer_for(cls)])
        )
    elif "decider" in names:
        out["decider"] = EmbeddedDecider(shift_model=None)
    return out


def changed_parameters(cls: type) -> dict[str, Any]:
    """A few plain parameters set away from their defaults (the budget and the LLM call limits)."""
    out: dict[str, Any] = (
        {"max_sessions": 3} if issubclass(cls, li.StrategyMemory) else {"session_id": "alice"}
    )
    if "llm_timeout" in field_names(cls):
        out.update(llm_timeout=12.5, llm_max_input_chars=8_000)
    return out


def build(cls: type, embedder: Any, **extra: Any) -> Any:
    """A memory holding the conversation, with every component custom and a few parameters changed."""
    kwargs = {**components(cls, embedder), **changed_parameters(cls), **extra}
    if issubclass(cls, li.StrategyMemory):
        return cls.from_defaults(chat_history=conversation(), token_limit=600, **kwargs)
    memory = cls(max_token_limit=600, **kwargs)
    fill(memory)
    return memory


def selection(memory: Any) -> Any:
    """What the memory selects for a question (LlamaIndex ``get``, LangChain ``load_memory_variables``)."""
    if isinstance(memory, li.StrategyMemory):
        return [(m.role.value, m.content) for m in memory.get(input=SOURDOUGH_QUERY)]
    return memory.load_memory_variables({"input": CAT_QUERY})


@pytest.fixture(params=MEMORIES, ids=lambda cls: f"{cls.__module__.split('_')[0]}-{cls.__name__}")
def memory_class(request) -> type:
    return request.param


def test_to_dict_keeps_every_parameter_and_names_the_custom_components(memory_class, hashing_embedder):
    memory = build(memory_class, hashing_embedder)
    data = json.loads(json.dumps(memory.to_dict()))  # plain JSON data
    assert data["class_name"] == memory_class.__name__
    for f in memory_class.adapter_fields:
        if not f.component:  # every method parameter and LLM call limit, with its value
            assert data[f.name] == getattr(memory, f.name), f.name
    for name, value in changed_parameters(memory_class).items():
        assert data[name] == value
    expected = {
        name: type(value).__name__ for name, value in components(memory_class, hashing_embedder).items()
    }
    assert data[CUSTOM_COMPONENTS_KEY] == expected
    assert not set(expected) & set(data)  # the components themselves are not in the dict


def test_from_dict_with_the_components_again_selects_identically(memory_class, hashing_embedder):
    memory = build(memory_class, hashing_embedder)
    data = json.loads(memory.to_string())
    again = components(memory_class, hashing_embedder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: every component is given
        clone = memory_class.from_dict(data, **again)
    assert type(clone) is memory_class
    for name, value in changed_parameters(memory_class).items():
        assert getattr(clone, name) == value
    assert clone.to_dict() == memory.to_dict()
    assert selection(clone) == selection(memory)
    if "llm" in again:  # the restored memory calls the model, with the saved limits
        component = getattr(clone.strategy, memory_class.strategy_class.llm_component)
        assert isinstance(component, LLMSummarizer | LLMDecider)
        assert (component.timeout, component.max_input_chars) == (12.5, 8_000)
        assert clone.llm_calls == memory.llm_calls  # the same calls, made again


def test_from_dict_without_the_components_names_them(memory_class, hashing_embedder):
    memory = build(memory_class, hashing_embedder)
    data = memory.to_dict()
    custom = components(memory_class, hashing_embedder)
    with pytest.raises(ConfigurationError) as error:
        memory_class.from_dict(data)
    message = str(error.value)
    assert message.startswith(f"{memory_class.__name__}.from_dict: ") and " again: " in message
    for name, value in custom.items():
        assert f"{name} ({type(value).__name__})" in message
        assert f"{name}=..." in message
    # one of them still missing: named alone
    first, *rest = custom
    if rest:
        with pytest.raises(ConfigurationError, match=rf"custom {first} \("):
            memory_class.from_dict(data, **{n: custom[n] for n in rest})


def test_none_takes_the_default_on_purpose(memory_class, hashing_embedder):
    memory = build(memory_class, hashing_embedder)
    custom = components(memory_class, hashing_embedder)
    given = {name: None for name in custom}
    given.update({n: v for n, v in custom.items() if n in ("embed_model", "embedder", "entity_extractor")})
    clone = memory_class.from_dict(memory.to_dict(), **given)  # the llm / decider deliberately default
    if "llm" in custom:
        assert not getattr(clone.strategy, memory_class.strategy_class.llm_component).uses_llm
        assert clone.to_dict()[CUSTOM_COMPONENTS_KEY].keys() == set(custom) - {"llm"}


def test_a_memory_with_the_defaults_restores_without_arguments(memory_class):
    memory = memory_class.from_defaults() if issubclass(memory_class, li.StrategyMemory) else memory_class()
    data = memory.to_dict()
    assert data[CUSTOM_COMPONENTS_KEY] == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clone = memory_class.from_dict(data)
    assert clone.to_dict() == data


def test_a_missing_token_counter_only_warns(memory_class, hashing_embedder):
    def words(text: str) -> int:
        return len(text.split())

    memory = build(memory_class, hashing_embedder, token_counter=words)
    data = memory.to_dict()
    assert data[CUSTOM_COMPONENTS_KEY]["token_counter"] == "function"
    again = components(memory_class, hashing_embedder)
    with pytest.warns(UserWarning, match="custom token_counter .*default tiktoken"):
        clone = memory_class.from_dict(data, **again)
    assert clone.to_dict()[CUSTOM_COMPONENTS_KEY].keys() == set(again)  # the default counter now
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = memory_class.from_dict(data, token_counter=words, **again)
    assert selection(same) == selection(memory)


# -- framework specifics --------------------------------------------------------------------------


def test_llamaindex_tokenizer_fn_and_store_are_components(hashing_embedder, tmp_path):
    def tokenizer(text: str) -> list[str]:
        return text.split()

    store = f"sqlite:///{tmp_path / 'state.db'}"
    memory = li.KadaneDialMemory.from_defaults(
        chat_history=conversation(), embed_model=hashing_embedder, tokenizer_fn=tokenizer, store=store
    )
    data = memory.to_dict()
    assert data[CUSTOM_COMPONENTS_KEY] == {
        "embed_model": "HashingEmbedder",
        "store": "str",
        "tokenizer_fn": "function",
    }
    with pytest.raises(ConfigurationError, match=r"custom embed_model \(HashingEmbedder\), store \(str\)"):
        li.KadaneDialMemory.from_dict(data, tokenizer_fn=tokenizer)
    with pytest.warns(UserWarning, match="custom tokenizer_fn"):
        clone = li.KadaneDialMemory.from_dict(data, embed_model=hashing_embedder, store=store)
    assert clone.get_all() == memory.get_all()
    # a tokenizer_fn derived from the token counter is not a custom one
    plain = li.KadaneDialMemory.from_defaults(embed_model=hashing_embedder)
    assert "tokenizer_fn" not in plain.to_dict()[CUSTOM_COMPONENTS_KEY]


def test_llamaindex_old_dicts_without_the_component_list_still_load(hashing_embedder):
    memory = li.SWinSummaryBuffer.from_defaults(chat_history=conversation(), llm=PromptRecordingLLM())
    data = memory.to_dict()
    del data[CUSTOM_COMPONENTS_KEY]  # saved before the list existed: nothing to check against
    clone = li.SWinSummaryBuffer.from_dict(data)
    assert clone.get_all() == memory.get_all()


class ListHistory(BaseChatMessageHistory):
    """A chat history of another kind (stands for Redis, SQL, ...): not serialisable by the memory."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []

    def add_messages(self, messages: Any) -> None:
        self.messages.extend(messages)

    def clear(self) -> None:
        self.messages = []


def test_langchain_history_is_kept_or_named(hashing_embedder):
    memory = lc.KadaneDialMemory(embedder=hashing_embedder)
    fill(memory)
    data = memory.to_dict()
    assert [m["data"]["content"] for m in data["messages"][:2]] == list(TURNS[0])
    clone = lc.KadaneDialMemory.from_dict(json.loads(json.dumps(data)), embedder=hashing_embedder)
    assert clone.chat_memory.messages == memory.chat_memory.messages

    history = ListHistory()
    elsewhere = lc.KadaneDialMemory(embedder=hashing_embedder, chat_memory=history)
    fill(elsewhere)
    saved = elsewhere.to_dict()
    assert "messages" not in saved and saved[CUSTOM_COMPONENTS_KEY]["chat_memory"] == "ListHistory"
    with pytest.raises(ConfigurationError, match=r"custom chat_memory \(ListHistory\)"):
        lc.KadaneDialMemory.from_dict(saved, embedder=hashing_embedder)
    again = lc.KadaneDialMemory.from_dict(saved, embedder=hashing_embedder, chat_memory=history)
    assert selection(again) == selection(elsewhere)


def test_llamaindex_from_string_checks_too(hashing_embedder):
    memory = li.TopicThreadMemory.from_defaults(embed_model=hashing_embedder)
    memory.put(ChatMessage(role="user", content="hello"))
    with pytest.raises(ConfigurationError, match="TopicThreadMemory.from_dict: .*embed_model"):
        li.TopicThreadMemory.from_string(memory.to_string())
