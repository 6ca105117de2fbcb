"""Direct tests of the private LangChain <-> ctxmgmt converters."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from ctxmgmt import Block, Context, InvalidMessageError, KadaneDialStrategy, Message, build_context
from ctxmgmt.messages.framing import frame_memory
from ctxmgmt.session.converted import ConvertedHistory
from langchain_ctxmgmt._convert import (
    CODEC,
    content_text,
    from_ctxmgmt,
    snapshot,
    to_ctxmgmt,
    to_ctxmgmt_messages,
)


def test_roles_and_fields():
    human = HumanMessage("Where is Lisbon?", name="ana", id="h1")
    ai = AIMessage(
        "",
        id="a1",
        tool_calls=[{"id": "call_1", "name": "lookup", "args": {"city": "Lisbon"}}],
        additional_kwargs={"vendor": "x"},
    )
    tool = ToolMessage("Lisbon is in Portugal.", tool_call_id="call_1", name="lookup")
    system = SystemMessage("Be brief.")

    u, a, t, s = (to_ctxmgmt(m) for m in (human, ai, tool, system))

    assert (u.role, u.text, u.name) == ("user", "Where is Lisbon?", "ana")
    assert a.role == "assistant" and a.text == ""
    assert a.tool_calls == ({"id": "call_1", "name": "lookup", "args": {"city": "Lisbon"}},)
    assert all(type(c) is dict for c in a.tool_calls)  # plain dicts, not LangChain ToolCall objects
    assert (t.role, t.tool_call_id, t.name) == ("tool", "call_1", "lookup")
    assert (s.role, s.text) == ("system", "Be brief.")
    assert u.metadata == {}  # no index unless asked for


def test_text_blocks_are_joined():
    message = HumanMessage(
        content=[{"type": "text", "text": "Hello "}, "there", {"type": "text", "text": "!"}]
    )
    assert content_text(message) == "Hello there!"
    assert to_ctxmgmt(message).text == "Hello there!"


def test_ai_tool_use_and_reasoning_blocks_are_not_text():
    message = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "the user wants the weather"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "call_9", "name": "weather", "input": {"city": "Oslo"}},
        ],
        tool_calls=[{"id": "call_9", "name": "weather", "args": {"city": "Oslo"}}],
    )
    converted = to_ctxmgmt(message)
    assert converted.text == "Let me check."
    assert converted.tool_calls[0]["id"] == "call_9"


@pytest.mark.parametrize(
    ("block", "kind"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "image"),
        ({"type": "image", "url": "https://example.com/cat.png"}, "image"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}, "image"),
        ({"type": "input_image", "image_url": "https://example.com/cat.png"}, "image"),
        ({"type": "audio", "base64": "AAAA", "mime_type": "audio/wav"}, "audio"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, "audio"),
        ({"type": "video", "url": "https://example.com/cat.mp4"}, "video"),
        ({"type": "file", "url": "https://example.com/cat.pdf", "mime_type": "application/pdf"}, "file"),
        ({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}, "file"),
        ({"type": "text-plain", "text": "a whole document", "mime_type": "text/plain"}, "file"),
        ({"type": "media", "mime_type": "image/jpeg", "data": b"\xff"}, "image"),
        ({"type": "media", "mime_type": "application/pdf", "data": b"%PDF"}, "file"),
    ],
)
def test_media_blocks_are_kept_as_kinds_and_text_is_scored(block, kind):
    message = HumanMessage(content=[{"type": "text", "text": "What is this?"}, block])
    before = copy.deepcopy(message.content)
    converted = to_ctxmgmt(message)
    assert converted.text == "What is this?"
    assert converted.media == (kind,)
    assert message.content == before  # the original is untouched
    assert content_text(message) == "What is this?"


def test_media_only_message_is_valid_and_counted():
    image = {"type": "image", "url": "https://example.com/cat.png"}
    converted = to_ctxmgmt(HumanMessage(content=[image, dict(image)]))
    assert converted.text == ""
    assert converted.media == ("image", "image")
    assert converted.render() == "user: [image] [image]"
    assert Message.from_dict(converted.to_dict()) == converted
    json.dumps(converted.to_dict())  # derived state stays JSON, no image data in it


def test_media_blocks_count_with_a_configurable_estimate():
    from ctxmgmt.components.budget import IMAGE_TOKENS, message_tokens
    from ctxmgmt.components.tokens import CachedTokenCounter, CallableTokenCounter

    words = CallableTokenCounter(lambda text: len(text.split()))
    text_only = to_ctxmgmt(HumanMessage("what is this"))
    with_image = to_ctxmgmt(
        HumanMessage(content=[{"type": "text", "text": "what is this"}, {"type": "image", "url": "u"}])
    )
    assert message_tokens(words, with_image) == message_tokens(words, text_only) + IMAGE_TOKENS
    custom = CachedTokenCounter(
        CallableTokenCounter(lambda text: len(text.split()), media_tokens={"image": 7})
    )
    assert message_tokens(custom, with_image) == message_tokens(custom, text_only) + 7


def test_a_selection_with_images_respects_the_budget(hashing_embedder):
    from ctxmgmt.components.tokens import CallableTokenCounter

    counter = CallableTokenCounter(lambda text: len(text.split()), media_tokens={"image": 50})
    originals = []
    for i in range(6):
        content = [{"type": "text", "text": f"photo {i} of the harbour"}, {"type": "image", "url": f"u{i}"}]
        originals += [HumanMessage(content=content), AIMessage(f"a harbour picture number {i}")]
    originals.append(HumanMessage("show me the harbour photo again"))
    converted = to_ctxmgmt_messages(originals)
    strategy = KadaneDialStrategy(embedder=hashing_embedder, token_counter=counter)
    context = build_context(strategy, converted, budget=150)
    assert context.tokens <= 150
    selected = select_originals(context, originals)
    picked = [m for m in selected if isinstance(m.content, list)]
    assert picked and len(picked) < 6  # not everything fits: the images are counted
    for message in picked:  # the original objects, image blocks included
        assert any(message is o for o in originals)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "hologram", "data": "x"},
        {"text": "no type"},
        42,
        {"type": "json", "json": {"temperature": 24, "unit": "C"}},
        {
            "type": "search_result",
            "source": "https://example.com/miso",
            "title": "Miso the cat",
            "content": [{"type": "text", "text": "Miso is a grey cat."}],
        },
        {"type": "text", "text": None},
        {"type": []},  # a type that is not a string: unknown, never a lookup key
        {"type": {"kind": "image"}},
        {"type": 3, "text": "three"},
    ],
)
def test_unknown_blocks_are_carried_as_json_text(block):
    message = HumanMessage(content=[{"type": "text", "text": "What is this?"}, "x"])
    message.content.append(block)
    converted = to_ctxmgmt(message)
    assert converted.text == "What is this?x\n" + json.dumps(block, ensure_ascii=False)
    assert converted.media == ()


@pytest.mark.parametrize("block", [{"type": []}, {"type": {"a": 1}}, {"type": None}])
@pytest.mark.parametrize("cls", [HumanMessage, AIMessage, ToolMessage])
def test_a_block_type_that_is_not_a_string_is_carried_and_snapshotted(cls, block):
    """Found by the hostile-input fuzz test: ``{"type": []}`` raised TypeError (unhashable)."""
    extra = {"tool_call_id": "c"} if cls is ToolMessage else {}
    message = cls(content=[{"type": "text", "text": "see"}, block], **extra)
    assert to_ctxmgmt(message).text == "see\n" + json.dumps(block)
    assert snapshot(message) == snapshot(copy.deepcopy(message))


def test_unknown_block_text_is_bounded_and_never_raises():
    from ctxmgmt.messages.types import MAX_BLOCK_CHARS

    deep: dict = {}
    node = deep
    for _ in range(50_000):
        node["a"] = {}
        node = node["a"]
    huge = {"type": "json", "json": {"rows": ["x" * 100] * 100_000}}
    tool = ToolMessage(content=[deep, huge, {"type": "text", "text": "done"}], tool_call_id="c")
    converted = to_ctxmgmt(tool)
    first, second, third = converted.text.split("\n", 2)
    assert first == "[dict block]"
    assert len(second) <= MAX_BLOCK_CHARS and "left out" in converted.text
    assert converted.text.endswith("\ndone")


def test_tool_use_block_in_a_human_message_is_carried_as_text():
    block = {"type": "tool_use", "id": "x", "name": "n", "input": {}}
    assert to_ctxmgmt(HumanMessage(content=[block])).text == json.dumps(block)


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage(""),
        HumanMessage("   \n"),
        AIMessage(""),
        SystemMessage(""),
        HumanMessage(content=[]),
        HumanMessage(content=[{"type": "text", "text": ""}]),
    ],
)
def test_empty_content_is_rejected(message):
    with pytest.raises(InvalidMessageError, match="empty"):
        to_ctxmgmt(message)


def test_none_content_is_rejected():
    message = HumanMessage.model_construct(content=None)
    with pytest.raises(InvalidMessageError, match="None"):
        to_ctxmgmt(message)


def test_empty_ai_message_with_tool_calls_and_empty_tool_result_are_fine():
    ai = AIMessage("", tool_calls=[{"id": "c", "name": "ping", "args": {}}])
    tool = ToolMessage("", tool_call_id="c")
    assert to_ctxmgmt(ai).tool_calls[0]["name"] == "ping"
    assert to_ctxmgmt(tool).text == ""


@pytest.mark.parametrize(
    "message",
    [
        ChatMessage(content="hi", role="user"),
        FunctionMessage(content="42", name="f"),
        RemoveMessage(id="x"),
        {"role": "user", "content": "hi"},
        "hi",
    ],
)
def test_unknown_types_are_rejected(message):
    with pytest.raises(InvalidMessageError, match="HumanMessage, AIMessage, ToolMessage or SystemMessage"):
        to_ctxmgmt(message)


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        to_ctxmgmt(HumanMessage(""))


def select_originals(context, originals, codec=CODEC):
    """The caller's objects for ``context``, mapped as ``Conversation.select`` maps them.

    The history is read by :class:`ConvertedHistory` (grouped into turns) and mapped back by
    :meth:`ctxmgmt.session.codec.Codec.originals`, the one place a context becomes originals.
    """
    reading = ConvertedHistory(codec.to_core, codec.snapshot).read(originals)
    return codec.originals(context, reading.system_originals, reading.turn_originals)


def _memory_messages(block):
    """What the adapter sends for a block: verbatim messages, or a text block's framed memory message."""
    return [from_ctxmgmt(m) for m in block.as_messages()]


def test_round_trip_returns_the_original_objects():
    originals = [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("Where is Lisbon?", id="h", additional_kwargs={"k": 1}),
        AIMessage("", id="a", tool_calls=[{"id": "c1", "name": "lookup", "args": {"q": "Lisbon"}}]),
        ToolMessage("Portugal", tool_call_id="c1", id="t"),
        AIMessage("Lisbon is in Portugal.", id="a2", response_metadata={"model": "m"}),
    ]
    converted = to_ctxmgmt_messages(originals)
    context = Context(
        query="q",
        blocks=[
            Block("system", messages=(converted[0],)),
            Block("current", turns=(0,), messages=tuple(converted[1:])),
        ],
    )
    back = select_originals(context, originals)
    assert len(back) == len(originals) and all(b is o for b, o in zip(back, originals, strict=True))


def test_from_ctxmgmt_builds_new_messages_without_originals():
    ai = from_ctxmgmt(Message("assistant", "", tool_calls=({"id": "c", "name": "f", "args": {"x": 1}},)))
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == [{"id": "c", "name": "f", "args": {"x": 1}, "type": "tool_call"}]
    tool = from_ctxmgmt(Message("tool", "ok", tool_call_id="c", name="f"))
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "c" and tool.name == "f"
    assert isinstance(from_ctxmgmt(Message("user", "hi", name="bo")), HumanMessage)
    assert isinstance(from_ctxmgmt(Message("system", "rules")), SystemMessage)
    # a new message round-trips to the same ctxmgmt message
    original = Message("assistant", "done", tool_calls=({"id": "c", "name": "f", "args": {"x": 1}},))
    assert to_ctxmgmt(from_ctxmgmt(original)) == original


def test_select_originals_maps_turns_by_provenance(hashing_embedder):
    originals = [
        SystemMessage("You are helpful."),
        HumanMessage("My cat is called Miso."),
        AIMessage("Miso is a nice cat name."),
        HumanMessage("The car engine rattles."),
        AIMessage("Check the heat shield of the engine."),
        HumanMessage("What is my cat called?"),
    ]
    converted = to_ctxmgmt_messages(originals)
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    context = build_context(strategy, converted)

    selected = select_originals(context, originals)

    assert selected[0] is originals[0]
    assert selected[-1] is originals[-1]
    assert originals[1] in selected and originals[2] in selected
    positions = [next(i for i, o in enumerate(originals) if o is m) for m in selected]
    assert positions == sorted(positions)


def test_select_originals_uses_the_current_list_even_for_cached_turns(hashing_embedder):
    """A strategy keeps turns from an earlier call; the objects returned come from this call."""
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    first = [HumanMessage("I adopted a cat."), AIMessage("Lovely cat."), HumanMessage("Tell me about cats.")]
    build_context(strategy, to_ctxmgmt_messages(first))
    second = [
        HumanMessage("I adopted a cat."),
        AIMessage("Lovely cat."),
        HumanMessage("Which cat did I adopt?"),
    ]
    converted = to_ctxmgmt_messages(second)
    context = build_context(strategy, converted)
    selected = select_originals(context, second)
    assert selected[0] is second[0] and selected[1] is second[1]
    assert all(any(m is o for o in second) for m in selected)


def test_select_originals_renders_text_blocks():
    context = Context(
        query="q", blocks=[Block("summary", turns=(0, 1), text="Earlier: the user owns a cat.")]
    )
    (message,) = select_originals(context, [])
    # a framed user-role memory message, never a system message by default (ctxmgmt.messages.framing)
    assert isinstance(message, HumanMessage) and message.content == frame_memory(
        "Earlier: the user owns a cat."
    )
    assistant = Block("summary", text="Earlier: the user owns a cat.", role="assistant")
    assert isinstance(_memory_messages(assistant)[0], AIMessage)
    system = Block("summary", text="Earlier: the user owns a cat.", role="system")
    assert isinstance(_memory_messages(system)[0], SystemMessage)  # only when asked for
    # an adapter places memory elsewhere through its codec's memory_message
    codec = replace(CODEC, memory_message=lambda m: HumanMessage(f"[summary] {m.text}"))
    custom = select_originals(context, [], codec)
    assert custom[0].content == "[summary] " + frame_memory("Earlier: the user owns a cat.")


def test_import_guard_names_the_extra():
    code = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "langchain_classic" or name.startswith("langchain_classic."):
                    raise ImportError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, Block())
        try:
            import langchain_ctxmgmt
        except ImportError as exc:
            print(exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_repo_root()
    )
    assert 'pip install "ctxmgmt[langchain]"' in result.stdout
    assert "langchain_classic" in result.stdout


def _repo_root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2])
