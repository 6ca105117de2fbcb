"""Private converters between LangChain messages and :class:`ctxmgmt.Message`.

Going in, each LangChain message becomes a framework-free :class:`~ctxmgmt.Message`. Coming
back, verbatim blocks of a :class:`~ctxmgmt.Context` are mapped to the *original* LangChain
objects by turn provenance (:func:`ctxmgmt.session.select_originals`, shared with the
LlamaIndex adapter), so the model receives exactly what is in the history (ids,
``additional_kwargs``, ``response_metadata`` included). Only text blocks (summaries, entity
lists) produce new LangChain messages (:func:`from_ctxmgmt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxmgmt import InvalidMessageError, Message

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
    }
)
"""Content-block types of an AI message that are not its text and are not scored.

Tool-call blocks repeat ``AIMessage.tool_calls`` (kept as tool-call metadata); reasoning
blocks are the model's scratchpad. Both stay in the original message that is sent.
"""


def content_text(message: BaseMessage) -> str:
    """The text of a message's content: a string as is, text blocks of a list joined.

    Raises:
        InvalidMessageError: The content is None, not text, or holds a non-text block
            (image, audio, file, ...), which a text-relevance memory cannot score.
    """
    kind = type(message).__name__
    content = message.content
    if content is None:
        raise InvalidMessageError(f"{kind} has no content (None)")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidMessageError(f"{kind} content must be a string or a list of blocks, got {content!r}")
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        block_type = block.get("type") if isinstance(block, dict) else None
        if block_type == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(message, AIMessage) and block_type in _AI_SKIPPED_BLOCKS:
            continue
        else:
            raise InvalidMessageError(
                f"{kind} holds a {block_type or type(block).__name__!r} content block; ctxmgmt memories "
                "select by text and accept only text content (strings or 'text' blocks)"
            )
    return "".join(parts)


def _role_of(message: Any) -> str:
    for cls, role in _ROLES:
        if isinstance(message, cls):
            return role
    raise InvalidMessageError(
        f"cannot use a {type(message).__name__} as a chat message; expected HumanMessage, "
        "AIMessage, ToolMessage or SystemMessage"
    )


def to_ctxmgmt(message: BaseMessage) -> Message:
    """Convert one LangChain message.

    Human -> ``user``, AI -> ``assistant`` (tool calls as plain ``{"id", "name", "args"}``
    dicts), Tool -> ``tool`` (with ``tool_call_id``), System -> ``system``.

    Raises:
        InvalidMessageError: Unknown message type, None/empty content (an AI message with
            tool calls may be empty; so may a tool result), or non-text content blocks.
    """
    role = _role_of(message)
    text = content_text(message)
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    if isinstance(message, AIMessage):
        tool_calls = tuple(
            {"id": call.get("id"), "name": call.get("name"), "args": dict(call.get("args") or {})}
            for call in message.tool_calls
        )
    elif isinstance(message, ToolMessage):
        tool_call_id = message.tool_call_id
    if not text.strip() and not tool_calls and role != "tool":
        raise InvalidMessageError(f"{type(message).__name__} has empty content")
    return Message(role, text, name=message.name or None, tool_calls=tool_calls, tool_call_id=tool_call_id)


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
