"""Token accounting of messages and turns, shared by every strategy."""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable

from ctxmgmt.components.tokens import MESSAGE_OVERHEAD, TokenCounter
from ctxmgmt.exceptions import ConfigurationError
from ctxmgmt.types import Message, Turn


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens of one message: its text, its tool calls, plus ``MESSAGE_OVERHEAD`` (4)."""
    n = counter.count(message.text) + MESSAGE_OVERHEAD
    if message.tool_calls:
        n += counter.count(json.dumps(list(message.tool_calls), sort_keys=True, default=str))
    return n


def messages_tokens(counter: TokenCounter, messages: Iterable[Message]) -> int:
    """Tokens of several messages."""
    return sum(message_tokens(counter, m) for m in messages)


def turn_tokens(counter: TokenCounter, turn: Turn) -> int:
    """Tokens of every message of a turn."""
    return messages_tokens(counter, turn.messages)


def check_budget(budget: int | None, *, name: str = "budget") -> int | None:
    """Validate a token budget: None (no limit) or a positive int."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget <= 0:
        raise ConfigurationError(f"{name} must be a positive number of tokens or None, got {budget!r}")
    return int(budget)
