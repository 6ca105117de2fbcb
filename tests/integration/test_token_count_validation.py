"""Every token count and every budget is checked, on every call and every surface (issue 33, item 16).

The start-up check tries a counter on four texts only. A counter that passes it and later
returns negatives let ACM send 41 messages under ``max_tokens=400``; NaN raised a raw
``ValueError`` and a failing counter a raw ``RuntimeError``. Every count is now checked where
it is used (:class:`ctxmgmt.components.tokens.CachedTokenCounter`): a count that is not a finite
number >= 0, or a counter that raises, is a :class:`~ctxmgmt.components.tokens.TokenCountError`
(a ``ComponentError``) naming the counter and the text, and nothing is sent. Budgets
(``token_limit``, ``max_token_limit``, ``max_tokens``) are a positive int or None on every class,
LlamaIndex's pydantic fields included: ``True`` is no longer read as 1 and NaN is a
``ConfigurationError``, as on the selectors.

Through LangChain ``create_agent`` (a fake chat model recording what it receives), the LangChain
classic memories and selectors, and LlamaIndex chat memory ``get`` and ``Memory`` blocks.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import ComponentError, ConfigurationError, CtxMgmtError
from ctxmgmt.components.tokens import PROBE_TEXT, CachedTokenCounter, TokenCountError, check_token_counter
from langchain_ctxmgmt.testing import RecordingChatModel
from tests.integration.test_llamaindex_engines import memory_with_block

TRIGGER = "boat"
"""A word no probe text of the start-up check holds: the counters below misbehave on it."""
assert TRIGGER not in PROBE_TEXT


def words(text: str) -> int:
    return len(text.split()) + len(text) // 8


def negative(text: str) -> int:
    return -1000 if TRIGGER in text else words(text)


def nan(text: str) -> float:
    return math.nan if TRIGGER in text else float(words(text))


def raising(text: str) -> int:
    if TRIGGER in text:
        raise RuntimeError("tokenizer service unavailable")
    return words(text)


def huge_float(text: str) -> float:
    return math.inf if TRIGGER in text else float(words(text))


def a_string(text: str) -> Any:
    return "12" if TRIGGER in text else words(text)


BAD_COUNTERS = {"negative": negative, "nan": nan, "raising": raising, "inf": huge_float, "str": a_string}


def lc_history(turns: int = 20) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(turns):
        out += [HumanMessage(f"I looked at boat number {i} today."), AIMessage(f"Noted boat {i}.")]
    return out


@pytest.mark.parametrize("kind", list(BAD_COUNTERS))
def test_the_startup_check_cannot_see_these_counters(kind):
    assert check_token_counter(lc.ACMTieredSelector(token_counter=BAD_COUNTERS[kind])._counter) is not None


@pytest.mark.parametrize("kind", list(BAD_COUNTERS))
@pytest.mark.parametrize("middleware", [lc.ACMTieredMiddleware, lc.SWinSummaryMiddleware])
def test_langchain_agent_refuses_a_bad_count_and_sends_nothing(middleware, kind):
    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, [], middleware=[middleware(token_counter=BAD_COUNTERS[kind], max_tokens=400)])
    with pytest.raises(TokenCountError) as caught:
        agent.invoke({"messages": [*lc_history(), HumanMessage("Which boat did I see first?")]})
    assert isinstance(caught.value, ComponentError) and isinstance(caught.value, CtxMgmtError)
    assert BAD_COUNTERS[kind].__name__ in str(caught.value)  # names the counter
    assert model.received == []  # before: 41 messages sent under max_tokens=400 (negative counts)
    if kind == "raising":
        assert isinstance(caught.value.__cause__, RuntimeError)


@pytest.mark.model  # a middleware with its default embedder (MiniLM)
def test_langchain_agent_with_a_good_counter_stays_within_the_budget():
    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, [], middleware=[lc.ACMTieredMiddleware(token_counter=words, max_tokens=400)])
    agent.invoke({"messages": [*lc_history(), HumanMessage("Which boat did I see first?")]})
    (received,) = model.received
    assert len(received) < 41


@pytest.mark.parametrize("kind", list(BAD_COUNTERS))
def test_langchain_classic_memory_and_selector_refuse_a_bad_count(kind):
    memory = lc.ACMTieredBuffer(token_counter=BAD_COUNTERS[kind], max_token_limit=400)
    with pytest.raises(TokenCountError):
        for i in range(10):
            memory.save_context({"input": f"I looked at boat number {i}."}, {"output": "Noted."})
        memory.load_memory_variables({"input": "Which boat?"})
    selector = lc.ACMTieredSelector(token_counter=BAD_COUNTERS[kind], max_tokens=400)
    with pytest.raises(TokenCountError):
        selector.invoke([*lc_history(), HumanMessage("Which boat did I see first?")])


def li_history(turns: int = 20) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(turns):
        out += [
            ChatMessage(role=MessageRole.USER, content=f"I looked at boat number {i} today."),
            ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted boat {i}."),
        ]
    return out


@pytest.mark.parametrize("kind", list(BAD_COUNTERS))
@pytest.mark.parametrize("memory_class", [li.ACMTieredBuffer, li.SWinSummaryBuffer])
def test_llamaindex_chat_memory_get_refuses_a_bad_count(memory_class, kind):
    memory = memory_class.from_defaults(
        chat_history=li_history(), token_counter=BAD_COUNTERS[kind], token_limit=400
    )
    with pytest.raises(TokenCountError):
        memory.get("Which boat did I see first?")


@pytest.mark.parametrize("kind", ["negative", "nan", "raising"])
def test_llamaindex_memory_block_with_a_bad_count_contributes_nothing(kind, caplog):
    """A block is isolated inside ``Memory`` (issue 33 item 12): the bad count is logged as a
    ``TokenCountError`` and the block sends nothing; ``Memory``'s own messages still go."""
    block = li.SWinSummaryBlock(token_counter=BAD_COUNTERS[kind])
    memory = memory_with_block(block)  # 400 tokens: the older turns are flushed to the block

    async def run() -> Any:
        await memory.aput_messages(li_history(40))
        await memory.aput(ChatMessage(role="user", content="Which boat did I see first?"))
        return await memory.aget()

    with caplog.at_level("WARNING"):
        sent = asyncio.run(run())
    assert any("TokenCountError" in r.getMessage() for r in caplog.records)
    assert sent and str(sent[-1].content) == "Which boat did I see first?"
    assert "boat number 0 " not in " ".join(str(m.content) for m in sent)  # nothing from the block


def test_a_counter_object_is_checked_on_every_count():
    class Drifting:
        media_tokens = None

        def __init__(self) -> None:
            self.calls = 0

        def count(self, text: str) -> int:
            self.calls += 1
            return words(text) if self.calls < 5 else -3

    counter = CachedTokenCounter(Drifting())
    assert [counter.count(t) for t in ("a", "b c", "d", "e")] == [1, 2, 1, 1]
    with pytest.raises(TokenCountError, match="finite number >= 0"):
        counter.count("f")
    assert counter.count("a") == 1  # good counts stay cached; the bad one was not


def test_media_estimates_of_a_counter_are_checked():
    from ctxmgmt import Message
    from ctxmgmt.components.budget import message_tokens

    class Media:
        media_tokens = {"image": -500}

        def count(self, text: str) -> int:
            return words(text)

    with pytest.raises(TokenCountError):
        message_tokens(CachedTokenCounter(Media()), Message("user", "look", media=("image",)))


# -- budgets: one rule on every surface -----------------------------------------------------------

BAD_BUDGETS = [True, False, math.nan, math.inf, 2.5, -3, 0, "100", "4000"]


def _budget_classes() -> list[tuple[Any, str]]:
    out = []
    for module in (lc, li):
        for name in sorted(module.__all__):
            cls = getattr(module, name)
            if not inspect.isclass(cls) or inspect.isabstract(cls) or name.startswith("Strategy"):
                continue
            fields = set(getattr(cls, "model_fields", {}) or {}) | set(inspect.signature(cls).parameters)
            for budget in ("token_limit", "max_token_limit", "max_tokens"):
                if budget in fields:
                    out.append((cls, budget))
    return out


BUDGET_CLASSES = _budget_classes()


def test_every_surface_is_covered():
    names = {cls.__name__ for cls, _ in BUDGET_CLASSES}
    assert len(BUDGET_CLASSES) >= 25
    assert {"KadaneDialMemory", "SWinSummaryBlock", "TopicThreadSelector", "DiscourseTreeMiddleware"} <= names


@pytest.mark.parametrize("value", BAD_BUDGETS, ids=repr)
@pytest.mark.parametrize(("cls", "budget"), BUDGET_CLASSES, ids=lambda v: getattr(v, "__name__", v))
def test_every_budget_parameter_refuses_what_is_not_a_positive_int(cls, budget, value):
    with pytest.raises(ConfigurationError, match=budget):
        cls(**{budget: value})
    if hasattr(cls, "from_defaults") and budget == "token_limit" and "Block" not in cls.__name__:
        with pytest.raises(ConfigurationError, match=budget):
            cls.from_defaults(token_limit=value)


@pytest.mark.parametrize(("cls", "budget"), BUDGET_CLASSES, ids=lambda v: getattr(v, "__name__", v))
def test_every_budget_parameter_takes_a_positive_int(cls, budget):
    assert getattr(cls(**{budget: 4000}), budget) == 4000
