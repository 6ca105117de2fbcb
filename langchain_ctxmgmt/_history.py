"""The default ``chat_memory`` of the classic memories: an in-process list of messages."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage


class ListChatMessageHistory(BaseChatMessageHistory):
    """In-process chat history: a plain list (the default ``chat_memory``).

    Behaves like ``langchain_core``'s ``InMemoryChatMessageHistory`` (deprecated since
    langchain-core 1.6.4) without its warning; pass any other ``BaseChatMessageHistory``
    (Redis, SQL, ...) to a memory's ``chat_memory`` to persist the history.
    """

    def __init__(self, messages: Sequence[BaseMessage] = ()) -> None:
        super().__init__()
        self.messages: list[BaseMessage] = list(messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages, as they are."""
        self.messages.extend(messages)

    async def aget_messages(self) -> list[BaseMessage]:
        """The messages (no I/O, so no executor)."""
        return self.messages

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages` (no I/O, so no executor)."""
        self.add_messages(messages)

    def clear(self) -> None:
        """Remove every message."""
        self.messages = []

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        self.clear()
