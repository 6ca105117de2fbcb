"""The lossless history of the chat memories: every message in the chat store, exactly as put."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import weakref
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import StoreError
from llamaindex_ctxmgmt._convert import to_message, to_messages


class ChatStoreHistory:
    """``BaseMemory``'s history methods over ``chat_store`` / ``chat_store_key``, each message validated.

    A mixin of :class:`llamaindex_ctxmgmt.StrategyMemory`, which provides ``chat_store``,
    ``chat_store_key`` and ``_forget()`` (drops the conversation's derived state).
    """

    chat_store: Any
    chat_store_key: str

    def _forget(self) -> None:
        raise NotImplementedError

    def get_all(self) -> list[ChatMessage]:
        """Every message, exactly as put."""
        return list(self.chat_store.get_messages(self.chat_store_key))

    async def aget_all(self) -> list[ChatMessage]:
        """Async :meth:`get_all`."""
        return list(await self.chat_store.aget_messages(self.chat_store_key))

    def put(self, message: ChatMessage) -> None:
        """Append one message (validated first, so a bad message never reaches the store)."""
        to_message(message)
        self.chat_store.add_message(self.chat_store_key, message)

    async def aput(self, message: ChatMessage) -> None:
        """Async :meth:`put`."""
        to_message(message)
        await self.chat_store.async_add_message(self.chat_store_key, message)

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Append messages in order; none is stored if any is invalid."""
        to_messages(messages)
        for message in messages:
            self.chat_store.add_message(self.chat_store_key, message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`put_messages`."""
        to_messages(messages)
        for message in messages:
            await self.chat_store.async_add_message(self.chat_store_key, message)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history (validated first)."""
        to_messages(messages)
        self.chat_store.set_messages(self.chat_store_key, list(messages))
        self._forget()

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`set`."""
        to_messages(messages)
        await self.chat_store.aset_messages(self.chat_store_key, list(messages))
        self._forget()

    def reset(self) -> None:
        """Delete the history and the strategy's derived state."""
        self.chat_store.delete_messages(self.chat_store_key)
        self._forget()

    async def areset(self) -> None:
        """Async :meth:`reset`."""
        await self.chat_store.adelete_messages(self.chat_store_key)
        self._forget()


def dump_chat_store(chat_store: BaseChatStore) -> dict[str, Any]:
    """A chat store as the dict ``to_dict()`` holds.

    ``SimpleChatStore``'s own serializer fails under pydantic >= 2.14 (its wrap serializer passes
    ``info`` as ``index_key``); its messages are then dumped one by one instead.
    """
    if isinstance(chat_store, DBChatStoreBridge):  # an engine, not data: passed again to from_dict
        return {"class_name": chat_store.class_name()}
    try:
        data = chat_store.model_dump()
    except Exception:
        if not isinstance(chat_store, SimpleChatStore):
            raise
        data = {"store": {k: [m.model_dump() for m in ms] for k, ms in chat_store.store.items()}}
    data["class_name"] = chat_store.class_name()
    return data


def load_chat_store_of(data: dict[str, Any], *, default_key: str, given: bool = False) -> dict[str, Any]:
    """``data`` (a memory's ``to_dict()``) with its chat store loaded.

    As in ``ChatMemoryBuffer.from_dict``, an old-style ``"chat_history"`` list becomes a
    ``SimpleChatStore`` under ``chat_store_key``; a dumped ``SimpleChatStore`` (plain messages)
    is loaded. Any other dumped chat store (a database, a server) is refused unless the caller
    passes ``chat_store`` itself (``given``): saved data never says where a history is kept.

    Raises:
        ConfigurationError: the data names another kind of chat store and none is given.
    """
    from llama_index.core.storage.chat_store.loading import load_chat_store

    data = dict(data)
    dumped = data.get("chat_store")
    if isinstance(dumped, dict) and dumped.get("class_name") != SimpleChatStore.class_name():
        if dumped.get("class_name") != DBChatStoreBridge.class_name() and not given:
            raise ConfigurationError(
                f"saved data names a {dumped.get('class_name')!r} chat store; from_dict loads only a "
                "SimpleChatStore's messages: pass chat_store= as an argument"
            )
        data.pop("chat_store")
    if "chat_history" in data:
        history = [ChatMessage.model_validate(m) for m in data.pop("chat_history") or ()]
        data["chat_store"] = SimpleChatStore(store={data.get("chat_store_key", default_key): history})
    elif isinstance(data.get("chat_store"), dict):
        data["chat_store"] = load_chat_store(data["chat_store"])
    return data


CHAT_STORE_TIMEOUT = 30.0
"""Seconds a bridged chat-store call may take before it is cancelled with :class:`ChatStoreTimeoutError`
(SQLAlchemy's default wait for a pooled connection, ``pool_timeout``, is the same 30 s): the
history is the one thing a memory cannot work without, so a database that does not answer is an
error, never a hang."""


class ChatStoreTimeoutError(StoreError):
    """A bridged chat store (``SQLAlchemyChatStore``) did not answer within :data:`CHAT_STORE_TIMEOUT`."""


class DBChatStoreBridge(BaseChatStore):
    """A ``BaseChatStore`` over an ``AsyncDBChatStore`` (``SQLAlchemyChatStore``, the store ``Memory`` uses).

    ``AsyncDBChatStore`` has async methods only and is not a ``BaseChatStore``; the chat memories
    take it through this bridge (:func:`as_chat_store` wraps it). Every call, sync or async,
    runs on one event loop of its own in a daemon thread, so the store's async engine always
    sees the same loop; the memory's messages are the store's active messages under the key.

    Fork-safe: a forked child (gunicorn, multiprocessing) starts its own loop thread on first
    use, and an engine the parent used is disposed in the child without closing the parent's
    connections (``AsyncEngine.dispose(close=False)``, SQLAlchemy's recipe for pools across a
    fork), so its first call opens connections of its own. Each call waits at most
    :data:`CHAT_STORE_TIMEOUT` (:class:`ChatStoreTimeoutError`).
    """

    db: Any

    def __init__(self, db: AsyncDBChatStore) -> None:
        super().__init__(db=db)  # type: ignore[call-arg]  # a pydantic field of this class

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "DBChatStoreBridge"

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The bridge's loop, the store's engine made usable in this process first."""
        loop = _db_loop()
        engine = getattr(self.db, "_async_engine", None)
        if engine is not None:
            try:
                inherited = engine in _INHERITED
                _BRIDGED.add(engine)
            except TypeError:  # not weak-referenceable: nothing to track
                return loop
            if inherited:
                _INHERITED.discard(engine)
                future = asyncio.run_coroutine_threadsafe(engine.dispose(close=False), loop)
                _wait(future, "dispose the engine inherited from the parent process")
        return loop

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy opens the same database (its fields: URI, table, schema) with an engine of its own.

        A deep copy of a memory shares the bridge instead (:mod:`ctxmgmt.adapter.copying`). Never
        ``BaseComponent.__getstate__``: it deletes the fields it cannot pickle from the original.
        """
        fields = {name: getattr(self.db, name) for name in getattr(type(self.db), "model_fields", {})}
        return (_reopened, (type(self.db), fields))

    def _run(self, coroutine: Any) -> Any:
        loop = self._loop()
        return _wait(
            asyncio.run_coroutine_threadsafe(coroutine, loop), getattr(coroutine, "__name__", "call")
        )

    async def _arun(self, coroutine: Any) -> Any:
        loop = self._loop()  # blocks only to dispose an inherited engine, once, on the bridge's loop
        future = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))
        try:
            return await asyncio.wait_for(future, CHAT_STORE_TIMEOUT)
        except TimeoutError:
            raise _timeout(getattr(coroutine, "__name__", "call")) from None

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the messages of ``key``."""
        self._run(self.db.set_messages(key, messages))

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Async :meth:`set_messages`."""
        await self._arun(self.db.set_messages(key, messages))

    def get_messages(self, key: str) -> list[ChatMessage]:
        """The messages of ``key``, oldest first."""
        return list(self._run(self.db.get_messages(key)))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """Async :meth:`get_messages`."""
        return list(await self._arun(self.db.get_messages(key)))

    def add_message(self, key: str, message: ChatMessage) -> None:
        """Append one message to ``key``."""
        self._run(self.db.add_message(key, message))

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        """Async :meth:`add_message`."""
        await self._arun(self.db.add_message(key, message))

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Delete every message of ``key``."""
        self._run(self.db.delete_messages(key))
        return None

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Async :meth:`delete_messages`."""
        await self._arun(self.db.delete_messages(key))
        return None

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete the message at position ``idx`` of ``key``."""
        messages = self.get_messages(key)
        if not 0 <= idx < len(messages):
            return None
        self.set_messages(key, messages[:idx] + messages[idx + 1 :])
        return messages[idx]

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Delete the newest message of ``key``."""
        messages = self.get_messages(key)
        return self.delete_message(key, len(messages) - 1) if messages else None

    def get_keys(self) -> list[str]:
        """Every key that holds messages."""
        return list(self._run(self.db.get_keys()))


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()
_BRIDGED: weakref.WeakSet[Any] = weakref.WeakSet()
"""The async engines bridged in this process."""
_INHERITED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Engines bridged in the parent process, not yet disposed in this (forked) one."""


def _after_fork_in_child() -> None:
    """The parent's loop thread does not exist in a forked child, nor do its engines' connections."""
    global _LOOP, _LOOP_LOCK
    _LOOP, _LOOP_LOCK = None, threading.Lock()  # the parent's loop object is dropped, never closed here
    for engine in list(_BRIDGED):
        _INHERITED.add(engine)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _timeout(what: str) -> ChatStoreTimeoutError:
    return ChatStoreTimeoutError(f"the chat store did not answer ({what}) within {CHAT_STORE_TIMEOUT:g} s")


def _wait(future: concurrent.futures.Future[Any], what: str) -> Any:
    """``future``'s result within :data:`CHAT_STORE_TIMEOUT` (cancelled after it)."""
    try:
        return future.result(timeout=CHAT_STORE_TIMEOUT)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise _timeout(what) from None


def _db_loop() -> asyncio.AbstractEventLoop:
    """The event loop (in a daemon thread) every :class:`DBChatStoreBridge` call runs on."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="ctxmgmt-chat-store", daemon=True).start()
        return _LOOP


def as_chat_store(value: Any) -> Any:
    """``value`` as a ``BaseChatStore`` for a chat memory (None stays None).

    A ``BaseChatStore`` (``SimpleChatStore``, ``RedisChatStore``, ...) is used as it is; an
    ``AsyncDBChatStore`` (``SQLAlchemyChatStore``) is bridged (:class:`DBChatStoreBridge`).

    Raises:
        ConfigurationError: ``value`` is neither.
    """
    if value is None or isinstance(value, BaseChatStore):
        return value
    if isinstance(value, AsyncDBChatStore):
        return DBChatStoreBridge(value)
    raise ConfigurationError(
        f"chat_store must be a LlamaIndex BaseChatStore (SimpleChatStore, RedisChatStore, ...) or an "
        f"AsyncDBChatStore (SQLAlchemyChatStore, as Memory uses), got {type(value).__name__}"
    )


def _reopened(db_class: type, fields: dict[str, Any]) -> DBChatStoreBridge:
    """A bridge over a new ``db_class(**fields)`` (how a pickled bridge is restored)."""
    return DBChatStoreBridge(db_class(**fields))
