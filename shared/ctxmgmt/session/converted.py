"""A framework conversation in core form, converted and grouped once per message.

Adapters receive the whole history on every call (a LangGraph state, a chat store's list, a
``Memory`` block's flushed messages). :class:`ConvertedHistory` keeps the caller's message
objects of the previous call with their :class:`~ctxmgmt.messages.types.Message` form and their turns, and
on the next call converts and regroups only what changed: the work per call no longer grows
with the history's length beyond one identity check and one snapshot comparison per message.
Each :class:`ctxmgmt.session.conversation.Conversation` owns one.

Consistency: a message's conversion is reused when its snapshot equals the one taken when it
was converted (``snapshot``: every field the converter reads, in a cheap comparable form; each
adapter's codec defines it beside its converter), whether it is the same object or a new, equal
one (a checkpointer or a chat store that rebuilds its messages on every read); the view then
holds the new object. Without a snapshot, only the same object is reused. Replacing a message
(LangGraph's ``add_messages`` reducer, ``RemoveMessage``, a chat store's ``set``), inserting or
deleting one, or editing its text or parts, even in place (``message.content = ...``,
``message.blocks[0].text = "[redacted]"``), is seen and everything from the first difference
on is converted again; the conversation's stored state then compares chain hashes
(:meth:`ctxmgmt.session.stored_state.StoredState.sync`).
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ctxmgmt.messages.history import opens_turn
from ctxmgmt.messages.timestamps import stamp_missing
from ctxmgmt.messages.types import Message, Turn, chain_hashes
from ctxmgmt.session.query import infer_query, split_current

T = TypeVar("T")


@dataclass(frozen=True)
class Reading(Generic[T]):
    """One call's view of a conversation's history (:meth:`ConvertedHistory.read`).

    Attributes:
        system: Core form of the system messages (empty for flushed messages).
        past: The completed turns, oldest first.
        current: The turn in progress (None when none, or flushed).
        question: The query to select for ("" when there is no user message with text).
        chains: Chain hashes of ``past`` (:func:`~ctxmgmt.messages.types.chain_hashes`).
        system_originals: The caller's system messages.
        turn_originals: ``turn_originals[i]`` are the caller's messages of turn ``i``.
    """

    system: Sequence[Message]
    past: list[Turn]
    current: Turn | None
    question: str
    chains: list[str]
    system_originals: Sequence[T]
    turn_originals: Sequence[Sequence[T]]


def utc_today() -> dt.date:
    """The day a message without a time of its own was first seen (UTC).

    A day, not a moment: it is all that relative dates need ("yesterday"), and a summary item
    that shows it costs a few tokens, not a full timestamp's.
    """
    return dt.datetime.now(dt.UTC).date()


class ConvertedHistory(Generic[T]):
    """One conversation's messages (the caller's objects), their core form and their turns.

    Args:
        convert: Framework message -> :class:`~ctxmgmt.messages.types.Message` (raises
            ``InvalidMessageError`` for an unusable message).
        snapshot: A cheap, comparable snapshot of everything conversion reads from a message;
            a message is converted again when it differs from the last call. None: messages
            are compared by identity only (for histories whose messages are never edited in
            place, such as a memory block's own copies).
        clock: Stamps messages without a timestamp of their own with the time they were first
            converted (``Message.seen``, :func:`ctxmgmt.messages.timestamps.stamp_missing`), so relative
            dates in them are anchored; None stamps nothing.

    Not thread-safe on its own: the owning :class:`~ctxmgmt.session.conversation.Conversation` calls it
    under the conversation's lock.

    Attributes:
        originals: The caller's messages of the last :meth:`update`, in order.
        messages: Their core form (``messages[i]`` is ``originals[i]`` converted).
        system: Core form of the system messages; ``system_originals`` the caller's.
        turns: The non-system messages grouped into turns (``Turn`` objects reused from call
            to call, so their text and fingerprint are computed once).
        turn_originals: ``turn_originals[i]`` are the caller's messages of ``turns[i]``.
    """

    def __init__(
        self,
        convert: Callable[[T], Message],
        snapshot: Callable[[T], Any] | None,
        *,
        clock: Callable[[], dt.date] | None = None,
    ) -> None:
        self._convert = convert
        self._snapshot = snapshot
        self._clock = clock
        self.originals: list[T] = []
        self._contents: list[Any] = []
        self.messages: list[Message] = []
        self.system: list[Message] = []
        self.system_originals: list[T] = []
        self._system_at: list[int] = []
        self.turns: list[Turn] = []
        self.turn_originals: list[list[T]] = []
        self._turn_at: list[int] = []  # position in ``originals`` of each turn's first message
        self._slot: list[tuple[list[T], int]] = []  # where each message sits in turn/system_originals
        self._chains: list[str] = []  # chain hashes of the first turns (see :meth:`chains`)

    def update(self, originals: Sequence[T], *, check: bool = True) -> ConvertedHistory[T]:
        """Bring the view in line with ``originals`` (converting only what changed); returns self.

        ``check=False`` is for calls that only index new messages (LangChain's ``save_context``):
        when ``originals`` extends the last call's history (its last message is the same object
        at the same place) only the messages after it are converted, and the content check of
        the earlier ones, which reads every message, waits for the next checked call. Selections
        always check, so an edit made in between is still found before it can matter.

        Raises:
            InvalidMessageError: a new or changed message cannot be converted (the view is then
                left as it was before the call).
        """
        have = len(self.originals)
        extends = len(originals) >= have and (have == 0 or originals[have - 1] is self.originals[-1])
        keep = have if not check and extends else self._common_prefix(originals)
        if keep == len(originals) == len(self.originals):
            return self
        fresh = [self._convert(m) for m in originals[keep:]]  # may raise: nothing changed yet
        if self._clock is not None:  # first seen now, unless converted before with equal content
            fresh = stamp_missing(fresh, self._clock(), known=self.messages[keep:], in_place=True)
        self._truncate(keep)
        snapshot = self._snapshot
        for offset, (original, message) in enumerate(zip(originals[keep:], fresh, strict=True)):
            content = None if snapshot is None else snapshot(original)
            self._append(keep + offset, original, message, content)
        return self

    def chains(self, count: int) -> list[str]:
        """Chain hashes of the first ``count`` turns (:func:`~ctxmgmt.messages.types.chain_hashes`).

        Kept from call to call and dropped from the first turn that changes, so a call hashes
        only the turns that are new since the last one.
        """
        have = len(self._chains)
        if have < count:
            self._chains.extend(chain_hashes(self.turns[have:count], self._chains[-1] if have else ""))
        return self._chains[:count]

    def read(
        self, originals: Sequence[T], *, query: str | None = None, flushed: bool = False, check: bool = True
    ) -> Reading[T]:
        """:meth:`update` with ``originals``, then what a selection reads of them, in one call.

        ``flushed=True``: every turn is completed (a ``Memory`` block's flushed messages) and
        the system messages are left out; else the last turn may be in progress
        (:func:`~ctxmgmt.session.query.split_current`). The question is ``query`` when given,
        else the newest user message (:func:`~ctxmgmt.session.query.infer_query`).

        Raises:
            InvalidMessageError: a new or changed message cannot be converted.
        """
        self.update(originals, check=check)
        if flushed:
            system: Sequence[Message] = ()
            past, current = list(self.turns), None
        else:
            system = self.system
            past, current = split_current(self.turns)
        return Reading(
            system=system,
            past=past,
            current=current,
            question=infer_query(past, current, query),
            chains=self.chains(len(past)),
            system_originals=self.system_originals,
            turn_originals=self.turn_originals,
        )

    def clear(self) -> None:
        """Forget every message."""
        self._truncate(0)

    # -- internals ------------------------------------------------------------------------------
    def _common_prefix(self, originals: Sequence[T]) -> int:
        """How many leading messages are unchanged; an equal new object takes the old one's place."""
        old, contents, snapshot = self.originals, self._contents, self._snapshot
        n = min(len(old), len(originals))
        for i in range(n):
            new = originals[i]
            if new is old[i]:
                if snapshot is not None and snapshot(new) != contents[i]:
                    return i
            elif snapshot is None or snapshot(new) != contents[i]:
                return i
            else:  # rebuilt by the caller with the same content: keep its conversion
                old[i] = new
                holder, at = self._slot[i]
                holder[at] = new
        return n

    def _truncate(self, keep: int) -> None:
        """Drop every message from position ``keep`` on.

        The turn that the last kept message belongs to may lose messages, so it is grouped
        again from its first message; every earlier turn is kept as it is.
        """
        t = max(bisect.bisect_left(self._turn_at, keep) - 1, 0)
        regroup_from = min(self._turn_at[t], keep) if t < len(self._turn_at) else keep
        del self.turns[t:], self.turn_originals[t:], self._turn_at[t:], self._chains[t:]
        s = bisect.bisect_left(self._system_at, regroup_from)
        del self.system[s:], self.system_originals[s:], self._system_at[s:]
        kept = slice(regroup_from, keep)
        pending = list(zip(self.originals[kept], self.messages[kept], self._contents[kept], strict=True))
        del self.originals[regroup_from:], self._contents[regroup_from:], self.messages[regroup_from:]
        del self._slot[regroup_from:]
        for offset, (original, message, content) in enumerate(pending):
            self._append(regroup_from + offset, original, message, content)

    def _append(self, position: int, original: T, message: Message, content: Any) -> None:
        """Add ``original`` (converted: ``message``; snapshot: ``content``) at ``position``.

        A regrouped message keeps the snapshot taken when it was converted: after an unchecked
        update it may have been edited since, and the next check must still see that.
        """
        assert position == len(self.originals)
        self.originals.append(original)
        self._contents.append(content)
        self.messages.append(message)
        if message.role == "system":
            self.system.append(message)
            self._slot.append((self.system_originals, len(self.system_originals)))
            self.system_originals.append(original)
            self._system_at.append(position)
            return
        if opens_turn(self.turns[-1].messages[-1] if self.turns else None, message):
            self.turns.append(Turn(len(self.turns), (message,)))
            self.turn_originals.append([original])
            self._slot.append((self.turn_originals[-1], 0))
            self._turn_at.append(position)
            return
        last = self.turns[-1]
        self.turns[-1] = Turn(last.index, (*last.messages, message))
        del self._chains[last.index :]
        self._slot.append((self.turn_originals[-1], len(self.turn_originals[-1])))
        self.turn_originals[-1].append(original)
