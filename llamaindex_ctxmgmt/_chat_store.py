"""The lossless history of the chat memories: every message in the chat store, exactly as put."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

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
    try:
        data = chat_store.model_dump()
    except Exception:
        if not isinstance(chat_store, SimpleChatStore):
            raise
        data = {"store": {k: [m.model_dump() for m in ms] for k, ms in chat_store.store.items()}}
    data["class_name"] = chat_store.class_name()
    return data


def load_chat_store_of(data: dict[str, Any], *, default_key: str) -> dict[str, Any]:
    """``data`` (a memory's ``to_dict()``) with its chat store loaded.

    As in ``ChatMemoryBuffer.from_dict``, an old-style ``"chat_history"`` list becomes a
    ``SimpleChatStore`` under ``chat_store_key``; a dumped chat store is loaded by its class name.
    """
    from llama_index.core.storage.chat_store.loading import load_chat_store

    data = dict(data)
    if "chat_history" in data:
        history = [ChatMessage.model_validate(m) for m in data.pop("chat_history") or ()]
        data["chat_store"] = SimpleChatStore(store={data.get("chat_store_key", default_key): history})
    elif isinstance(data.get("chat_store"), dict):
        data["chat_store"] = load_chat_store(data["chat_store"])
    return data
