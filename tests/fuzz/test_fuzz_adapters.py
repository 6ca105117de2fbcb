"""Fuzzing both adapters with hostile conversations (issue 14, item 1).

Every adapter entry point gets generated histories and inputs (:mod:`tests.fuzz.cases`):
arbitrary code points, lone surrogates, control characters, empty and huge texts, nested
content blocks, unknown roles and blocks, tool calls with arbitrary arguments. Whatever comes
in, the outcome is a selection or a ``CtxMgmtError`` (any other exception fails the test and
Hypothesis shrinks it to a minimal history), and the raw history (the framework's own
messages) is unchanged: the same objects, equal to deep copies taken before the call.

Four adapter kinds, 10,000+ seeded cases each (``derandomize=True``: the same cases on every
run) with a hashing embedder, over the five strategies in turn: the LangChain middleware
(``wrap_model_call``), the LangChain classic memory (``save_context`` and
``load_memory_variables``), the LlamaIndex memory (``put`` and ``get``) and the LlamaIndex
memory block (``aput``/``aget``/``atruncate``, as ``Memory`` calls them). Fewer cases run
through LlamaIndex ``Memory`` itself and with the bundled MiniLM embedder.

A case is one generated history (up to 8 messages drawn from a pool of 600 hostile messages
per framework, in any order, repeats allowed) and generated inputs (query, new message,
budget already used...); every :data:`HUGE_EVERY`-th case also holds a 200,000-character text.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import CtxMgmtError
from ctxmgmt.app.testing import HashingEmbedder
from tests.adapters.test_acm_contract import CapitalisedExtractor
from tests.fuzz.cases import POOL_SIZE, USABLE, Pools, pools, with_huge_text
from tests.integration.test_llamaindex_engines import memory_with_block

CASES = int(os.environ.get("CTXMGMT_FUZZ_CASES", "10000"))
"""Generated cases per adapter kind with the hashing embedder (``$CTXMGMT_FUZZ_CASES`` to fuzz longer)."""
MINILM_CASES = 100
"""Generated cases per adapter kind with the bundled MiniLM embedder."""
MEMORY_CASES = 150
"""Generated cases through LlamaIndex ``Memory`` (SQL chat store, flushes into the block)."""
HUGE_EVERY = 500
"""Every this many cases, one message of the history is a 200,000-character text."""
BUDGET = 600
"""Token budget of every adapter (small, so budgets bind and some cases cannot fit)."""

STRATEGIES = ("kadanedial", "swin", "acm", "discourse_tree", "topic_thread")
EMBEDDING_STRATEGIES = ("kadanedial", "discourse_tree", "topic_thread")


BATCH = 10
"""Cases per Hypothesis example: drawing a batch costs Hypothesis less per case (1.3 ms instead
of 3.4 ms for a LangChain case), and the adapters see the cases of a batch one after another."""


def fuzz(cases: int, case: st.SearchStrategy[tuple[Any, ...]], one: Callable[..., None]) -> None:
    """Run ``one(*args)`` on at least ``cases`` generated ``args``, in batches of :data:`BATCH`.

    Seeded (``derandomize``: the same cases on every run), no deadline, no example database.
    """

    @settings(
        derandomize=True,
        database=None,
        max_examples=-(-cases // BATCH),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(case, min_size=BATCH, max_size=BATCH))
    def run(batch: list[tuple[Any, ...]]) -> None:
        for args in batch:
            one(*args)

    run()


def components(name: str, embedder: Any, *, embedder_name: str = "embedder") -> dict[str, Any]:
    """Fast components of strategy ``name`` (no model weights unless ``embedder`` has them)."""
    if name == "acm":
        return {"entity_extractor": CapitalisedExtractor()}
    if name == "swin":
        return {}
    return {embedder_name: embedder}


LC_MIDDLEWARE = {
    "kadanedial": lc.KadaneDialMiddleware,
    "swin": lc.SWinSummaryMiddleware,
    "acm": lc.ACMTieredMiddleware,
    "discourse_tree": lc.DiscourseTreeMiddleware,
    "topic_thread": lc.TopicThreadMiddleware,
}
LC_MEMORY = {
    "kadanedial": lc.KadaneDialMemory,
    "swin": lc.SWinSummaryBuffer,
    "acm": lc.ACMTieredBuffer,
    "discourse_tree": lc.DiscourseTreeMemory,
    "topic_thread": lc.TopicThreadMemory,
}
LI_MEMORY = {
    "kadanedial": li.KadaneDialMemory,
    "swin": li.SWinSummaryBuffer,
    "acm": li.ACMTieredBuffer,
    "discourse_tree": li.DiscourseTreeMemory,
    "topic_thread": li.TopicThreadMemory,
}
LI_BLOCK = {
    "kadanedial": li.KadaneDialBlock,
    "swin": li.SWinSummaryBlock,
    "acm": li.ACMTieredBlock,
    "discourse_tree": li.DiscourseTreeBlock,
    "topic_thread": li.TopicThreadBlock,
}


class Tally:
    """Counts cases and the outcome of every adapter call; only ctxmgmt errors are caught."""

    def __init__(self) -> None:
        self.cases = 0
        self.huge = 0
        self.outcomes: Counter[str] = Counter()

    def next_case_is_huge(self) -> bool:
        """Count a case; True for every :data:`HUGE_EVERY`-th one (it gets a huge text)."""
        self.cases += 1
        huge = self.cases % HUGE_EVERY == 0
        self.huge += huge
        return huge

    def call(self, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """(True, result) when ``fn`` returns, (False, error) on a CtxMgmtError; others propagate."""
        try:
            result = fn()
        except CtxMgmtError as exc:
            self.outcomes[type(exc).__name__] += 1
            return False, exc
        self.outcomes["selection"] += 1
        return True, result

    def check(self, cases: int) -> None:
        """Every case ran, with selections among the outcomes and the huge texts included."""
        assert self.cases >= cases, (self.cases, self.outcomes)
        assert self.huge >= cases // HUGE_EVERY
        assert self.outcomes["selection"] > cases // 10, self.outcomes


indices = st.lists(st.integers(0, USABLE - 1), max_size=8) | st.lists(
    st.integers(0, POOL_SIZE - 1), max_size=8
)
"""A history: which pool messages, in which order (repeats allowed); half of them usable only."""
pick = st.integers(0, POOL_SIZE // 2 - 1)
"""One entry of a pool of texts, contents or inputs."""


def history_of(
    chosen: Sequence[int],
    messages: Sequence[Any],
    copies: Sequence[Any],
    huge: Callable[[str], Any] | None,
    seed: str,
) -> tuple[list[Any], list[Any]]:
    """(history, deep copy of it) for pool entries ``chosen``; with ``huge``, plus a huge text."""
    history = [messages[i] for i in chosen]
    snapshot = [copies[i] for i in chosen]
    if huge is not None:
        message = huge(with_huge_text(seed))
        position = len(seed) % (len(history) + 1)
        history.insert(position, message)
        snapshot.insert(position, copy.deepcopy(message))
    return history, snapshot


def assert_unchanged(raw: Sequence[Any], objects: Sequence[Any], snapshot: Sequence[Any]) -> None:
    """``raw`` holds exactly ``objects`` (same objects, same order), equal to their deep copies."""
    assert len(raw) == len(objects)
    assert all(r is o for r, o in zip(raw, objects, strict=True))
    assert list(raw) == list(snapshot)


def run_async(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(coro)


def li_user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


@pytest.fixture(scope="module")
def pool() -> Pools:
    return pools()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for every async call of a test (cheaper than ``asyncio.run`` per case)."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


@pytest.fixture(autouse=True)
def _no_hidden_bugs() -> Iterator[None]:
    """A memory block keeps its failures from ``Memory`` (it logs them); one that is not a
    ctxmgmt error (logged with its traceback) is a bug the fuzzing must still report."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    block_logger = logging.getLogger("llamaindex_ctxmgmt._block")
    block_logger.addHandler(handler)
    try:
        yield
    finally:
        block_logger.removeHandler(handler)
    assert not [r for r in records if r.exc_info], records[:3]


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """Skipped-message warnings and pydantic's serialiser warnings about invalid content."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- LangChain: middleware --------------------------------------------------------------------
def fuzz_middleware(pool: Pools, embedder: Any, names: Sequence[str], cases: int) -> Tally:
    middlewares = {n: LC_MIDDLEWARE[n](max_tokens=BUDGET, **components(n, embedder)) for n in names}
    model = GenericFakeChatModel(messages=iter([]))
    tally = Tally()

    def one(name: str, chosen: list[int], system: int | None) -> None:
        seed = pool.texts[system or 0]
        huge = HumanMessage if tally.next_case_is_huge() else None
        history, snapshot = history_of(chosen, pool.lc_messages, pool.lc_copies, huge, seed)
        content = None if system is None else pool.lc_contents[system]
        system_message = None if content is None else SystemMessage.model_construct(content=content)
        objects = list(history)
        received: list[list[BaseMessage]] = []

        def handler(request: ModelRequest) -> AIMessage:
            received.append(list(request.messages))
            return AIMessage("ok")

        request = ModelRequest(model=model, messages=history, system_message=system_message)
        ok, _ = tally.call(lambda: middlewares[name].wrap_model_call(request, handler))
        assert_unchanged(history, objects, snapshot)
        if ok:
            (sent,) = received
            originals = {id(m) for m in objects}
            # the caller's own objects, or a new message holding text the core wrote
            assert all(id(m) in originals or isinstance(m.content, str) for m in sent)
            if objects and isinstance(objects[-1], HumanMessage):
                assert sent[-1] is objects[-1]  # the turn in progress is always sent

    fuzz(cases, st.tuples(st.sampled_from(names), indices, st.none() | pick), one)
    return tally


def test_fuzz_langchain_middleware(pool: Pools) -> None:
    fuzz_middleware(pool, HashingEmbedder(), STRATEGIES, CASES).check(CASES)


# -- LangChain: classic memory ----------------------------------------------------------------
def fuzz_classic_memory(pool: Pools, embedder: Any, names: Sequence[str], cases: int) -> Tally:
    memories = {
        (n, as_messages): LC_MEMORY[n](
            max_token_limit=BUDGET, return_messages=as_messages, **components(n, embedder)
        )
        for n in names
        for as_messages in (False, True)
    }
    tally = Tally()

    def one(
        name: str,
        as_messages: bool,
        chosen: list[int],
        user: int,
        user_is_content: bool,
        answer: int,
        query: int | None,
    ) -> None:
        huge = AIMessage if tally.next_case_is_huge() else None
        history, snapshot = history_of(chosen, pool.lc_messages, pool.lc_copies, huge, pool.texts[answer])
        memory = memories[name, as_messages]
        memory.clear()
        memory.chat_memory.messages = list(history)  # as a persisted history loads: unvalidated
        user_input = pool.lc_contents[user] if user_is_content else pool.texts[user]
        answer_text = pool.texts[answer]
        saved, _ = tally.call(lambda: memory.save_context({"input": user_input}, {"output": answer_text}))
        raw = memory.chat_memory.messages
        new = raw[len(history) :]  # the pair, if valid (indexing it may still fail on older messages)
        assert [type(m) for m in new] == ([HumanMessage, AIMessage] if saved or new else [])
        assert not new or new[-1].content == answer_text
        assert_unchanged(raw[: len(history)], history, snapshot)
        inputs = {} if query is None else {"input": pool.texts[query]}
        loaded, result = tally.call(lambda: memory.load_memory_variables(inputs))
        assert_unchanged(memory.chat_memory.messages[: len(history)], history, snapshot)
        if loaded:
            assert isinstance(result["history"], list if as_messages else str)

    case = st.tuples(
        st.sampled_from(names), st.booleans(), indices, pick, st.booleans(), pick, st.none() | pick
    )
    fuzz(cases, case, one)
    return tally


def test_fuzz_langchain_classic_memory(pool: Pools) -> None:
    fuzz_classic_memory(pool, HashingEmbedder(), STRATEGIES, CASES).check(CASES)


# -- LlamaIndex: memory -----------------------------------------------------------------------
def fuzz_llamaindex_memory(pool: Pools, embedder: Any, names: Sequence[str], cases: int) -> Tally:
    memories = {
        n: LI_MEMORY[n].from_defaults(
            token_limit=BUDGET, **components(n, embedder, embedder_name="embed_model")
        )
        for n in names
    }
    tally = Tally()

    def one(name: str, chosen: list[int], new: int, query: int, initial: int) -> None:
        huge = li_user if tally.next_case_is_huge() else None
        history, snapshot = history_of(chosen, pool.li_messages, pool.li_copies, huge, pool.texts[query])
        memory = memories[name]
        memory.reset()
        memory.chat_store.set_messages(memory.chat_store_key, list(history))  # unvalidated, as loaded
        stored = lambda: memory.chat_store.get_messages(memory.chat_store_key)  # noqa: E731
        message = pool.li_messages[new]
        put, _ = tally.call(lambda: memory.put(message))
        raw = stored()
        assert len(raw) == len(history) + put
        assert not put or raw[-1] == pool.li_copies[new]
        assert_unchanged(raw[: len(history)], history, snapshot)
        ok, selected = tally.call(
            lambda: memory.get(input=pool.li_inputs[query], initial_token_count=initial)
        )
        assert_unchanged(stored()[: len(history)], history, snapshot)
        if ok:
            everything = {id(m) for m in stored()}
            # the stored objects, or a new message holding text the core wrote
            assert all(id(m) in everything or isinstance(m.content, str) for m in selected)

    initial = st.sampled_from([0, 0, 0, 100, BUDGET + 1])
    fuzz(cases, st.tuples(st.sampled_from(names), indices, st.integers(0, POOL_SIZE - 1), pick, initial), one)
    return tally


def test_fuzz_llamaindex_memory(pool: Pools) -> None:
    fuzz_llamaindex_memory(pool, HashingEmbedder(), STRATEGIES, CASES).check(CASES)


# -- LlamaIndex: memory block -----------------------------------------------------------------
def fuzz_memory_block(
    pool: Pools, embedder: Any, names: Sequence[str], cases: int, loop: asyncio.AbstractEventLoop
) -> Tally:
    blocks = {
        (n, output): LI_BLOCK[n](
            token_limit=BUDGET, output=output, **components(n, embedder, embedder_name="embed_model")
        )
        for n in names
        for output in ("messages", "text")
    }
    tally = Tally()

    def one(name: str, output: str, chosen: list[int], current: list[int], cut: int) -> None:
        huge = li_user if tally.next_case_is_huge() else None
        history, snapshot = history_of(chosen, pool.li_messages, pool.li_copies, huge, pool.texts[cut % 300])
        asked, asked_copy = history_of(current, pool.li_messages, pool.li_copies, None, "")
        block = blocks[name, output]
        block.clear_session(None)
        both, both_copy = history + asked, snapshot + asked_copy
        objects = list(both)
        tally.call(lambda: run_async(loop, block.aput(history)))  # Memory's flush: never raises on content
        assert_unchanged(both, objects, both_copy)
        ok, content = tally.call(lambda: run_async(loop, block.aget(asked)))
        assert_unchanged(both, objects, both_copy)
        if ok and content:
            assert isinstance(content, str if output == "text" else list)
            tally.call(lambda: run_async(loop, block.atruncate(content, cut)))
            assert_unchanged(both, objects, both_copy)

    current = st.lists(st.integers(0, POOL_SIZE - 1), max_size=3)
    case = st.tuples(
        st.sampled_from(names), st.sampled_from(["messages", "text"]), indices, current, st.integers(0, 2000)
    )
    fuzz(cases, case, one)
    return tally


def test_fuzz_llamaindex_memory_block(pool: Pools, loop: asyncio.AbstractEventLoop) -> None:
    fuzz_memory_block(pool, HashingEmbedder(), STRATEGIES, CASES, loop).check(CASES)


def _framework_valid(message: ChatMessage) -> bool:
    """True when LlamaIndex itself can store ``message``.

    ``Memory``'s SQL chat store keeps messages as JSON, which fails on lone surrogates (a
    UnicodeEncodeError in pydantic) and turns a surrogate pair into the character it encodes,
    before any memory block sees the message.
    """
    try:
        return ChatMessage.model_validate_json(message.model_dump_json()) == message
    except Exception:
        return False


def test_fuzz_blocks_through_llamaindex_memory(pool: Pools, loop: asyncio.AbstractEventLoop) -> None:
    """``Memory`` flushes hostile (LlamaIndex-valid) messages into every block and reads from it."""
    tally = Tally()
    valid = [i for i, m in enumerate(pool.li_messages) if _framework_valid(m)]

    def one(name: str, chosen: list[int], question: int) -> None:
        tally.next_case_is_huge()
        history, snapshot = history_of(chosen, pool.li_messages, pool.li_copies, None, "")
        block = LI_BLOCK[name](**components(name, HashingEmbedder(), embedder_name="embed_model"))
        memory = memory_with_block(block, session_id="s", chat_history_token_ratio=0.25, token_flush_size=50)
        objects = list(history)
        stored, _ = tally.call(lambda: run_async(loop, memory.aput_messages(history)))
        assert stored  # a flush never fails on content (unusable messages are skipped)
        assert_unchanged(history, objects, snapshot)
        tally.call(lambda: run_async(loop, memory.aget(input=li_user(pool.texts[question]))))
        assert_unchanged(history, objects, snapshot)
        record = run_async(loop, memory.aget_all())
        assert [m.content for m in record] == [m.content for m in history]

    fuzz(
        MEMORY_CASES,
        st.tuples(
            st.sampled_from(STRATEGIES), st.lists(st.sampled_from(valid), min_size=1, max_size=12), pick
        ),
        one,
    )
    assert tally.cases >= MEMORY_CASES and tally.outcomes["selection"] >= MEMORY_CASES


# -- the bundled MiniLM -----------------------------------------------------------------------
def test_fuzz_every_adapter_with_minilm(
    pool: Pools, default_embedder: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """Fewer cases with the real embedder: its tokenizer sees the hostile texts too."""
    for fuzz in (fuzz_middleware, fuzz_classic_memory, fuzz_llamaindex_memory):
        fuzz(pool, default_embedder, EMBEDDING_STRATEGIES, MINILM_CASES).check(MINILM_CASES)
    fuzz_memory_block(pool, default_embedder, EMBEDDING_STRATEGIES, MINILM_CASES, loop).check(MINILM_CASES)
