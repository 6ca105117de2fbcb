"""A conversation's messages (:class:`History`) and how they group into turns (:func:`group_turns`).

A turn starts at every user message. An assistant message that opens a new session (its time is
at least :data:`SESSION_GAP` from the final answer before it) starts one too, so a session the
assistant opens is not read as the end of the previous session's answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

from ctxmgmt.messages.exceptions import InvalidMessageError
from ctxmgmt.messages.timestamps import parse_timestamp
from ctxmgmt.messages.types import Message, Turn

SESSION_GAP = dt.timedelta(minutes=30)
"""How far apart in time (either way) an assistant message and the final answer before it are
when the assistant message opens a turn of its own: a new session that the assistant opens.
LongMemEval dev has 219 such sessions, 203 of them 30 minutes or more from the one before.
Messages closer in time, or without timestamps, continue the turn (an answer sent in parts)."""


def opens_turn(previous: Message | None, message: Message) -> bool:
    """Whether ``message`` starts a new turn after ``previous`` (the newest turn message; None: none).

    Every user message does, and so does the first message. An assistant message does when it
    follows a final answer and both have timestamps at least :data:`SESSION_GAP` apart.
    """
    if previous is None or message.role == "user":
        return True
    if message.role != "assistant" or not previous.is_final_answer:
        return False
    return _apart(previous.timestamp, message.timestamp)


def _apart(first: str | None, second: str | None) -> bool:
    """True when both timestamps are readable, comparable and at least :data:`SESSION_GAP` apart."""
    if not first or not second or first == second:
        return False
    a, b = parse_timestamp(first), parse_timestamp(second)
    if a is None or b is None or (a.tzinfo is None) != (b.tzinfo is None):
        return False
    return abs(b - a) >= SESSION_GAP


def group_turns(messages: Iterable[Message]) -> list[Turn]:
    """Group messages into turns: a new turn starts where :func:`opens_turn` says.

    That is at every user message, and at an assistant message that opens a new session
    (:data:`SESSION_GAP`). System messages are not part of any turn; callers keep them aside
    (see :func:`~ctxmgmt.messages.types.split_system`). Messages before the first user message
    form turn 0 (or one turn per such session).
    """
    turns: list[list[Message]] = []
    for message in messages:
        if message.role == "system":
            continue
        if opens_turn(turns[-1][-1] if turns else None, message):
            turns.append([message])
        else:
            turns[-1].append(message)
    return [Turn(i, tuple(ms)) for i, ms in enumerate(turns)]


class History:
    """Append-only, lossless record of one conversation's messages.

    Selection never modifies it: strategies only decide what is *shown*.

    Example:
        >>> h = History()
        >>> h.append(Message("user", "hi"))
        >>> len(h)
        1
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = []
        self.extend(messages)

    def append(self, message: Message) -> None:
        """Add one message at the end."""
        if not isinstance(message, Message):
            raise InvalidMessageError(f"expected a Message, got {type(message).__name__}")
        self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        """Add messages at the end, in order."""
        for message in messages:
            self.append(message)

    @property
    def messages(self) -> tuple[Message, ...]:
        """All messages, exactly as appended."""
        return tuple(self._messages)

    def turns(self) -> list[Turn]:
        """The conversation grouped into turns (system messages left out)."""
        return group_turns(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(tuple(self._messages))

    def to_state(self) -> list[dict[str, Any]]:
        """JSON-serialisable form."""
        return [m.to_dict() for m in self._messages]

    @classmethod
    def from_state(cls, state: list[dict[str, Any]]) -> History:
        """Inverse of :meth:`to_state`."""
        return cls(Message.from_dict(d) for d in state)
