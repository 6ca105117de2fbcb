"""Codec: the one place a context becomes the caller's own message objects again."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.framing import frame_memory
from ctxmgmt.messages.types import Message
from ctxmgmt.session.codec import Codec, Selection


@dataclass(eq=False)
class Note:
    role: str
    text: str


CODEC: Codec[Note] = Codec(
    to_core=lambda n: Message(n.role, n.text),
    snapshot=lambda n: (n.role, n.text),
    memory_message=lambda m: Note(m.role, m.text),
)

SYSTEM = [Note("system", "be brief")]
TURNS = [
    [Note("user", "cats?"), Note("assistant", "yes")],
    [Note("user", "dogs?"), Note("assistant", "no")],
    [Note("user", "and birds?")],
]


def test_turns_come_back_whole_as_the_callers_objects_in_block_order() -> None:
    context = Context(
        query="q",
        blocks=[
            Block("system"),
            Block("turns", turns=(1,)),
            Block("turns", turns=(0,)),
            Block("current", turns=(2,)),
        ],
    )
    out = CODEC.originals(context, SYSTEM, TURNS)
    expected = [SYSTEM[0], *TURNS[1], *TURNS[0], *TURNS[2]]
    assert len(out) == len(expected) and all(a is b for a, b in zip(out, expected, strict=True))


def test_a_text_block_becomes_one_framed_memory_message() -> None:
    context = Context(query="q", blocks=[Block("summary", turns=(0, 1), text="The user asked about pets.")])
    (message,) = CODEC.originals(context, SYSTEM, TURNS)
    assert message.role == "user"  # never system by default
    assert message.text == frame_memory("The user asked about pets.")
    assert CODEC.text_block(Block("summary", text="t", role="assistant"))[0].role == "assistant"


def test_a_block_naming_an_unknown_turn_is_left_out() -> None:
    context = Context(query="q", blocks=[Block("turns", turns=(7,)), Block("current", turns=(2,))])
    assert CODEC.originals(context, SYSTEM, TURNS) == TURNS[2]


def test_selection_pairs_the_objects_with_their_context() -> None:
    context = Context(query="q", blocks=[Block("current", turns=(2,))])
    selection = CODEC.selection(context, SYSTEM, TURNS)
    assert isinstance(selection, Selection)
    assert selection.context is context and selection.messages == TURNS[2]


def test_the_memory_message_hook_is_the_codecs_and_by_identity_drops_the_snapshot() -> None:
    made: list[str] = []

    def remember(message: Message) -> Note:
        made.append(message.text)
        return Note("user", "[memory]")

    codec = replace(CODEC, memory_message=remember)
    context = Context(query="q", blocks=[Block("summary", text="Miso: a cat")])
    assert [n.text for n in codec.originals(context, (), ())] == ["[memory]"]
    assert made == [frame_memory("Miso: a cat")]
    assert CODEC.by_identity().snapshot is None and CODEC.by_identity().to_core is CODEC.to_core


def test_a_turn_with_its_reply_left_out_comes_back_as_its_user_message_alone() -> None:
    user = Message("user", "dogs?")
    context = Context(
        query="q",
        blocks=[
            Block("turns", turns=(0,)),
            Block("turns", turns=(1,), messages=(user,), reply_left_out=True),
            Block("current", turns=(2,)),
        ],
    )
    out = CODEC.originals(context, SYSTEM, TURNS)
    expected = [*TURNS[0], TURNS[1][0], *TURNS[2]]
    assert len(out) == len(expected) and all(a is b for a, b in zip(out, expected, strict=True))
    assert context.turn_indices == [0, 2] and context.user_only_turns == {1: 1}
