"""Core data types: :class:`Message`, :class:`Turn` and :class:`History`.

All three are plain data. A *turn* is one user message and everything after it until the
next user message (assistant replies, tool calls, tool results); it is the atomic unit of
selection, so a tool call never leaves the context without its result.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ctxmgmt.messages.exceptions import InvalidMessageError
from ctxmgmt.messages.framing import DEFAULT_MEMORY_ROLE, frame_memory, one_entry, speaker_label
from ctxmgmt.messages.text_bounds import cap_text
from ctxmgmt.messages.tool_args import CUT_KEY, SIZE_KEY, bound_call

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
MEDIA_KINDS: tuple[str, ...] = ("image", "audio", "video", "file")
"""Kinds of non-text content a message may carry (``file``: documents such as PDFs)."""

REPLACEMENT_CHARACTER = "\ufffd"
"""What :func:`clean_text` puts in place of a code point UTF-8 cannot encode (U+FFFD)."""


def clean_text(text: str) -> str:
    r"""``text`` with every code point UTF-8 cannot encode repaired; the one text-hygiene rule.

    A Python string can hold lone surrogates (U+D800-U+DFFF, e.g. from a JSON ``"\ud83d"``
    escape or an emoji cut in half by UTF-16 slicing), which no UTF-8 encoder, tokenizer or
    database accepts. A high surrogate directly followed by a low one becomes the character the
    pair encodes (``"\ud83d\ude00"`` -> U+1F600); every other surrogate becomes
    :data:`REPLACEMENT_CHARACTER`, one for one. Nothing else changes: control characters, NUL
    and noncharacters are valid UTF-8 and are kept, so a text UTF-8 can encode comes back
    unchanged (the same object) and keeps its fingerprint.

    Example:
        >>> clean_text("my cat \ud83d is ill") == "my cat \ufffd is ill"
        True
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


MAX_BLOCK_CHARS = 4_000
"""Most characters of an unknown content block's JSON carried as message text (head and tail
kept, :func:`ctxmgmt.messages.text_bounds.cap_text`): a search result's title and first
paragraphs, not a whole document, so one tool result cannot crowd out the turns around it."""


def block_text(block: Any) -> str:
    """An unknown content block as text: its JSON, within :data:`MAX_BLOCK_CHARS` characters.

    Adapters carry blocks they cannot classify (a tool's ``json`` or ``search_result`` block,
    a provider's new block type, a bare number) as this text instead of rejecting the message,
    so an unfamiliar block never stops a conversation. The original block still travels in the
    original message; only scoring and summaries read this text. Pydantic models are dumped
    first; anything JSON cannot write becomes its ``str``; a structure too deep to write becomes
    ``[<type> block]``.

    Example:
        >>> block_text({"type": "json", "json": {"temperature": 24}})
        '{"type": "json", "json": {"temperature": 24}}'
    """
    if hasattr(block, "model_dump") and callable(block.model_dump):
        try:
            block = block.model_dump()
        except Exception:  # a model that cannot dump itself is written as its str
            block = str(block)
    try:
        text = json.dumps(block, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        kind = (block.get("type") if isinstance(block, dict) else None) or type(block).__name__
        text = f"[{kind} block]"
    return cap_text(clean_text(text), MAX_BLOCK_CHARS)


def _clean_value(value: Any) -> Any:
    """``value`` with :func:`clean_text` applied to every string in it (dict keys included).

    Containers (dicts, lists, tuples) are copied only when a string in them changes, so the
    caller's objects are never modified.
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        if not value:
            return value
        items = [(_clean_value(k), _clean_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if type(value) in (list, tuple):
        if not value:
            return value
        cleaned = [_clean_value(v) for v in value]
        if all(c is v for c, v in zip(cleaned, value, strict=True)):
            return value
        return type(value)(cleaned)
    return value


def _call_args(call: dict[str, Any]) -> str:
    """A call's arguments as :meth:`Message.render` shows them (a cut call: its JSON head and size)."""
    if SIZE_KEY in call:
        return f"{call['args'].get(CUT_KEY, '')} [{call[SIZE_KEY]:,} characters]"
    return str(call.get("args", ""))


SEEN_MARK = "seen "
"""Marks a first-seen stamp in :attr:`Turn.dated_text` (``[seen 2026-11-25] user: ...``): a
summariser anchors relative dates with it but, unlike a message's own timestamp, does not copy
it into what it writes."""

EMPTY_MESSAGE_TEXT = "[empty message]"
"""Core text of a message that arrived empty in a history the caller already holds.

Adapters refuse new empty messages (``put``, ``save_context``), but one already in an agent's
state or a chat store is converted with this text, so its turn stays whole and every later call
still works; the caller's own (empty) message is what is sent."""


@dataclass(frozen=True)
class Message:
    """One chat message, framework-free.

    Args:
        role: ``"user"``, ``"assistant"``, ``"system"`` or ``"tool"``.
        text: The text content (the message's text parts joined). May be empty only for an
            assistant message that carries tool calls, a tool result, or a message that carries
            media.
        name: Optional speaker name (e.g. ``"Caroline"``); shown in turn text.
        tool_calls: Tool calls an assistant message makes, as plain dicts with at least ``id``.
            Arguments deeper than 20 levels or longer than 24,000 characters of JSON are kept
            as the head of their JSON text and their size (:func:`ctxmgmt.messages.tool_args.bound_call`):
            only the memory's copy, which it scores and counts; the caller's message is sent.
        tool_call_id: For a tool message, the id of the call it answers.
        timestamp: Optional free-form time (ISO string or a session date such as
            ``"1:56 pm on 8 May, 2023"``); shown in turn text and part of the turn's
            fingerprint (it is the message's content: editing it rebuilds derived state).
            :func:`ctxmgmt.messages.timestamps.timestamp_text` reads the values users give.
        metadata: Free JSON-serialisable data, carried through untouched (but for text hygiene).
        media: One kind per non-text content block the original message carries, in order
            (``"image"``, ``"audio"``, ``"video"`` or ``"file"``). Only the kinds are kept, never
            the bytes or URLs: adapters send the caller's original message, which still holds
            the blocks. Token counts add a per-block estimate (:mod:`ctxmgmt.components.budget`); scoring
            uses the text, plus one ``[image]``-style marker per block in :meth:`render`. A
            message with media and no text is scored through its turn's other messages.
        seen: When the memory first saw a message that has no ``timestamp`` of its own (ISO
            8601, set by :func:`ctxmgmt.messages.timestamps.stamp_missing`). Shown to summarisers in
            place of the timestamp (:attr:`Turn.dated_text`), so relative dates are anchored to
            it, but *not* scored and *not* part of the turn's fingerprint nor of message
            equality: a restart that reads the raw history (where no such stamp is kept) finds
            the same turns and rebuilds nothing.

    Every string the message holds (text, name, timestamp, tool-call id, the strings inside
    tool calls and metadata) passes through :func:`clean_text` when the message is built, so
    nothing downstream (fingerprints, tokenizers, embedders, stores) can fail to encode it.
    Messages are the core's copies: the framework objects they come from are never modified.

    Example:
        >>> Message("user", "Where did we land on the budget?").role
        'user'
    """

    role: str
    text: str
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    timestamp: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    media: tuple[str, ...] = ()
    seen: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidMessageError(f"unknown role {self.role!r}; expected one of {ROLES}")
        if self.text is None or not isinstance(self.text, str):
            raise InvalidMessageError(
                f"{self.role} message content must be a string, got {type(self.text).__name__}"
            )
        if self.tool_calls:  # bounded before anything walks them (:mod:`ctxmgmt.messages.tool_args`)
            if not isinstance(self.tool_calls, list | tuple) or not all(
                isinstance(c, dict) for c in self.tool_calls
            ):
                raise InvalidMessageError(f"tool_calls must be a tuple of dicts, got {self.tool_calls!r:.80}")
            bounded = tuple(bound_call(c) for c in self.tool_calls)
            if type(self.tool_calls) is not tuple or any(
                b is not c for b, c in zip(bounded, self.tool_calls, strict=True)
            ):
                object.__setattr__(self, "tool_calls", bounded)
        for name in ("text", "name", "timestamp", "tool_call_id", "tool_calls", "metadata", "seen"):
            value = getattr(self, name)
            cleaned = _clean_value(value)
            if cleaned is not value:
                object.__setattr__(self, name, cleaned)
        if not isinstance(self.media, tuple):
            if isinstance(self.media, str) or not isinstance(self.media, list):
                raise InvalidMessageError(f"media must be a tuple of kinds, got {self.media!r}")
            object.__setattr__(self, "media", tuple(self.media))
        unknown = [kind for kind in self.media if kind not in MEDIA_KINDS]
        if unknown:
            raise InvalidMessageError(f"unknown media kind(s) {unknown}; expected some of {MEDIA_KINDS}")
        if not self.text.strip() and not self.tool_calls and not self.media and self.role != "tool":
            raise InvalidMessageError(f"{self.role} message has empty content")

    @property
    def is_final_answer(self) -> bool:
        """True for an assistant message that makes no tool call."""
        return self.role == "assistant" and not self.tool_calls

    @property
    def time(self) -> str | None:
        """When the message was said: its ``timestamp``, else when the memory first saw it."""
        return self.timestamp or self.seen

    def render(self, *, seen: bool = False) -> str:
        """Text of this message as shown to a scorer: ``[timestamp] speaker: text``.

        The speaker is :func:`ctxmgmt.messages.framing.speaker_label` (the name, or the role; a name that
        reads as another role is shown as ``user named "SYSTEM"``).
        Lines after the first are indented (:func:`ctxmgmt.messages.framing.one_entry`), so a line break
        in the text can never start a speaker line of its own in a transcript.

        Args:
            seen: Show the ``seen`` stamp of a message without a timestamp (for summarisers
                that anchor relative dates, :attr:`Turn.dated_text`); default False, the
                content that scoring reads and the turn fingerprint covers.
        """
        speaker = speaker_label(self.name, self.role)  # a name is data: never another role
        if self.timestamp:
            stamp = f"[{self.timestamp}] "
        elif seen and self.seen:
            stamp = f"[{SEEN_MARK}{self.seen}] "  # a summariser anchors with it but does not show it
        else:
            stamp = ""
        calls = ""
        if self.tool_calls:
            calls = " " + " ".join(f"<call {c.get('name', '')}({_call_args(c)})>" for c in self.tool_calls)
        text = self.text
        if self.media:
            markers = " ".join(f"[{kind}]" for kind in self.media)
            text = f"{text} {markers}" if text else markers
        return one_entry(f"{stamp}{speaker}: {text}{calls}".rstrip())

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (``seen`` only when set, so older states read the same)."""
        data = asdict(self)
        data["tool_calls"] = list(data["tool_calls"])
        data["media"] = list(data["media"])
        if data["seen"] is None:
            del data["seen"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["tool_calls"] = tuple(data.get("tool_calls") or ())
        data["media"] = tuple(data.get("media") or ())
        return cls(**data)


def memory_message(text: str, *, role: str = DEFAULT_MEMORY_ROLE, kind: str = "summary") -> Message:
    """A summary / entity / topic block as the message a model receives.

    Its text is :func:`~ctxmgmt.messages.framing.frame_memory` of ``text``; ``role`` is the strategy's
    ``memory_role`` (one of :data:`~ctxmgmt.messages.framing.MEMORY_ROLES`); the message's metadata
    names the block ``kind`` (``{"ctxmgmt_block": kind}``). Token counts of a block count this
    message, so they match what is sent.
    """
    return Message(role, frame_memory(text), metadata={"ctxmgmt_block": kind})


@dataclass(frozen=True)
class Turn:
    """A user message and the messages that answer it.

    Attributes:
        index: Position of the turn in its history (0-based, in turns).
        messages: The turn's messages in order; the first is the user message unless the
            history starts with non-user messages (then the first turn has no user message).
    """

    index: int
    messages: tuple[Message, ...]

    @property
    def query(self) -> str:
        """Text of the turn's user message ("" if it has none)."""
        first = self.messages[0]
        return first.text if first.role == "user" else ""

    @property
    def is_complete(self) -> bool:
        """True when the turn ends with a final assistant answer (no pending tool call)."""
        return self.messages[-1].is_final_answer

    @functools.cached_property
    def text(self) -> str:
        """The turn as one text unit, one rendered message per line (used for scoring; computed once).

        Messages show their own ``timestamp``; first-seen stamps are left out, so scoring and
        the fingerprint do not depend on when the memory saw the turn.
        """
        return "\n".join(m.render() for m in self.messages)

    @functools.cached_property
    def dated_text(self) -> str:
        """:attr:`text` with first-seen stamps too: what a summariser reads to anchor relative dates."""
        if not any(m.seen and not m.timestamp for m in self.messages):
            return self.text
        return "\n".join(m.render(seen=True) for m in self.messages)

    @functools.cached_property
    def user_part(self) -> tuple[Message, ...]:
        """The turn's leading user message(s), before any reply (empty when it opens otherwise).

        Sent alone when a budget leaves no room for a long reply
        (:attr:`ctxmgmt.messages.context.Block.reply_left_out`).
        """
        end = 0
        while end < len(self.messages) and self.messages[end].role == "user":
            end += 1
        return self.messages[:end]

    @functools.cached_property
    def fingerprint(self) -> str:
        """Stable content hash (SHA-1 of :attr:`text` as UTF-8); equal turns share derived state.

        First-seen stamps are not part of :attr:`text`, so a turn keeps its fingerprint
        whether or not, and whenever, the memory stamped it; a message's own ``timestamp``
        is content and counts.
        Message text is already clean (:func:`clean_text`); ``surrogatepass`` only makes sure
        that no text can ever make the hash raise.
        """
        return hashlib.sha1(self.text.encode("utf-8", "surrogatepass")).hexdigest()


def chain_hashes(turns: Sequence[Turn], previous: str = "") -> list[str]:
    """Running hashes: ``chain[i]`` covers the fingerprints of turns ``0..i`` (hex SHA-1).

    ``previous`` is the chain hash of the turns before ``turns[0]`` ("" at the start), so a
    caller that keeps the chain extends it with new turns only.
    """
    chains: list[str] = []
    last = bytes.fromhex(previous)
    for turn in turns:
        last = hashlib.sha1(last + turn.fingerprint.encode("ascii")).digest()
        chains.append(last.hex())
    return chains


def split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """Split messages into (system messages, conversation messages), order kept."""
    system = [m for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    return system, rest
