"""How a LlamaIndex memory or block class is declared from its strategy and builds its conversations."""

from __future__ import annotations

import functools
import threading
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.storage.chat_store import SimpleChatStore

from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.adapter.kit import AdapterField, add_fields, strategy_of
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.session.conversation import Codec, ConversationPool
from ctxmgmt.store import opens_store
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
        functools.partial(make_strategy, adapter, counter),
        codec,
        surface=surface,
        name=name,
        store=None if adapter.store is None else as_state_store(adapter.store),
        owns_store=opens_store(adapter.store),
        max_conversations=adapter.max_sessions,
    )


class Copies:
    """Mixin of the LlamaIndex memories and blocks: copies and pickles (:mod:`ctxmgmt.adapter.copying`).

    A copy (``copy.deepcopy``, ``model_copy(deep=True)``, ``pickle``) carries the fields, the
    history the object keeps (a ``SimpleChatStore``, a block's flushed messages) and its live
    conversations with their derived state, so it selects what the original would without
    deriving anything again; what either adds later is its own. It gets its own lock. A deep
    copy shares the components (models, LLMs, counters), ``store`` and a database chat store
    (give the copy another ``chat_store_key`` / ``Memory`` session for a conversation of its
    own there); a pickle carries them by value.
    """

    def _fresh_private(self) -> dict[str, Any]:
        """Private attributes a copy makes anew instead of copying (locks, ...)."""
        return {"_lock": threading.RLock()}

    def _shared(self) -> list[Any]:
        """What a deep copy shares instead of copying: components, counters, stores."""
        components = [getattr(self, f.name) for f in self.adapter_fields if f.component]  # type: ignore[attr-defined]
        pool = self.__pydantic_private__.get("_pool")  # type: ignore[attr-defined]
        chat_store = getattr(self, "chat_store", None)
        return [
            *components,
            *(getattr(self, name, None) for name in ("token_counter", "tokenizer_fn", "store", "progress")),
            self.__pydantic_private__.get("_counter"),  # type: ignore[attr-defined]
            None if pool is None else pool.store,
            None if isinstance(chat_store, SimpleChatStore) else chat_store,  # copied, else a database
        ]

    def __getstate__(self) -> dict[str, Any]:
        """Fields and private state (conversations included), without process resources."""
        state = BaseModel.__getstate__(self)  # type: ignore[arg-type]
        fresh = self._fresh_private()
        private = {k: v for k, v in (state.get("__pydantic_private__") or {}).items() if k not in fresh}
        return {**state, "__pydantic_private__": private}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore fields and private state; new process resources (not ``__init__`` again)."""
        BaseModel.__setstate__(self, state)  # type: ignore[arg-type]
        self.__pydantic_private__.update(self._fresh_private())  # type: ignore[attr-defined]

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        """``copy.deepcopy`` / ``model_copy(deep=True)``: as :meth:`__getstate__`, components shared."""
        memo = {} if memo is None else memo
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(deep_copy(self.__getstate__(), memo, self._shared()))
        return clone
