"""The private ChatMessage <-> ctxmgmt.Message converters of llamaindex_ctxmgmt."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
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
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.schema import QueryBundle

from ctxmgmt import Block, Context, InvalidMessageError, KadaneDialStrategy, Message, build_context
from ctxmgmt.messages.framing import frame_memory
from ctxmgmt.session.converted import ConvertedHistory
from llamaindex_ctxmgmt._convert import (
    CODEC,
    ROLE_MAP,
    latest_user_text,
    render_context,
    text_of,
    to_message,
    to_messages,
    tool_call_dict,
)


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        (MessageRole.USER, "user"),
        (MessageRole.ASSISTANT, "assistant"),
        (MessageRole.SYSTEM, "system"),
        (MessageRole.DEVELOPER, "system"),
        (MessageRole.TOOL, "tool"),
        (MessageRole.FUNCTION, "tool"),
        (MessageRole.CHATBOT, "assistant"),
        (MessageRole.MODEL, "assistant"),
    ],
)
def test_roles(role, expected):
    assert to_message(ChatMessage(role=role, content="hello")).role == expected


def test_every_llamaindex_role_is_mapped():
    assert set(ROLE_MAP) == {r.value for r in MessageRole}


def test_unknown_role_is_rejected():
    message = ChatMessage.model_construct(role="narrator", blocks=[TextBlock(text="once upon a time")])
    with pytest.raises(InvalidMessageError, match="unknown ChatMessage role 'narrator'"):
        to_message(message)


def test_text_blocks_are_joined_and_non_content_blocks_ignored():
    message = ChatMessage(
        role="assistant",
        blocks=[
            ThinkingBlock(content="let me think about bread"),
            TextBlock(text="First line."),
            CachePoint(cache_control=CacheControl(type="ephemeral")),
            TextBlock(text="Second line."),
        ],
    )
    assert to_message(message).text == "First line.\nSecond line."


def test_citation_blocks_contribute_their_text():
    message = ChatMessage(
        role="assistant",
        blocks=[
            TextBlock(text="According to the manual:"),
            CitationBlock(
                cited_content="bake at 250 C",
                source="manual.pdf",
                title="Manual",
                additional_location_info={},
            ),
        ],
    )
    assert to_message(message).text == "According to the manual:\nbake at 250 C"
    citable = ChatMessage(
        role="user", blocks=[CitableBlock(content="the recipe text", source="r", title="Recipe")]
    )
    assert to_message(citable).text == "the recipe text"


@pytest.mark.parametrize(
    ("block", "kinds"),
    [
        (ImageBlock(url="https://example.com/cat.png"), ("image",)),
        (AudioBlock(url="https://example.com/cat.mp3"), ("audio",)),
        (VideoBlock(url="https://example.com/cat.mp4"), ("video",)),
        (DocumentBlock(url="https://example.com/cat.pdf"), ("file",)),
        (
            CitableBlock(content=[ImageBlock(url="https://example.com/cat.png")], source="s", title="t"),
            ("image",),
        ),
    ],
    ids=["image", "audio", "video", "document", "citable-image"],
)
def test_media_blocks_are_kept_as_kinds_and_text_is_scored(block, kinds):
    message = ChatMessage(role="user", blocks=[TextBlock(text="look at this"), block])
    before = message.model_dump()
    converted = to_message(message)
    assert converted.text == "look at this"
    assert converted.media == kinds
    assert message.model_dump() == before  # the original is untouched
    assert message.blocks[1] is block


def test_media_only_message_is_valid():
    image = ImageBlock(image=b"\x89PNG fake bytes", image_mimetype="image/png")
    converted = to_message(ChatMessage(role="user", blocks=[image]))
    assert converted.text == ""
    assert converted.media == ("image",)
    state = converted.to_dict()
    assert "PNG" not in json.dumps(state)  # no media bytes in derived state
    assert Message.from_dict(state) == converted


def test_unusable_messages_still_raise():
    with pytest.raises(InvalidMessageError, match="no text content and no media"):
        to_message(ChatMessage(role="user", blocks=[]))
    with pytest.raises(InvalidMessageError, match="no text content and no media"):
        to_message(ChatMessage(role="user", blocks=[ThinkingBlock(content="hmm")]))


def test_unknown_blocks_are_carried_as_json_text():
    odd = ChatMessage(role="user", content="x")
    odd.blocks.append(SimpleNamespace(block_type="hologram"))  # type: ignore[arg-type]
    odd.blocks.append({"type": "json", "json": {"temperature": 24}})  # type: ignore[arg-type]
    converted = to_message(odd)
    assert (
        converted.text
        == 'x\n"namespace(block_type=\'hologram\')"\n{"type": "json", "json": {"temperature": 24}}'
    )
    tool = ChatMessage(role="tool", blocks=[])
    tool.blocks.append({"type": "search_result", "title": "Miso"})  # type: ignore[arg-type]
    assert to_message(tool).text == '{"type": "search_result", "title": "Miso"}'


def test_media_tokens_follow_the_counter(hashing_embedder):
    from ctxmgmt.components.budget import IMAGE_TOKENS, message_tokens
    from ctxmgmt.components.tokens import CallableTokenCounter

    words = CallableTokenCounter(lambda text: len(text.split()))
    image = ChatMessage(role="user", blocks=[TextBlock(text="a cat"), ImageBlock(url="https://x/cat.png")])
    plain = ChatMessage(role="user", content="a cat")
    assert message_tokens(words, to_message(image)) == message_tokens(words, to_message(plain)) + IMAGE_TOKENS
    cheap = CallableTokenCounter(lambda text: len(text.split()), media_tokens={"image": 3})
    assert message_tokens(cheap, to_message(image)) == message_tokens(cheap, to_message(plain)) + 3


def test_tool_call_blocks():
    message = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_call_id="call_1", tool_name="get_weather", tool_kwargs={"city": "Oslo"})],
    )
    converted = to_message(message)
    assert converted.text == ""
    assert converted.tool_calls == ({"id": "call_1", "name": "get_weather", "args": {"city": "Oslo"}},)


@pytest.mark.parametrize(
    "call",
    [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        SimpleNamespace(
            id="call_1",
            type="function",
            function=SimpleNamespace(name="get_weather", arguments='{"city": "Oslo"}'),
        ),
        {"id": "call_1", "name": "get_weather", "input": '{"city": "Oslo"}'},
        ToolSelection(tool_id="call_1", tool_name="get_weather", tool_kwargs={"city": "Oslo"}),
    ],
    ids=["openai-dict", "openai-object", "anthropic-dict", "tool-selection"],
)
def test_tool_calls_in_additional_kwargs(call):
    message = ChatMessage(role="assistant", content=None, additional_kwargs={"tool_calls": [call]})
    (converted,) = to_message(message).tool_calls
    assert converted["id"] == "call_1"
    assert converted["name"] == "get_weather"
    assert "Oslo" in str(converted["args"])


def test_tool_call_dict_is_json_serialisable():
    import json

    call = tool_call_dict(SimpleNamespace(id=7, function=SimpleNamespace(name="f", arguments=object())))
    json.dumps(call)
    assert call["id"] == "7"


def test_tool_result_keeps_its_call_id_and_may_be_empty():
    result = to_message(
        ChatMessage(role="tool", content="Oslo: 3 C", additional_kwargs={"tool_call_id": "call_1"})
    )
    assert (result.role, result.text, result.tool_call_id) == ("tool", "Oslo: 3 C", "call_1")
    empty = to_message(ChatMessage(role="tool", content="", additional_kwargs={"tool_call_id": "call_2"}))
    assert empty.text == "" and empty.tool_call_id == "call_2"


def test_name_is_carried():
    assert (
        to_message(ChatMessage(role="user", content="hi", additional_kwargs={"name": "Caroline"})).name
        == "Caroline"
    )


@pytest.mark.parametrize(
    "message",
    [
        ChatMessage(role="user", content=""),
        ChatMessage(role="user", content=None),
        ChatMessage(role="assistant", blocks=[]),
        ChatMessage(role="system", content=" \n "),
        ChatMessage(role="assistant", blocks=[ThinkingBlock(content="only thoughts")]),
    ],
    ids=["empty", "none", "no-blocks", "blank-system", "only-thinking"],
)
def test_empty_content_is_rejected(message):
    with pytest.raises(InvalidMessageError, match="no text content"):
        to_message(message)


def test_non_chat_messages_are_rejected():
    with pytest.raises(InvalidMessageError, match="expected a llama_index ChatMessage"):
        to_message({"role": "user", "content": "hi"})
    with pytest.raises(InvalidMessageError, match="expected a list"):
        to_messages(ChatMessage(role="user", content="hi"))
    with pytest.raises(InvalidMessageError, match="expected a list"):
        to_messages("hi")


def test_text_of_and_latest_user_text():
    assert text_of(None) is None
    assert text_of("plain") == "plain"
    assert text_of(ChatMessage(role="user", content="from a message")) == "from a message"
    # ContextChatEngine's input: the question, not the custom embedding strings
    bundle = QueryBundle(query_str="from a bundle", custom_embedding_strs=["other text"])
    assert text_of(bundle) == "from a bundle"
    with pytest.raises(InvalidMessageError, match="QueryBundle"):
        text_of(3)
    history = [
        ChatMessage(role="user", content="first"),
        ChatMessage(role="assistant", content="answer"),
        ChatMessage(role="user", content="second"),
        ChatMessage(role="tool", content="result", additional_kwargs={"tool_call_id": "x"}),
    ]
    assert latest_user_text(history) == "second"
    assert latest_user_text([]) == "" and latest_user_text(None) == ""


def _history() -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="I adopted a cat named Miso."),
        ChatMessage(role="assistant", content="Miso is a lovely name for a cat."),
        ChatMessage(role="user", content="What is the capital of Peru?"),
        ChatMessage(
            role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="search", tool_kwargs={})]
        ),
        ChatMessage(role="tool", content="Lima", additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role="assistant", content="Lima is the capital of Peru."),
        ChatMessage(role="user", content="What is my cat called?"),
    ]


def test_select_originals_returns_the_callers_objects_by_turn(hashing_embedder):
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    first = _history()
    converted = to_messages(first)
    context = build_context(strategy, converted, query="Peru capital")
    selected = select_originals(context, first)
    assert all(any(s is o for o in first) for s in selected)
    assert selected[0] is first[0] and selected[-1] is first[-1]
    # the whole tool turn comes back: user, tool call, tool result, answer
    assert first[3] in selected and first[4] in selected and first[5] in selected and first[6] in selected

    # a second call with new (equal) objects: the strategy keeps the turns it cached, but the
    # objects returned are the ones passed in now
    second = _history()
    converted2 = to_messages(second)
    context2 = build_context(strategy, converted2, query="Peru capital")
    selected2 = select_originals(context2, second)
    assert [id(m) for m in selected2] == [id(second[first.index(m)]) for m in selected]


def select_originals(context, originals, codec=CODEC):
    """The caller's objects for ``context``, mapped as ``Conversation.select`` maps them.

    The history is read by :class:`ConvertedHistory` (grouped into turns) and mapped back by
    :meth:`ctxmgmt.session.codec.Codec.originals`, the one place a context becomes originals.
    """
    reading = ConvertedHistory(codec.to_core, codec.snapshot).read(originals)
    return codec.originals(context, reading.system_originals, reading.turn_originals)


def _context(converted: list[Message], *blocks: Block) -> Context:
    """A context of the history's system message (``converted[0]``), then ``blocks``."""
    return Context(query="q", blocks=[Block("system", messages=(converted[0],)), *blocks])


def test_select_originals_text_blocks_become_framed_user_messages():
    history = _history()
    converted = to_messages(history)
    context = _context(
        converted,
        Block("summary", turns=(0,), text="The user has a cat named Miso."),
        Block("turns", turns=(1,), messages=converted[3:7]),
        Block("current", turns=(2,), messages=(converted[7],)),
    )
    selected = select_originals(context, history)
    assert selected[0] is history[0]
    assert selected[1].role == MessageRole.USER  # never system by default (ctxmgmt.messages.framing)
    assert selected[1].content == frame_memory("The user has a cat named Miso.")
    assistant = Block("summary", text="The user has a cat named Miso.", role="assistant")
    assert CODEC.text_block(assistant)[0].role == MessageRole.ASSISTANT
    assert selected[2:] == history[3:]
    assert all(a is b for a, b in zip(selected[2:], history[3:], strict=True))


def test_render_context():
    history = _history()
    converted = to_messages(history)
    context = _context(
        converted,
        Block("turns", turns=(0,), messages=converted[1:3]),
        Block("summary", text="A summary."),
        Block("current", turns=(2,), messages=(converted[7],)),
    )
    text = render_context(context)
    assert text == (
        "user: I adopted a cat named Miso.\nassistant: Miso is a lovely name for a cat.\n\nA summary."
    )
    assert render_context(context, include_current=True).endswith("user: What is my cat called?")
