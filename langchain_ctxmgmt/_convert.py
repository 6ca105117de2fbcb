"""Private converters between LangChain messages and :class:`ctxmgmt.Message`.

Going in, each LangChain message becomes a framework-free :class:`~ctxmgmt.Message`. Coming
back, verbatim blocks of a :class:`~ctxmgmt.Context` are mapped to the *original* LangChain
objects by turn provenance (:meth:`ctxmgmt.session.codec.Codec.originals`, shared with the
LlamaIndex adapter), so the model receives exactly what is in the history (ids,
``additional_kwargs``, ``response_metadata``, image/audio/file blocks included). Only text
blocks (summaries, entity lists) produce new LangChain messages (:func:`from_ctxmgmt`): framed
memory messages in the strategy's ``memory_role``, a ``HumanMessage`` by default
(:func:`ctxmgmt.messages.types.memory_message`), never a system message unless asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    get_buffer_string,
)

from ctxmgmt import InvalidMessageError, Message
from ctxmgmt.messages.timestamps import timestamp_text
from ctxmgmt.messages.tool_args import args_snapshot
from ctxmgmt.messages.types import EMPTY_MESSAGE_TEXT, block_text
from ctxmgmt.session.codec import Codec

_ROLES: tuple[tuple[type[BaseMessage], str], ...] = (
    (HumanMessage, "user"),
    (AIMessage, "assistant"),
    (ToolMessage, "tool"),
    (SystemMessage, "system"),
)

_AI_SKIPPED_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_call",
        "tool_call_chunk",
        "function_call",
        "reasoning",
        "thinking",
        "redacted_thinking",
        "invalid_tool_call",
        "server_tool_call",
        "server_tool_call_chunk",
        "server_tool_result",
        "non_standard",
    }
)
"""Content-block types of an AI message that are not its text and are not scored.

Tool-call blocks repeat ``AIMessage.tool_calls`` (kept as tool-call metadata); reasoning
blocks are the model's scratchpad; server-side tool blocks and ``non_standard`` blocks are
provider bookkeeping. All stay in the original message that is sent.
"""


_MEDIA_BLOCKS: dict[str, str] = {
    "image": "image",  # LangChain standard block
    "image_url": "image",  # OpenAI chat completions
    "input_image": "image",  # OpenAI responses
    "audio": "audio",
    "input_audio": "audio",  # OpenAI chat completions
    "video": "video",
    "file": "file",
    "input_file": "file",  # OpenAI responses
    "document": "file",  # Anthropic
    "text-plain": "file",  # LangChain PlainTextContentBlock: a text document, not message text
}
"""Non-text content-block types -> ctxmgmt media kind (see :data:`ctxmgmt.messages.types.MEDIA_KINDS`).

Such blocks stay in the original message, which is what the model receives; the core only
records their kinds (for token estimates) and scores the message by its text blocks."""


def _media_kind(block_type: str | None, block: dict[str, Any]) -> str | None:
    if block_type in _MEDIA_BLOCKS:
        return _MEDIA_BLOCKS[block_type]
    if block_type == "media":  # older Gemini form: {"type": "media", "mime_type": ..., "data": ...}
        mime = str(block.get("mime_type") or "")
        prefix = mime.split("/", 1)[0]
        return prefix if prefix in ("image", "audio", "video") else "file"
    return None


def content_parts(message: BaseMessage) -> tuple[str, tuple[str, ...]]:
    """(text, media kinds) of a message's content.

    A string is the text. In a list, strings and ``text`` blocks are joined into the text;
    image / audio / video / file blocks (standard, OpenAI, Anthropic and Gemini spellings) are
    listed by kind, in order; an AI message's tool-call and reasoning blocks are skipped. Any
    other block (a tool's ``json`` or ``search_result`` block, an unknown type, a non-dict, a
    tool-use block outside an AI message) is carried as its JSON on a line of its own
    (:func:`ctxmgmt.messages.types.block_text`, bounded), so an unfamiliar block never stops a
    conversation.

    Raises:
        InvalidMessageError: The content is None or not text/blocks.
    """
    kind = type(message).__name__
    content = message.content
    if content is None:
        raise InvalidMessageError(f"{kind} has no content (None)")
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise InvalidMessageError(f"{kind} content must be a string or a list of blocks, got {content!r}")
    parts: list[str] = []
    unknown: set[int] = set()
    media: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        block_type = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block_type, str):  # {"type": [...]}: an unknown block, never a lookup key
            block_type = None
        if block_type == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
            continue
        if isinstance(message, AIMessage) and block_type in _AI_SKIPPED_BLOCKS:
            continue
        media_kind = _media_kind(block_type, block) if isinstance(block, dict) else None
        if media_kind is None:  # unknown: its JSON, on a line of its own
            parts.append(block_text(block))
            unknown.add(len(parts) - 1)
            continue
        media.append(media_kind)
    return _join(parts, unknown), tuple(media)


def _join(parts: list[str], own_lines: set[int]) -> str:
    """``parts`` joined directly (as LangChain joins text blocks), ``own_lines`` parts on own lines."""
    out: list[str] = []
    for i, part in enumerate(parts):
        if i and (i in own_lines or i - 1 in own_lines):
            out.append("\n")
        out.append(part)
    return "".join(out)


def content_text(message: BaseMessage) -> str:
    """The text of a message's content: a string as is, text blocks of a list joined.

    Media blocks are left out (see :func:`content_parts`).

    Raises:
        InvalidMessageError: The content is None or not text/blocks.
    """
    return content_parts(message)[0]


def _role_of(message: Any) -> str:
    for cls, role in _ROLES:
        if isinstance(message, cls):
            return role
    raise InvalidMessageError(
        f"cannot use a {type(message).__name__} as a chat message; expected HumanMessage, "
        "AIMessage, ToolMessage or SystemMessage"
    )


def to_ctxmgmt(message: BaseMessage, *, allow_empty: bool = False) -> Message:
    """Convert one LangChain message.

    Human -> ``user``, AI -> ``assistant`` (tool calls as plain ``{"id", "name", "args"}``
    dicts), Tool -> ``tool`` (with ``tool_call_id``), System -> ``system``.

    Media blocks (images, audio, video, files) are recorded by kind in ``Message.media``; the
    text blocks are the text. A message whose content is only media is valid (empty text).

    Raises:
        InvalidMessageError: Unknown message type, None content, or empty content with no media
            (an AI message with tool calls may be empty; so may a tool result). Content blocks
            never raise: unknown ones are carried as text (:func:`content_parts`).
    """
    role = _role_of(message)
    text, media = content_parts(message)
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    if isinstance(message, AIMessage):
        tool_calls = tuple(
            {"id": call.get("id"), "name": call.get("name"), "args": dict(call.get("args") or {})}
            for call in message.tool_calls
        )
    elif isinstance(message, ToolMessage):
        tool_call_id = message.tool_call_id
    if not text.strip() and not tool_calls and not media and role != "tool":
        if not allow_empty:
            raise InvalidMessageError(f"{type(message).__name__} has empty content")
        text = EMPTY_MESSAGE_TEXT  # already in the caller's history: kept, never a dead thread
    return Message(
        role,
        text,
        name=message.name or None,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        timestamp=_timestamp_of(message),
        media=media,
    )


def _timestamp_of(message: BaseMessage) -> str | None:
    """The time ``additional_kwargs["timestamp"]`` gives, as the core keeps it (None: undated).

    Accepts an ISO 8601 string, a written date such as ``"1:56 pm on 8 May, 2023"``, a
    ``datetime``/``date`` or epoch seconds (:func:`ctxmgmt.messages.timestamps.timestamp_text`);
    anything else is read as no time, with one logged warning per kind of value.
    """
    return timestamp_text((message.additional_kwargs or {}).get("timestamp"))


def to_ctxmgmt_messages(messages: Sequence[BaseMessage]) -> list[Message]:
    """Convert a list in order (see :func:`to_ctxmgmt`)."""
    return [to_ctxmgmt(m) for m in messages]


def from_ctxmgmt(message: Message) -> BaseMessage:
    """A new LangChain message for a ctxmgmt message (used for text the core wrote)."""
    if message.role == "user":
        return HumanMessage(content=message.text, name=message.name)
    if message.role == "assistant":
        return AIMessage(
            content=message.text,
            name=message.name,
            tool_calls=[
                {"id": c.get("id"), "name": c.get("name", ""), "args": dict(c.get("args") or {})}
                for c in message.tool_calls
            ],
        )
    if message.role == "tool":
        return ToolMessage(content=message.text, tool_call_id=message.tool_call_id or "", name=message.name)
    return SystemMessage(content=message.text)


def _part_snapshot(part: Any) -> Any:
    if isinstance(part, dict):
        kind = part.get("type")
        if isinstance(kind, str) and (kind == "text" or kind in _MEDIA_BLOCKS):
            return (kind, part.get("text"), part.get("mime_type"))
        return args_snapshot(part)
    return part if isinstance(part, str) else args_snapshot(part)


def snapshot(message: BaseMessage) -> Any:
    """Everything :func:`to_ctxmgmt` reads from ``message``, as a cheap comparable value.

    Its class (the role), its content (text parts as they are, media parts by kind, other
    blocks by value), ``name``, an AI message's tool calls, a tool result's ``tool_call_id`` and
    ``additional_kwargs["timestamp"]``: an in-place edit of any of them is converted again.
    Blocks and tool-call arguments are read through :func:`ctxmgmt.messages.tool_args.args_snapshot`
    (bounded, iterative), so deep or huge arguments cost little on every call.
    """
    content: Any = message.content
    if not isinstance(content, str):
        content = (
            tuple(_part_snapshot(p) for p in content) if isinstance(content, list) else args_snapshot(content)
        )
    if isinstance(message, AIMessage):
        calls = message.tool_calls
        extra: Any = (
            tuple((c.get("id"), c.get("name"), args_snapshot(c.get("args"))) for c in calls) if calls else ()
        )
    else:
        extra = getattr(message, "tool_call_id", None)
    return (type(message), content, message.name, extra, (message.additional_kwargs or {}).get("timestamp"))


CODEC: Codec[BaseMessage] = Codec(
    to_core=functools.partial(to_ctxmgmt, allow_empty=True), snapshot=snapshot, memory_message=from_ctxmgmt
)
"""LangChain messages <-> the core: conversion, change snapshot, framed memory messages."""


def buffer_string(messages: Sequence[BaseMessage], *, human_prefix: str, ai_prefix: str) -> str:
    """``get_buffer_string`` of ``messages`` with each list content read as ctxmgmt reads it.

    LangChain's ``message.text`` fails on content blocks it does not expect (a nested list, a
    tool's non-text block); the text here is :func:`content_text`'s, which carries unknown
    blocks as their JSON text, so the string form never fails where the messages form works.
    """
    readable = [
        m.model_copy(update={"content": content_text(m)}) if isinstance(m.content, list) else m
        for m in messages
    ]
    return get_buffer_string(readable, human_prefix=human_prefix, ai_prefix=ai_prefix)
