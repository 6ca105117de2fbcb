"""Private converters between LlamaIndex ``ChatMessage`` and :class:`ctxmgmt.Message`.

Only text goes to the core, plus the kinds of the media blocks (images, audio, video,
documents: for token estimates; never their bytes). The way back never rebuilds a
``ChatMessage``: the core selects *turns*, and
:meth:`ctxmgmt.session.codec.Codec.originals` maps them back to the caller's own
``ChatMessage`` objects, so the LLM receives exactly what was stored (tool-call blocks,
thinking blocks, media blocks, provider-specific ``additional_kwargs`` included).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.base.llms.types import (
    AudioBlock,
    CachePoint,
    ChatMessage,
    CitableBlock,
    CitationBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from llama_index.core.schema import QueryBundle

from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import InvalidMessageError
from ctxmgmt.messages.framing import escape_data
from ctxmgmt.messages.timestamps import timestamp_text
from ctxmgmt.messages.tool_args import args_snapshot, bound_call, is_cut
from ctxmgmt.messages.types import EMPTY_MESSAGE_TEXT, Message, block_text, clean_text
from ctxmgmt.session.codec import Codec
from ctxmgmt.session.query import newest_query

ROLE_MAP: dict[str, str] = {
    MessageRole.SYSTEM.value: "system",
    MessageRole.DEVELOPER.value: "system",
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.CHATBOT.value: "assistant",
    MessageRole.MODEL.value: "assistant",
    MessageRole.TOOL.value: "tool",
    MessageRole.FUNCTION.value: "tool",
}
"""LlamaIndex role value -> ctxmgmt role (Cohere's ``chatbot`` and Gemini's ``model`` are
assistants, ``developer`` is OpenAI's system role, legacy ``function`` results are tool results)."""

_NO_TEXT_BLOCKS = ThinkingBlock | CachePoint | ToolCallBlock
"""Blocks that carry no conversation text (tool calls are read separately); kept in the
original message, not scored."""


def _role_of(message: ChatMessage) -> str:
    role = message.role
    value = role.value if isinstance(role, MessageRole) else str(role)
    try:
        return ROLE_MAP[value]
    except KeyError:
        raise InvalidMessageError(
            f"unknown ChatMessage role {value!r}; expected one of {sorted(ROLE_MAP)}"
        ) from None


_MEDIA_BLOCKS: tuple[tuple[type[Any], str], ...] = (
    (ImageBlock, "image"),
    (AudioBlock, "audio"),
    (VideoBlock, "video"),
    (DocumentBlock, "file"),
)
"""Media block classes -> ctxmgmt media kind. They stay in the original ``ChatMessage`` that the
LLM receives; the core records only their kinds."""


def _media_kind(block: Any) -> str | None:
    for cls, kind in _MEDIA_BLOCKS:
        if isinstance(block, cls):
            return kind
    return None


def _blocks_of(blocks: Any, role: str) -> list[Any]:
    """``blocks`` if it is a list of blocks (a ``ChatMessage``'s or a ``CitableBlock``'s content)."""
    if not isinstance(blocks, list):
        raise InvalidMessageError(
            f"{role} message content must be a list of blocks, got {type(blocks).__name__}"
        )
    return blocks


def _block_parts(block: Any, role: str, media: list[str]) -> str | None:
    """Text of one content block (None for blocks without conversation text).

    Media blocks add their kind to ``media``. A block of any other kind (a tool's JSON or
    search-result block, a block type this version does not know) is carried as its JSON
    (:func:`ctxmgmt.messages.types.block_text`, bounded), so an unfamiliar block never stops a
    conversation.
    """
    if isinstance(block, TextBlock):
        return block.text if isinstance(block.text, str) else block_text(block.text)
    if isinstance(block, _NO_TEXT_BLOCKS):
        return None
    kind = _media_kind(block)
    if kind is not None:
        media.append(kind)
        return None
    if isinstance(block, CitableBlock):
        texts = [
            t
            for t in (_block_parts(part, role, media) for part in _blocks_of(block.content, role))
            if t is not None
        ]
        return "\n".join(texts) if texts else None
    if isinstance(block, CitationBlock):
        return _block_parts(block.cited_content, role, media)
    return block_text(block)  # any other block: its JSON (bounded), never a dead conversation


def _get(obj: Any, *names: str) -> Any:
    """First present attribute or key among ``names`` (dicts and objects alike)."""
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can write it (a pydantic model dumped, anything else unknown as its str)."""
    if hasattr(value, "model_dump") and callable(value.model_dump):
        try:
            value = value.model_dump()
        except Exception:  # a model that cannot dump itself is written as its str
            return str(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _call(call_id: Any, name: Any, args: Any) -> dict[str, Any]:
    """A plain call dict with bounded arguments (:func:`ctxmgmt.messages.tool_args.bound_call`).

    Arguments are made JSON-writable only once they are known to be small and shallow, so deep
    or huge arguments are never serialised in full (nor recursed into).
    """
    if hasattr(args, "model_dump") and callable(args.model_dump):
        args = _jsonable(args)
    call = bound_call({"id": str(call_id or ""), "name": str(name or ""), "args": args})
    if not is_cut(call):
        call["args"] = _jsonable(call["args"])
    return call


def tool_call_dict(call: Any) -> dict[str, Any]:
    """One tool call as a plain ``{"id", "name", "args"}`` dict.

    Accepts a ``ToolCallBlock``, a ``ToolSelection``, an OpenAI-style dict or object
    (``{"id", "function": {"name", "arguments"}}``) and Anthropic-style dicts
    (``{"id", "name", "input"}``).
    """
    if isinstance(call, ToolCallBlock):
        return _call(call.tool_call_id, call.tool_name, call.tool_kwargs)
    function = _get(call, "function")
    name = _get(call, "name", "tool_name")
    args = _get(call, "args", "arguments", "tool_kwargs", "input")
    if function is not None:
        name = name or _get(function, "name")
        args = args if args is not None else _get(function, "arguments")
    call_id = _get(call, "id", "tool_id", "tool_call_id")
    return _call(call_id, name, args if args is not None else {})


def to_message(message: ChatMessage, *, allow_empty: bool = False) -> Message:
    """Convert one ``ChatMessage`` to a :class:`ctxmgmt.Message` (text, tool metadata, media kinds).

    Tool calls are read from ``ToolCallBlock`` blocks and from ``additional_kwargs["tool_calls"]``;
    a tool result's ``additional_kwargs["tool_call_id"]`` is kept. Text blocks are joined with
    newlines; thinking blocks and cache points are ignored. ``ImageBlock``, ``AudioBlock``,
    ``VideoBlock`` and ``DocumentBlock`` (also inside a ``CitableBlock``) are recorded by kind in
    ``Message.media``; a message whose content is only media is valid (empty text). Any other
    block is carried as its JSON text (:func:`ctxmgmt.messages.types.block_text`).

    Raises:
        InvalidMessageError: not a ``ChatMessage``, unknown role, or no text and no media
            (allowed only for an assistant message with tool calls and for a tool result).
    """
    if not isinstance(message, ChatMessage):
        raise InvalidMessageError(f"expected a llama_index ChatMessage, got {type(message).__name__}")
    role = _role_of(message)
    media: list[str] = []
    blocks = _blocks_of(message.blocks, role)
    texts = [t for t in (_block_parts(b, role, media) for b in blocks) if t is not None]
    kwargs = message.additional_kwargs or {}
    calls = [tool_call_dict(b) for b in blocks if isinstance(b, ToolCallBlock)]
    extra_calls = kwargs.get("tool_calls")
    if extra_calls and not calls:
        if not isinstance(extra_calls, list | tuple):
            extra_calls = [extra_calls]
        calls = [tool_call_dict(c) for c in extra_calls]
    if role != "assistant" and calls:
        calls = []  # only assistants make calls; anything else would confuse the turn logic
    text = "\n".join(texts)
    if not text.strip() and not calls and not media and role != "tool":
        if not allow_empty:
            raise InvalidMessageError(
                f"{role} ChatMessage has no text content and no media (content={message.content!r}); "
                "only an assistant message with tool calls or a tool result may be empty"
            )
        text = EMPTY_MESSAGE_TEXT  # already in the caller's history: kept, never a dead thread
    tool_call_id = kwargs.get("tool_call_id")
    name = kwargs.get("name")
    return Message(
        role,
        text,
        name=name if isinstance(name, str) and name else None,
        tool_calls=tuple(calls),
        tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        timestamp=_timestamp_of(message),
        media=tuple(media),
    )


def _timestamp_of(message: ChatMessage) -> str | None:
    """The time ``additional_kwargs["timestamp"]`` gives, as the core keeps it (None: undated).

    Accepts an ISO 8601 string, a written date such as ``"1:56 pm on 8 May, 2023"``, a
    ``datetime``/``date`` or epoch seconds (:func:`ctxmgmt.messages.timestamps.timestamp_text`);
    anything else is read as no time, with one logged warning per kind of value.
    """
    return timestamp_text((message.additional_kwargs or {}).get("timestamp"))


def to_messages(messages: Sequence[ChatMessage]) -> list[Message]:
    """Convert ``ChatMessage`` objects in order (see :func:`to_message`)."""
    if isinstance(messages, ChatMessage | str) or not isinstance(messages, Sequence):
        raise InvalidMessageError(f"expected a list of ChatMessage, got {type(messages).__name__}")
    return [to_message(m) for m in messages]


QueryInput = str | ChatMessage | QueryBundle | None
"""What LlamaIndex callers pass as ``get(input=...)``: a string (``CondensePlusContextChatEngine``,
agents), a ``ChatMessage``, a ``QueryBundle`` (``ContextChatEngine``) or None."""


def text_of(value: QueryInput) -> str | None:
    """Query text of a ``get(input=...)`` argument.

    A string as is; a ``ChatMessage``: its text blocks joined by newlines; a ``QueryBundle``:
    its ``query_str`` (the user's question, not the custom embedding strings); None: None.
    The text is cleaned like message text (:func:`ctxmgmt.messages.types.clean_text`).

    Raises:
        InvalidMessageError: any other type (or a ``QueryBundle`` whose ``query_str`` is not a str).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, ChatMessage):
        blocks = value.blocks if isinstance(value.blocks, list) else []
        return clean_text(
            "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and isinstance(b.text, str))
        )
    if isinstance(value, QueryBundle) and isinstance(value.query_str, str):
        return clean_text(value.query_str)
    raise InvalidMessageError(
        f"input must be a str, a ChatMessage, a QueryBundle or None, got {type(value).__name__}"
    )


def latest_user_text(messages: Sequence[ChatMessage] | None) -> str:
    """Text of the newest user message in ``messages`` that has text ("" if there is none).

    The core's rule (:func:`ctxmgmt.session.query.newest_query`) over the user messages' texts.
    """
    users = (m for m in reversed(messages or ()) if isinstance(m, ChatMessage) and _role_of(m) == "user")
    return newest_query(_query_text(m) for m in users)


def _query_text(message: ChatMessage) -> str:
    """A user message's text as a query: "" when it has none but whitespace."""
    text = text_of(message) or ""
    return text if text.strip() else ""


_MEMORY_ROLES: dict[str, MessageRole] = {
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
    "system": MessageRole.SYSTEM,
}


def memory_message(message: Message) -> ChatMessage:
    """A framed memory message the core built (a summary or entity block) as a ``ChatMessage``.

    Its role is the block's ``memory_role`` (default user); its text opens with a line saying it
    is a record of earlier conversation, not instructions (:func:`ctxmgmt.messages.framing.memory_message`).
    """
    return ChatMessage(role=_MEMORY_ROLES[message.role], content=message.text)


def render_context(context: Context, *, include_current: bool = False, names: Sequence[str] = ()) -> str:
    """The selected turns and text blocks as a plain transcript (one ``speaker: text`` entry per line).

    Blocks are separated by a blank line; the system block is left out, and so is the turn
    in progress unless ``include_current``. The transcript is user text: it is escaped
    (:func:`ctxmgmt.messages.framing.escape_data`) so that no line can close a ``<memory>`` tag or the
    tags ``names`` (a memory block's own tag in ``Memory``'s template).
    """
    parts: list[str] = []
    for block in context.blocks:
        if block.kind == "system" or (block.kind == "current" and not include_current):
            continue
        if block.messages:
            parts.append("\n".join(m.render() for m in block.messages))
        elif block.text:
            parts.append(block.text)
    return escape_data("\n\n".join(parts), names=names)


def _block_snapshot(block: Any) -> Any:
    if isinstance(block, ToolCallBlock):
        return (ToolCallBlock, block.tool_call_id, block.tool_name, args_snapshot(block.tool_kwargs))
    if isinstance(block, CitableBlock):
        return (CitableBlock, args_snapshot(block.content))
    return (type(block), getattr(block, "text", None))


def snapshot(message: ChatMessage) -> Any:
    """Everything :func:`to_message` reads from ``message``, as a cheap comparable value.

    Its role, each block's kind and text (a tool-call block's call), and the
    ``additional_kwargs`` the converter reads (``tool_calls``, ``tool_call_id``, ``timestamp``): an in-place
    edit of any of them is converted again.
    """
    blocks = message.blocks
    if type(blocks) is not list:
        return args_snapshot(blocks)
    kwargs = message.additional_kwargs
    extra = (
        (args_snapshot(kwargs.get("tool_calls")), kwargs.get("tool_call_id"), kwargs.get("timestamp"))
        if kwargs
        else None
    )
    if len(blocks) == 1:  # the usual message: no inner tuple to build (this runs per message per call)
        return (message.role, _block_snapshot(blocks[0]), extra)
    return (message.role, extra, *[_block_snapshot(b) for b in blocks])


CODEC: Codec[ChatMessage] = Codec(
    to_core=functools.partial(to_message, allow_empty=True), snapshot=snapshot, memory_message=memory_message
)
"""LlamaIndex ``ChatMessage`` <-> the core: conversion, change snapshot, framed memory messages."""


class MemoryMessages:
    """Framed memory messages as ``ChatMessage`` s, the same object for the same text.

    A memory's codec (:func:`memory_codec`): the newest ``size`` (32) distinct texts are kept,
    so repeated gets return equal lists.
    """

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._messages: OrderedDict[str, ChatMessage] = OrderedDict()

    def __call__(self, message: Message) -> ChatMessage:
        made = memory_message(message)
        text = made.content or ""
        kept = self._messages.setdefault(text, made)
        self._messages.move_to_end(text)
        while len(self._messages) > self.size:
            self._messages.popitem(last=False)
        return kept


def memory_codec() -> Codec[ChatMessage]:
    """:data:`CODEC` with memory messages of its own (:class:`MemoryMessages`), for one memory."""
    return replace(CODEC, memory_message=MemoryMessages())
