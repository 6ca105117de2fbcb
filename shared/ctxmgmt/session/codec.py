"""How one framework's messages cross into the core and back (the one place a context maps back).

An adapter defines one :class:`Codec` beside its converter. On the way in,
:class:`~ctxmgmt.session.converted.ConvertedHistory` converts messages with ``to_core`` and
spots in-place edits with ``snapshot``. On the way out, :meth:`Codec.selection` maps a
:class:`~ctxmgmt.messages.context.Context` back to the caller's own message objects: a selected
turn comes back whole (or its user message(s) alone, when a budget left a long reply out), as
the objects the caller passed (ids and metadata included), and a summary or entity block
becomes one framed memory message made by ``memory_message``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.types import Message

T = TypeVar("T")


@dataclass(frozen=True)
class Selection(Generic[T]):
    """What :meth:`ctxmgmt.session.conversation.Conversation.select` chose.

    Attributes:
        messages: The caller's own message objects (and new memory messages for summary and
            entity blocks), in the order they are sent.
        context: The core :class:`~ctxmgmt.messages.context.Context`: blocks, provenance, tokens, reasons.
    """

    messages: list[T]
    context: Context


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How one framework's message type maps to the core, defined once per adapter.

    Attributes:
        to_core: Framework message -> :class:`~ctxmgmt.messages.types.Message` (raises
            ``InvalidMessageError`` for an unusable message).
        snapshot: A cheap, comparable snapshot of every field ``to_core`` reads, so that an
            in-place edit of any of them is seen (:class:`~ctxmgmt.session.converted.ConvertedHistory`);
            None compares messages by identity only.
        memory_message: A framed memory message (a core ``Message`` of a summary or entity
            block, :meth:`ctxmgmt.messages.context.Block.as_messages`) -> the framework's message.
            An adapter that wants the same object back for the same text (LlamaIndex's memory)
            gives a caching callable here.
    """

    to_core: Callable[[T], Message]
    snapshot: Callable[[T], Any] | None
    memory_message: Callable[[Message], T]

    def by_identity(self) -> Codec[T]:
        """This codec comparing messages by identity only (for histories never edited in place)."""
        return replace(self, snapshot=None)

    def text_block(self, block: Block) -> list[T]:
        """A summary or entity block as the framework's messages (one framed memory message)."""
        return [self.memory_message(m) for m in block.as_messages()]

    def originals(self, context: Context, system: Sequence[T], turns: Sequence[Sequence[T]]) -> list[T]:
        """The caller's own message objects for what ``context`` selected, in block order.

        ``system`` are the originals of the system messages and ``turns[i]`` those of turn ``i``
        (grouped as :func:`ctxmgmt.messages.history.group_turns` groups their core form), so a turn
        comes back whole, or as its leading user message(s) when the block left its reply out
        (:attr:`~ctxmgmt.messages.context.Block.reply_left_out`). Text blocks (summaries, entities)
        become :meth:`text_block`'s messages; a block naming a turn outside ``turns`` is left out.
        """
        out: list[T] = []
        for block in context.blocks:
            if block.kind == "system":
                out.extend(system)
            elif block.reply_left_out and len(block.turns) == 1 and 0 <= block.turns[0] < len(turns):
                out.extend(turns[block.turns[0]][: len(block.messages)])  # the user part leads its turn
            elif block.kind in ("turns", "current") and all(0 <= t < len(turns) for t in block.turns):
                out.extend(o for t in block.turns for o in turns[t])
            elif block.text:
                out.extend(self.text_block(block))
        return out

    def selection(self, context: Context, system: Sequence[T], turns: Sequence[Sequence[T]]) -> Selection[T]:
        """:meth:`originals` with the context they came from."""
        return Selection(self.originals(context, system, turns), context)
