"""Private converters between LangChain messages and :class:`ctxmgmt.Message`.

Going in, each LangChain message becomes a framework-free :class:`~ctxmgmt.Message` that
remembers its position in the converted list (``metadata["_lc_index"]``, a plain int so the
core's state stays JSON-serialisable). Coming back, verbatim blocks of a
:class:`~ctxmgmt.Context` are mapped to the *original* LangChain objects by that position and
by turn provenance, so the model receives exactly what is in the history (ids,
``additional_kwargs``, ``response_metadata`` included). Only text blocks (summaries, entity
lists) produce new LangChain messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxmgmt import Block, Context, InvalidMessageError, Message
from ctxmgmt.types import group_turns, split_system

LC_INDEX = "_lc_index"
"""Metadata key holding a converted message's position in the LangChain list it came from."""

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


def to_ctxmgmt(message: BaseMessage, *, index: int | None = None) -> Message:
    """Convert one LangChain message.

    Human -> ``user``, AI -> ``assistant`` (tool calls as plain ``{"id", "name", "args"}``
    dicts), Tool -> ``tool`` (with ``tool_call_id``), System -> ``system``.

    Args:
        message: The LangChain message.
        index: Position of ``message`` in the list it belongs to, stored under
            :data:`LC_INDEX` so :func:`from_ctxmgmt` can return the original object.

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
    metadata: dict[str, Any] = {} if index is None else {LC_INDEX: index}
    return Message(
        role,
        text,
        name=message.name or None,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        metadata=metadata,
    )


def to_ctxmgmt_messages(messages: Sequence[BaseMessage]) -> list[Message]:
    """Convert a list, each message remembering its position (see :func:`to_ctxmgmt`)."""
    return [to_ctxmgmt(m, index=i) for i, m in enumerate(messages)]


def from_ctxmgmt(message: Message, originals: Sequence[BaseMessage] | None = None) -> BaseMessage:
    """Convert back: the original object when ``message`` came from ``originals``, else a new one.

    Args:
        message: A ctxmgmt message.
        originals: The LangChain list the message was converted from (see
            :func:`to_ctxmgmt_messages`).
    """
    index = message.metadata.get(LC_INDEX)
    if originals is not None and isinstance(index, int) and 0 <= index < len(originals):
        return originals[index]
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


def _text_block_default(block: Block) -> list[BaseMessage]:
    return [from_ctxmgmt(m) for m in block.as_messages()]


def context_to_langchain(
    context: Context,
    converted: Sequence[Message],
    originals: Sequence[BaseMessage],
    *,
    text_block: Callable[[Block], list[BaseMessage]] | None = None,
) -> list[BaseMessage]:
    """The LangChain messages a context stands for, in block order.

    Verbatim blocks map to the original objects: past turns by their provenance (turn index
    in ``converted``, grouped as the core groups them), system messages and the turn in
    progress by position. Text blocks become new messages (default: one ``SystemMessage``).

    Args:
        context: What :func:`ctxmgmt.build_context` returned for ``converted``.
        converted: ``to_ctxmgmt_messages(originals)``.
        originals: The LangChain messages the selection was made from.
        text_block: Turns a summary/entity block into LangChain messages.
    """
    render_text = text_block or _text_block_default
    _, conversation = split_system(list(converted))
    turns = group_turns(conversation)
    out: list[BaseMessage] = []
    for block in context.blocks:
        known = block.turns and all(0 <= t < len(turns) for t in block.turns)
        if block.kind in ("turns", "current") and known:
            out.extend(from_ctxmgmt(m, originals) for t in block.turns for m in turns[t].messages)
        elif block.messages:
            out.extend(from_ctxmgmt(m, originals) for m in block.messages)
        else:
            out.extend(render_text(block))
    return out
