"""Image-bearing conversations through every middleware and every ``Memory`` block.

A 50-turn conversation with images (and one image-only message, one PDF, one tool-call turn)
runs through ``create_agent`` + each of the five middlewares and through LlamaIndex ``Memory``
+ each of the five blocks: nothing raises, the model receives the media of every turn that is
selected (LangChain: the very same block objects), budgets count the media, and the history
is unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, DocumentBlock, ImageBlock, MessageRole, TextBlock

import langchain_ctxmgmt as lc
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.budget import IMAGE_TOKENS
from langchain_ctxmgmt import (
    ACMTieredMiddleware,
    DiscourseTreeMiddleware,
    KadaneDialMiddleware,
    SWinSummaryMiddleware,
    TopicThreadMiddleware,
)
from llamaindex_ctxmgmt import (
    ACMTieredBlock,
    DiscourseTreeBlock,
    KadaneDialBlock,
    SWinSummaryBlock,
    TopicThreadBlock,
)
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.integration.test_langchain_agent import (
    SYSTEM_PROMPT,
    get_weather,
    recording_model,
    sent_turn_indices,
    turns_of,
    weather_turn,
)
from tests.integration.test_llamaindex_engines import WeatherLLM, memory_with_block

TURNS = 50
LIGHTHOUSE = 20  # the turn the question is about (it carries an image)
IMAGE_ONLY = 9  # a user message that is only an image
PDF = 13  # a user message with a PDF
TOOL = 31  # a tool-call turn
SUBJECTS = [
    "sourdough loaf",
    "garden tomatoes",
    "bicycle repair",
    "knitting pattern",
    "chess opening",
    "mountain hike",
    "guitar chords",
    "tax receipt",
    "birthday cake",
    "kitchen shelf",
]
QUESTION = "What colour was the lighthouse at Cape Point in the photo I sent?"


def _user_text(i: int) -> str:
    if i == LIGHTHOUSE:
        return "Here is a photo of the red lighthouse at Cape Point that I visited."
    return f"Turn {i}: a question about my {SUBJECTS[i % len(SUBJECTS)]}, item {i}."


def _answer(i: int) -> str:
    if i == LIGHTHOUSE:
        return "The red lighthouse at Cape Point looks stunning against the sea."
    if i == IMAGE_ONLY:
        return "That picture shows a black cat asleep on a windowsill."
    return f"Answer {i} about the {SUBJECTS[i % len(SUBJECTS)]}."


def _has_image(i: int) -> bool:
    return i % 2 == 0 or i == IMAGE_ONLY


# -- LangChain --------------------------------------------------------------------------------


def lc_conversation() -> list[BaseMessage]:
    """50 completed turns; even turns carry an image, one is image-only, one has a PDF."""
    messages: list[BaseMessage] = []
    for i in range(TURNS):
        if i == TOOL:
            messages.extend(weather_turn("w"))
            continue
        image = {"type": "image", "url": f"https://example.com/photo-{i}.png", "mime_type": "image/png"}
        if i == IMAGE_ONLY:
            content: Any = [image]
        elif i == PDF:
            pdf = {"type": "file", "url": "https://example.com/receipt.pdf", "mime_type": "application/pdf"}
            content = [{"type": "text", "text": _user_text(i)}, pdf]
        elif _has_image(i):
            content = [{"type": "text", "text": _user_text(i)}, image]
        else:
            content = _user_text(i)
        messages.append(HumanMessage(content=content, id=f"t{i}-h"))
        messages.append(AIMessage(_answer(i), id=f"t{i}-a"))
    return messages


def _media_blocks(message: BaseMessage) -> list[Any]:
    content = message.content
    if isinstance(content, str):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in ("image", "file")]


MIDDLEWARES = {
    "kadanedial": lambda: KadaneDialMiddleware(embedder=HashingEmbedder(), max_tokens=3000),
    "swin": lambda: SWinSummaryMiddleware(max_tokens=3000),
    "discourse_tree": lambda: DiscourseTreeMiddleware(embedder=HashingEmbedder(), max_tokens=3000),
    "acm": lambda: ACMTieredMiddleware(entity_extractor=CapitalisedExtractor(), max_tokens=3000),
    "topic_thread": lambda: TopicThreadMiddleware(embedder=HashingEmbedder(), max_tokens=3000),
}


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("name", list(MIDDLEWARES))
async def test_image_conversation_through_every_middleware(name, run_async):
    middleware = MIDDLEWARES[name]()
    past = lc_conversation()
    question_image = {"type": "image", "url": "https://example.com/question.png", "mime_type": "image/png"}
    question = HumanMessage(content=[{"type": "text", "text": QUESTION}, question_image], id="q")
    full = [*past, question]
    snapshot = copy.deepcopy(full)
    media_of = {m.id: _media_blocks(m) for m in full}
    model = recording_model(["It was red."])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    state = {"messages": full}
    result = await agent.ainvoke(state) if run_async else agent.invoke(state)

    (received,) = model.received
    assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
    assert received[-1].id == "q"
    originals = {m.id: m for m in full}
    sent = [m for m in received if m.id in originals]
    # every selected turn arrives whole, with its media: the exact block objects of the history
    for message in sent:
        blocks = _media_blocks(message)
        assert len(blocks) == len(media_of[message.id])
        assert all(b is o for b, o in zip(blocks, media_of[message.id], strict=True)), message.id
        assert message.content == originals[message.id].content
    sent_turns = sent_turn_indices(received, full)
    image_turns = [t for t in sent_turns[:-1] if _media_blocks(turns_of(full)[t][0])]
    assert image_turns, f"{name}: no image-bearing past turn was sent ({sent_turns})"
    assert _media_blocks(received[-1])[0] is media_of["q"][0]
    # budgets count the media (765 tokens an image by default), so the selection stays within it
    context = middleware.last_context
    assert context is not None and context.tokens <= 3000
    assert context.history_tokens > 25 * IMAGE_TOKENS
    if name == "kadanedial":
        assert LIGHTHOUSE in sent_turns  # the turn the question is about, with its photo
        assert turns_of(full)[LIGHTHOUSE][0].id == f"t{LIGHTHOUSE}-h"
    # the history is unchanged: same messages, same content, plus the answer
    assert result["messages"][: len(full)] == snapshot
    assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]
    assert result["messages"][-1].content == "It was red."


SELECTORS = {
    "kadanedial": lambda: lc.KadaneDialSelector(embedder=HashingEmbedder(), max_tokens=3000),
    "swin": lambda: lc.SWinSummarySelector(max_tokens=3000),
    "discourse_tree": lambda: lc.DiscourseTreeSelector(embedder=HashingEmbedder(), max_tokens=3000),
    "acm": lambda: lc.ACMTieredSelector(entity_extractor=CapitalisedExtractor(), max_tokens=3000),
    "topic_thread": lambda: lc.TopicThreadSelector(embedder=HashingEmbedder(), max_tokens=3000),
}


@pytest.mark.parametrize("name", list(SELECTORS))
async def test_image_conversation_through_every_selector_in_a_chain(name):
    selector = SELECTORS[name]()
    question_image = {"type": "image", "url": "https://example.com/question.png", "mime_type": "image/png"}
    question = HumanMessage(content=[{"type": "text", "text": QUESTION}, question_image], id="q")
    full = [SystemMessage(SYSTEM_PROMPT), *lc_conversation(), question]
    media_of = {m.id: _media_blocks(m) for m in full}
    model = recording_model(["It was red."])
    answer = await (selector | model).ainvoke(full)
    (received,) = model.received
    assert received[0] is full[0] and received[-1] is question and answer.content == "It was red."
    originals = {m.id: m for m in full if m.id}
    sent = [m for m in received if m.id in originals]
    for message in sent:  # the caller's own objects, media blocks included
        assert message is originals[message.id]
        assert all(b is o for b, o in zip(_media_blocks(message), media_of[message.id], strict=True))
    assert any(_media_blocks(m) for m in sent[:-1]), f"{name}: no image-bearing past turn was sent"
    assert selector.last_context is not None and selector.last_context.tokens <= 3000


# -- LlamaIndex -------------------------------------------------------------------------------


def li_conversation() -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for i in range(TURNS):
        if i == TOOL:
            messages.extend(
                [
                    ChatMessage(role="user", content=_user_text(i)),
                    ChatMessage(
                        role="assistant",
                        content="",
                        additional_kwargs={"tool_calls": [{"id": "c1", "name": "lookup", "args": {}}]},
                    ),
                    ChatMessage(
                        role="tool", content="lookup result", additional_kwargs={"tool_call_id": "c1"}
                    ),
                    ChatMessage(role="assistant", content=_answer(i)),
                ]
            )
            continue
        image = ImageBlock(url=f"https://example.com/photo-{i}.png")
        if i == IMAGE_ONLY:
            blocks: list[Any] = [image]
        elif i == PDF:
            blocks = [TextBlock(text=_user_text(i)), DocumentBlock(url="https://example.com/receipt.pdf")]
        elif _has_image(i):
            blocks = [TextBlock(text=_user_text(i)), image]
        else:
            blocks = [TextBlock(text=_user_text(i))]
        messages.append(ChatMessage(role="user", blocks=blocks))
        messages.append(ChatMessage(role="assistant", content=_answer(i)))
    return messages


BLOCKS = {
    "kadanedial": lambda **kw: KadaneDialBlock(embed_model=HashingEmbedder(), **kw),
    "swin": lambda **kw: SWinSummaryBlock(**kw),
    "discourse_tree": lambda **kw: DiscourseTreeBlock(embed_model=HashingEmbedder(), **kw),
    # 2100 tokens: the recalled lighthouse turn (800 tokens with its image) fits beside the framed
    # tiers (ctxmgmt.messages.framing)
    "acm": lambda **kw: ACMTieredBlock(token_limit=2100, entity_extractor=CapitalisedExtractor(), **kw),
    "topic_thread": lambda **kw: TopicThreadBlock(embed_model=HashingEmbedder(), **kw),
}


def _image_urls(message: ChatMessage) -> list[str]:
    return [str(b.url) for b in message.blocks if isinstance(b, ImageBlock)]


@pytest.mark.parametrize("output", ["messages", "text"])
@pytest.mark.parametrize("name", list(BLOCKS))
async def test_image_conversation_through_memory_and_every_block(name, output):
    block = BLOCKS[name](output=output)
    memory = memory_with_block(
        block, session_id="s", token_limit=8000, chat_history_token_ratio=0.25, token_flush_size=500
    )
    history = li_conversation()
    snapshot = [m.model_dump() for m in history]
    await memory.aput_messages(history)  # flushes most turns into the block: no exception
    flushed = block.stored_messages("s")
    assert len(flushed) > 40
    assert sum(len(_image_urls(m)) for m in flushed) > 15

    by_text = {m.content: m for m in history if m.role == MessageRole.USER and m.content}
    llm = WeatherLLM()
    agent = FunctionAgent(tools=[], llm=llm, system_prompt=SYSTEM_PROMPT)
    question = ChatMessage(
        role="user", blocks=[TextBlock(text=QUESTION), ImageBlock(url="https://example.com/question.png")]
    )
    await agent.run(user_msg=question, memory=memory)

    received = llm.received[0]
    assert _image_urls(received[-1]) == ["https://example.com/question.png"]
    # Memory's queue (the newest turns) reaches the model with its images too
    queued = [m for m in received if m.role == MessageRole.USER and m.content in by_text]
    assert any(_image_urls(m) for m in queued)
    flushed_texts = {m.content for m in flushed}
    from_block = [m for m in received[:-1] if m.content in by_text and m.content in flushed_texts]
    if output == "messages":
        # turns the block selected arrive whole, with their images (Memory keeps its history in
        # its SQL chat store, so these are equal copies of the caller's blocks, not the objects)
        assert any(_image_urls(m) for m in from_block), f"{name}: no flushed image turn reached the model"
        for message in from_block:
            assert _image_urls(message) == _image_urls(by_text[message.content])
    else:
        # a text block: the transcript marks the media of the turns it shows
        system = "\n".join(m.content or "" for m in received if m.role == MessageRole.SYSTEM)
        assert f"<{block.name}>" in system, system[:300]
        assert "[image]" in system, system
    # the history is unchanged (the caller's objects, and Memory's record of them)
    assert [m.model_dump() for m in history] == snapshot
    everything = await memory.aget_all()  # Memory's record: archived (flushed) and active messages
    assert [m.content for m in everything][: len(history)] == [m.content for m in history]
    assert [_image_urls(m) for m in everything][: len(history)] == [_image_urls(m) for m in history]
    assert [m.content for m in flushed] == [m.content for m in history[: len(flushed)]]


async def test_an_unusable_message_never_aborts_a_memory_flush():
    block = KadaneDialBlock(embed_model=HashingEmbedder())
    memory = memory_with_block(
        block, session_id="s", token_limit=2000, chat_history_token_ratio=0.25, token_flush_size=200
    )
    history = li_conversation()[:20]
    history.insert(4, ChatMessage(role="user", blocks=[]))  # no text, no media: unusable
    with pytest.warns(UserWarning, match="skipped a flushed message"):
        await memory.aput_messages(history)
    flushed = block.stored_messages("s")
    assert flushed and all(m.blocks for m in flushed)
    assert await memory.aget() is not None
