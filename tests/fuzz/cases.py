"""Hypothesis strategies for hostile conversations, in LangChain and LlamaIndex form.

Texts mix plain words (so selections do happen), arbitrary code points, lone surrogates,
control characters and empty or blank strings; a few cases get one huge text (see
:func:`with_huge_text`). Content is a string or a list of content blocks, nested lists
included; messages come with unknown roles, tool calls with arbitrary JSON arguments, and
blocks no framework validates. What a framework's own constructor rejects is built with
``model_construct`` instead, as an object loaded from a store or made by other code would be.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages import ChatMessage as LCChatMessage
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
from pydantic import ValidationError

WORDS = ["cat", "ill", "vet", "pasta", "sauce", "car", "engine", "garden", "tomato", "python", "Paris"]
CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\x85", "\t", "\r", "\n", "\u2028", "\u200b", "\ufeff", "\ufffe"]
HUGE_CHARS = 200_000
"""Length of the huge text a few cases carry (characters)."""

any_char = st.one_of(
    st.characters(codec=None, exclude_categories=()),  # any code point, astral planes included
    st.characters(categories=["Cs"]),  # lone surrogates: UTF-8 cannot encode them
    st.sampled_from(CONTROLS),
)
piece = st.one_of(
    st.sampled_from(WORDS).map(lambda w: w + " "),
    st.text(any_char, max_size=6),
    st.sampled_from(["", " ", "\n\n", "\ud83d", "\ude00", "\ud83d\ude00", "\U0001f600", "e\u0301"]),
)
texts = st.lists(piece, max_size=8).map("".join)
"""Short hostile texts: words, arbitrary code points, surrogates, controls; often empty or blank."""
worded_texts = st.builds(lambda word, rest: word + rest, st.sampled_from(WORDS), texts)
"""Hostile texts that start with a word, so never blank."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
"""JSON-like values (no NaN, so that equal copies compare equal)."""


def with_huge_text(text: str) -> str:
    """``text`` repeated (or ``"x"``) up to :data:`HUGE_CHARS` characters."""
    seed = text or "x"
    return (seed * (HUGE_CHARS // len(seed) + 1))[:HUGE_CHARS]


def _build(cls: type[Any], **fields: Any) -> Any:
    """``cls(**fields)``, or ``cls.model_construct(**fields)`` when validation rejects them."""
    try:
        return cls(**fields)
    except (ValidationError, ValueError, TypeError):
        return cls.model_construct(**fields)


# -- LangChain ------------------------------------------------------------------------------
_media_url = st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo=", ""])
lc_leaf_blocks = st.one_of(
    texts,
    texts.map(lambda t: {"type": "text", "text": t}),
    _media_url.map(lambda u: {"type": "image_url", "image_url": {"url": u}}),
    _media_url.map(lambda u: {"type": "image", "url": u, "mime_type": "image/png"}),
    st.just({"type": "file", "url": "https://example.com/r.pdf", "mime_type": "application/pdf"}),
    texts.map(lambda m: {"type": "media", "mime_type": m, "data": "AAAA"}),
    st.sampled_from(["tool_use", "reasoning", "thinking", "non_standard"]).map(
        lambda t: {"type": t, "id": "x"}
    ),
    texts.map(lambda t: {"type": t}),  # unknown block type
    json_values.map(lambda v: {"type": "text", "text": v}),  # text that is not a string
    st.just({}),
    st.integers() | st.none(),
)
lc_blocks = st.recursive(lc_leaf_blocks, lambda inner: st.lists(inner, max_size=3), max_leaves=8)
lc_content = st.one_of(texts, st.lists(lc_blocks, max_size=4), st.none(), json_values)
"""LangChain message content: a string, a (nested) list of blocks, None or any JSON value."""

tool_calls = st.lists(
    st.fixed_dictionaries(
        {"name": texts, "args": st.dictionaries(texts, json_values, max_size=3), "id": texts | st.none()}
    ).map(lambda call: {**call, "type": "tool_call"}),
    max_size=2,
)


lc_valid_blocks = st.one_of(
    worded_texts.map(lambda t: {"type": "text", "text": t}),
    _media_url.map(lambda u: {"type": "image", "url": u, "mime_type": "image/png"}),
    st.just({"type": "file", "url": "https://example.com/r.pdf", "mime_type": "application/pdf"}),
)


@st.composite
def lc_messages(draw: st.DrawFn, usable: bool = False) -> BaseMessage:
    """One LangChain message of any kind, valid or not; ``usable``: one ctxmgmt accepts."""
    if usable:
        kind = draw(st.sampled_from(["human", "human", "ai", "ai", "tool", "system"]))
        content: Any = draw(worded_texts | st.lists(lc_valid_blocks, min_size=1, max_size=3))
    else:
        kind = draw(st.sampled_from(["human", "human", "ai", "ai", "tool", "system", "chat"]))
        content = draw(lc_content)
    name = draw(st.none() | texts)
    if kind == "human":
        return _build(HumanMessage, content=content, name=name)
    if kind == "ai":
        return _build(AIMessage, content=content, name=name, tool_calls=draw(tool_calls))
    if kind == "tool":
        return _build(ToolMessage, content=content, tool_call_id=draw(texts))
    if kind == "system":
        return _build(SystemMessage, content=content)
    return _build(LCChatMessage, content=content, role=draw(texts))  # unknown role


lc_histories = st.lists(lc_messages(), max_size=8)


# -- LlamaIndex -----------------------------------------------------------------------------
li_leaf_blocks = st.one_of(
    texts.map(lambda t: _build(TextBlock, text=t)),
    st.just(ImageBlock(url="https://example.com/a.png")),
    st.just(DocumentBlock(url="https://example.com/r.pdf")),
    st.just(AudioBlock(url="https://example.com/a.mp3")),
    st.just(VideoBlock(url="https://example.com/v.mp4")),
    texts.map(lambda t: _build(ThinkingBlock, content=t)),
    st.builds(
        lambda name, kwargs, call_id: _build(
            ToolCallBlock, tool_name=name, tool_kwargs=kwargs, tool_call_id=call_id
        ),
        texts,
        st.dictionaries(texts, json_values, max_size=2) | texts,
        texts | st.none(),
    ),
    st.just(CachePoint.model_construct(block_type="cache")),
    json_values.map(lambda v: TextBlock.model_construct(text=v)),  # text that is not a string
    json_values,  # not a block at all
)
li_blocks = st.recursive(
    li_leaf_blocks,
    lambda inner: st.one_of(
        st.builds(
            lambda parts, title: _build(CitableBlock, content=parts, title=title, source="s"),
            st.lists(inner, max_size=3),
            texts,
        ),
        inner.map(lambda part: _build(CitationBlock, cited_content=part, source="s", title="t")),
    ),
    max_leaves=6,
)
li_roles = st.one_of(st.sampled_from(list(MessageRole)), texts)
openai_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": texts,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": texts, "arguments": texts}),
        }
    )
    | json_values,
    max_size=2,
)
li_kwargs = st.fixed_dictionaries(
    {},
    optional={"tool_calls": openai_calls | json_values, "tool_call_id": json_values, "name": json_values},
)


li_valid_blocks = st.one_of(
    worded_texts.map(lambda t: TextBlock(text=t)),
    st.just(ImageBlock(url="https://example.com/a.png")),
    st.just(DocumentBlock(url="https://example.com/r.pdf")),
    texts.map(lambda t: _build(ThinkingBlock, content=t)),
)


@st.composite
def li_messages(draw: st.DrawFn, usable: bool = False) -> ChatMessage:
    """One LlamaIndex ``ChatMessage``, valid or not; ``usable``: one ctxmgmt accepts."""
    if usable:
        role: Any = draw(st.sampled_from([MessageRole.USER, MessageRole.USER, MessageRole.ASSISTANT]))
        blocks = draw(st.lists(li_valid_blocks, max_size=3).map(lambda b: [TextBlock(text="cat"), *b]))
        return ChatMessage(role=role, blocks=blocks)
    role = draw(li_roles)
    blocks = draw(st.lists(li_blocks, max_size=4))
    kwargs = draw(li_kwargs)
    if draw(st.booleans()):
        content = draw(texts)
        return _build(ChatMessage, role=role, content=content, additional_kwargs=kwargs)
    return _build(ChatMessage, role=role, blocks=blocks, additional_kwargs=kwargs)


li_histories = st.lists(li_messages(), max_size=8)
li_inputs = st.one_of(
    st.none(),
    texts,
    li_messages(),
    texts.map(lambda t: QueryBundle(query_str=t)),
    json_values,
)
"""What a caller may pass as ``Memory.get(input=...)``."""


T = TypeVar("T")


def sample(strategy: st.SearchStrategy[T], size: int) -> list[T]:
    """``size`` values of ``strategy``, the same on every run (Hypothesis, derandomized).

    Building a hostile message costs Hypothesis about as much as running a case, so the fuzz
    tests draw their histories from pools made once with this, and generate per case only which
    pool entries to combine, in which order, and the small inputs.
    """
    values: list[T] = []

    @settings(
        derandomize=True,
        database=None,
        max_examples=size,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        values.append(value)

    collect()
    return values


POOL_SIZE = 600
"""Messages per framework pool (and texts, contents, inputs) the fuzz cases combine."""
USABLE = 400
"""The first this many messages of a pool are usable ones (``usable=True``), the rest anything."""


@dataclass(frozen=True)
class Pools:
    """Hostile values, made once (:func:`pools`); ``*_copies`` are deep copies taken right away."""

    texts: list[str]
    lc_messages: list[BaseMessage]
    lc_copies: list[BaseMessage]
    lc_contents: list[Any]
    li_messages: list[ChatMessage]
    li_copies: list[ChatMessage]
    li_inputs: list[Any]


@functools.cache
def pools() -> Pools:
    """The pools of the fuzz tests (about 30 s to build on one core; once per process)."""
    lc = sample(lc_messages(usable=True), USABLE) + sample(lc_messages(), POOL_SIZE - USABLE)
    li = sample(li_messages(usable=True), USABLE) + sample(li_messages(), POOL_SIZE - USABLE)
    return Pools(
        texts=sample(texts, POOL_SIZE),
        lc_messages=lc,
        lc_copies=copy.deepcopy(lc),
        lc_contents=sample(lc_content, POOL_SIZE // 2),
        li_messages=li,
        li_copies=copy.deepcopy(li),
        li_inputs=sample(li_inputs, POOL_SIZE // 2),
    )
