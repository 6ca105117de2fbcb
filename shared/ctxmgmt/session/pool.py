"""Live conversations by the framework's own id: what one adapter object (a middleware, a memory) keeps.

A :class:`Pool` maps the framework's identity of a conversation (a LangGraph ``thread_id``, a
chat history's ``session_id``, a LlamaIndex ``chat_store_key`` or ``Memory`` ``session_id``) to
its live conversation, keeps at most ``max_conversations`` of them (least recently used
dropped first, closed, reloaded from the store when it returns) and composes each one's store
key (:meth:`Pool.key`). The object that many conversations share holds configuration and a
pool; each conversation's state lives in its own object and flows down, never back up.
:class:`ctxmgmt.session.conversation.ConversationPool` is the pool of
:class:`~ctxmgmt.session.conversation.Conversation` objects the adapters use.

Locking: the pool's lock only guards the mapping; each conversation has its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.components._coerce import check_int
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.session.codec import Codec
from ctxmgmt.session.worker import renew_after_fork
from ctxmgmt.store.base import StateStore, aclose_store
from ctxmgmt.store.keys import compose_key
from ctxmgmt.strategies.base import Strategy

T = TypeVar("T")

DEFAULT_MAX_SESSIONS = 1000
"""Live conversations a pool keeps in memory (the rest are reloaded from the store on demand)."""

DEFAULT_SESSION = "default"
"""Conversation id used when the framework gives none (e.g. an agent run without a ``thread_id``)."""


class Pooled(Protocol):
    """What a pool needs of a conversation."""

    @property
    def store(self) -> StateStore | None:
        """The store the conversation was created with."""
        ...

    @property
    def strategy(self) -> Strategy:
        """The conversation's own strategy."""
        ...

    def close(self) -> None:
        """Let the conversation go (no background work for it again)."""
        ...


C = TypeVar("C", bound=Pooled)


class Pool(Generic[C, T]):
    """Live conversations by the framework's id, at most ``max_conversations`` of them.

    The least recently used conversation is dropped first; it is loaded again from the store
    (or rebuilt from the history) when it returns. A subclass says how a conversation is
    opened (:meth:`open`).

    Args:
        factory: Builds a new, empty strategy (one per conversation).
        codec: How the adapter's messages map to the core.
        surface: Which kind of adapter the pool serves (``"middleware"``, ``"classic"``,
            ``"memory"``, ``"block"``, ...): part of every store key, so two surfaces that
            share a store and an id never share derived state.
        name: The adapter instance's name (a block's or a middleware's), part of every store
            key when given; None = none.
        store: Where derived state persists; None = in this process only (unless
            :meth:`get` is given one).
        owns_store: Whether the pool opened ``store`` itself (from a URL or DSN string), so
            :meth:`close` closes it; False: the caller's store stays open.
        max_conversations: Live conversations kept in memory; :data:`DEFAULT_MAX_SESSIONS` (1000).

    Raises:
        ConfigurationError: ``max_conversations`` is not a positive int.
    """

    owns_store = False
    closed = False
    """Whether :meth:`close` was called (class defaults: a pool pickled before these existed)."""

    def __init__(
        self,
        factory: Callable[[], Strategy],
        codec: Codec[T],
        *,
        surface: str,
        name: str | None = None,
        store: StateStore | None = None,
        owns_store: bool = False,
        max_conversations: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        check_int(max_conversations, "max_sessions")
        self.factory = factory
        self.codec = codec
        self.surface = surface
        self.name = name
        self.store = store
        self.owns_store = owns_store
        self.max_conversations = max_conversations
        self.closed = False
        self._conversations: OrderedDict[str, C] = OrderedDict()
        self._lock = threading.Lock()
        renew_after_fork(self)

    def open(self, key: str, strategy: Strategy, store: StateStore | None) -> C:
        """A new conversation under store key ``key`` with its own ``strategy``."""
        raise NotImplementedError

    def renew_locks(self) -> None:
        """A new lock for the mapping (in a forked child: the parent's may have been held)."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._conversations)

    def __getstate__(self) -> dict[str, Any]:
        """The pool's configuration and live conversations (each copied whole); no lock."""
        with self._lock:
            state = {k: v for k, v in self.__dict__.items() if k != "_lock"}
            state["_conversations"] = OrderedDict(self._conversations)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> Pool[C, T]:
        """A pool of copies of the live conversations; the store is shared, not copied."""
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(deep_copy(self.__getstate__(), memo, [self.store]))
        return clone

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._conversations

    def key(self, strategy: Strategy, conversation_id: str) -> str:
        """Store key of a conversation: ``strategy:surface[:name]:id``, each part escaped.

        :func:`~ctxmgmt.store.keys.compose_key`: one-to-one, and byte-identical to the plain
        join for parts without ``%`` or ``:``.
        """
        named = () if self.name is None else (self.name,)
        return compose_key(strategy.name, self.surface, *named, conversation_id)

    def get(self, conversation_id: str | None, *, store: StateStore | None = None) -> C:
        """The live conversation ``conversation_id`` (None = :data:`DEFAULT_SESSION`), created or reloaded.

        ``store`` is used when the pool has none of its own (a middleware without ``store=``
        takes the agent's store, passed per call).

        Raises:
            ConfigurationError: the pool is closed (:meth:`close`).
        """
        conversation_id = DEFAULT_SESSION if conversation_id is None else str(conversation_id)
        store = self.store if self.store is not None else store
        with self._lock:
            if self.closed:
                raise ConfigurationError("this memory is closed (close() was called): make a new one")
            conversation = self._conversations.get(conversation_id)
            if conversation is None or conversation.store is not store:
                if conversation is not None:
                    conversation.close()
                strategy = self.factory()
                conversation = self.open(self.key(strategy, conversation_id), strategy, store)
                self._conversations[conversation_id] = conversation
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)[1].close()
            else:
                self._conversations.move_to_end(conversation_id)
            return conversation

    def conversations(self) -> list[C]:
        """The live conversations, least recently used first."""
        with self._lock:
            return list(self._conversations.values())

    def drop(self, condition: Callable[[C], bool]) -> None:
        """Drop the live conversations that meet ``condition`` (their stored state stays)."""
        with self._lock:
            for conversation_id, conversation in list(self._conversations.items()):
                if condition(conversation):
                    del self._conversations[conversation_id]

    def most_recent(self) -> C | None:
        """The conversation used last (None before any)."""
        with self._lock:
            return next(reversed(self._conversations.values()), None)

    def discard(self, conversation_id: str | None) -> None:
        """Drop the live conversation and close it (its stored state stays)."""
        with self._lock:
            conversation = self._conversations.pop(
                DEFAULT_SESSION if conversation_id is None else str(conversation_id), None
            )
        if conversation is not None:
            conversation.close()

    def close(self) -> None:
        """Let every live conversation go, then close the store if the pool opened it. Idempotent.

        Stored state stays (a new pool on the same store reloads it); background work for these
        conversations stops. A deep copy shares the store, so closing either closes it for both.
        """
        store = self._release()
        if store is not None:
            store.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code: the store closed without blocking the event loop.

        A PostgreSQL store's async pool on the running loop is awaited
        (:func:`~ctxmgmt.store.base.aclose_store`).
        """
        store = self._release()
        if store is not None:
            await aclose_store(store)

    def _release(self) -> StateStore | None:
        """Let every live conversation go and mark the pool closed; the store to close, if any.

        The store only on the first call, and only when the pool opened it (``owns_store``).
        """
        with self._lock:
            live, self._conversations = list(self._conversations.values()), OrderedDict()
            was_closed, self.closed = self.closed, True
        for conversation in live:
            conversation.close()
        return self.store if self.owns_store and not was_closed else None

    @property
    def llm_calls(self) -> int:
        """LLM calls the live conversations' strategies made on their own behalf."""
        return sum(c.strategy.llm_calls for c in self.conversations())
