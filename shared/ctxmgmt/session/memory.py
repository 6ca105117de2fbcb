"""A conversation memory without a framework: a lossless history plus a strategy."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ctxmgmt.components.budget import check_budget, message_tokens
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.history import History, group_turns
from ctxmgmt.messages.types import Message
from ctxmgmt.session.selection import build_context
from ctxmgmt.strategies.base import Strategy


class ConversationMemory:
    """A lossless :class:`History` plus a strategy: the core of every memory class.

    Thread-safe for one conversation. For using ctxmgmt without a framework: the adapters keep
    the history where their framework does (a chat store, agent state) and select through
    :class:`ctxmgmt.session.conversation.Conversation`.

    Args:
        strategy: The selection strategy.
        budget: Default token budget per context (None = no limit).

    Example:
        >>> from ctxmgmt import KadaneDialStrategy
        >>> memory = ConversationMemory(KadaneDialStrategy())  # doctest: +SKIP
        >>> memory.add_messages([Message("user", "hi"), Message("assistant", "hello")])  # doctest: +SKIP
        >>> memory.select("hi").messages()  # doctest: +SKIP
    """

    def __init__(self, strategy: Strategy, *, budget: int | None = None) -> None:
        self.strategy = strategy
        self.budget = check_budget(budget)
        self.history = History()
        self._lock = threading.RLock()
        self._open: list[Message] = []

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append messages to the history; every turn they close is added to the strategy.

        A turn is closed once the next user message arrives, so the work per call depends
        only on the new messages, not on the length of the history.
        """
        with self._lock:
            new = list(messages)
            self.history.extend(new)
            self._open.extend(m for m in new if m.role != "system")
            turns = group_turns(self._open)
            if len(turns) > 1:
                self.strategy.add_many(turns[:-1])
                self._open = list(turns[-1].messages)

    def select(self, query: str | None = None, *, budget: int | None = None) -> Context:
        """Context for ``query`` (default: the newest user message) within ``budget`` tokens."""
        with self._lock:
            return build_context(
                self.strategy,
                self.history.messages,
                query=query,
                budget=self.budget if budget is None else budget,
            )

    def clear(self) -> None:
        """Forget the conversation."""
        with self._lock:
            self.history = History()
            self._open = []
            self.strategy.reset()

    def message_tokens(self, message: Message) -> int:
        """Tokens of one message with this memory's counter."""
        return message_tokens(self.strategy.token_counter, message)

    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: the raw history (derived state is rebuilt on load)."""
        return {"history": self.history.to_state(), "budget": self.budget}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output."""
        with self._lock:
            self.clear()
            self.budget = check_budget(state.get("budget"))
            self.add_messages(History.from_state(state["history"]))
