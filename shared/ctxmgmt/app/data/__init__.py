"""The shipped demo conversation and its questions with gold evidence.

The conversation is original text written for ctxmgmt: several weeks of one user talking to an
assistant about interleaved topics (a trip to Lisbon, a memory leak in a Python service, a job
offer, a dog's vet visits, a sourdough starter, a household budget), in dated sessions. Each
question names the turns (0-based, counted across sessions) that hold its answer.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn

DEMO_FILE = "demo_conversation.json"

__all__ = ["DEMO_FILE", "DemoConversation", "DemoQuestion", "load_demo"]


@dataclass(frozen=True)
class DemoQuestion:
    """A question about the demo conversation with its gold answer and evidence.

    Attributes:
        question: The question, asked after the whole conversation.
        answer: A short gold answer; it occurs verbatim in the evidence turns.
        evidence: Indices of the turns (0-based, across sessions) that hold the answer.
        kind: ``"single-hop"``, ``"multi-hop"``, ``"temporal"`` or ``"follow-up"``.
    """

    question: str
    answer: str
    evidence: tuple[int, ...]
    kind: str


@dataclass(frozen=True)
class DemoConversation:
    """The demo conversation as ctxmgmt messages, plus its questions.

    Attributes:
        title: One line describing the conversation.
        messages: User and assistant messages in order; each message's ``timestamp`` is the
            date of its session and ``metadata["session"]`` the session's position.
        questions: The questions with gold answers and evidence turns.
        session_dates: The date of each session, in order.
        session_starts: Index of the first turn of each session.

    Example:
        >>> demo = load_demo()
        >>> len(demo.turns) > 100
        True
    """

    title: str
    messages: list[Message]
    questions: list[DemoQuestion]
    session_dates: list[str]
    session_starts: list[int]

    @property
    def turns(self) -> list[Turn]:
        """The messages grouped into turns (one user message and its reply each)."""
        return group_turns(self.messages)

    def session_of(self, turn_index: int) -> int:
        """Position of the session that contains turn ``turn_index``.

        Raises:
            IndexError: ``turn_index`` is negative or past the last turn.
        """
        if turn_index < 0 or turn_index >= len(self.messages) // 2:
            raise IndexError(f"turn {turn_index} is not in the demo conversation")
        return bisect.bisect_right(self.session_starts, turn_index) - 1

    def date_of(self, turn_index: int) -> str:
        """Date of the session that contains turn ``turn_index``."""
        return self.session_dates[self.session_of(turn_index)]


def _parse(data: dict[str, Any]) -> DemoConversation:
    messages: list[Message] = []
    dates: list[str] = []
    starts: list[int] = []
    turn = 0
    for k, session in enumerate(data["sessions"]):
        date = str(session["date"])
        dates.append(date)
        starts.append(turn)
        for pair in session["turns"]:
            messages.append(Message("user", pair["user"], timestamp=date, metadata={"session": k}))
            messages.append(Message("assistant", pair["assistant"], timestamp=date, metadata={"session": k}))
            turn += 1
    questions = [
        DemoQuestion(
            question=q["question"],
            answer=q["answer"],
            evidence=tuple(int(i) for i in q["evidence"]),
            kind=q["kind"],
        )
        for q in data["questions"]
    ]
    return DemoConversation(
        title=data["title"],
        messages=messages,
        questions=questions,
        session_dates=dates,
        session_starts=starts,
    )


def load_demo() -> DemoConversation:
    """Load the shipped demo conversation (works from a source tree and an installed wheel).

    Returns:
        A fresh :class:`DemoConversation`: about 130 turns in six dated sessions, with
        questions whose gold evidence turns are known.

    Example:
        >>> demo = load_demo()
        >>> demo.messages[0].role
        'user'
    """
    text = resources.files(__name__).joinpath(DEMO_FILE).read_text(encoding="utf-8")
    return _parse(json.loads(text))
