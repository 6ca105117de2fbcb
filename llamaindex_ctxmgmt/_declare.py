"""How a LlamaIndex memory or block class is declared from its strategy and builds its conversations."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field

from ctxmgmt.adapter import AdapterField, add_fields, strategy_of
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.conversation import Codec, ConversationPool
from ctxmgmt.strategies.base import Strategy
from llamaindex_ctxmgmt._llm import complete_with
from llamaindex_ctxmgmt._store import as_state_store


def _pydantic_field(field: AdapterField) -> Any:
    return Field(default=field.default, description=field.doc, exclude=field.component)


def add_strategy_fields(cls: type, strategy: type[Strategy]) -> tuple[AdapterField, ...]:
    if "class_name" not in cls.__dict__:
        cls.class_name = classmethod(lambda klass: klass.__name__)  # type: ignore[attr-defined]
    return add_fields(cls, strategy, _pydantic_field, embedder_name="embed_model", framework="LlamaIndex")


def make_strategy(adapter: Any, counter: TokenCounter) -> Strategy:
    """The strategy a memory or block configured by its fields uses."""
    return strategy_of(
        adapter, complete_with, budget_name="token_limit", token_counter=counter, embedder_name="embed_model"
    )


def conversation_pool(
    adapter: Any, counter: TokenCounter, codec: Codec[ChatMessage], *, surface: str, name: str | None = None
) -> ConversationPool[ChatMessage]:
    """The conversations of a memory or block: strategies built from its fields, in its store."""
    return ConversationPool(
        lambda: make_strategy(adapter, counter),
        codec,
        surface=surface,
        name=name,
        store=None if adapter.store is None else as_state_store(adapter.store),
        max_conversations=adapter.max_sessions,
    )
