"""Copies of used memories (issue 33, item 15): ``pickle``, ``copy.deepcopy``, ``model_copy(deep=True)``.

Every surface of both adapters, for the five methods: a memory is used, copied, and the copy
used the same way. What the fake model receives through the copy is what it received through
the original (the copy carries the derived state: nothing is derived again), the copy's later
use never reaches the original, and the original keeps working. A deep copy shares the
components (models, LLMs) and gets its own locks (:mod:`ctxmgmt.adapter.copying`).
"""

from __future__ import annotations

import copy
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import KadaneDialStrategy
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.session.conversation import Conversation
from langchain_ctxmgmt._convert import CODEC as LC_CODEC
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_framework_contract import (
    ANSWER,
    BUDGET,
    CAT_QUERY,
    CAT_WORD,
    MAX_TOKENS,
    agent_with,
    fast_components,
    lc_history,
    li_history,
    text_of,
    thread,
    words,
)
from tests.adapters.test_langchain_contract import TURNS
from tests.integration.test_llamaindex_engines import RecordingLLM, memory_with_block

METHODS = ["KadaneDial", "SWin", "DiscourseTree", "ACM", "TopicThread"]
NAMES = {  # method -> (LangChain memory, middleware, selector; LlamaIndex memory, block)
    "KadaneDial": (
        "KadaneDialMemory",
        "KadaneDialMiddleware",
        "KadaneDialSelector",
        "KadaneDialMemory",
        "KadaneDialBlock",
    ),
    "SWin": (
        "SWinSummaryBuffer",
        "SWinSummaryMiddleware",
        "SWinSummarySelector",
        "SWinSummaryBuffer",
        "SWinSummaryBlock",
    ),
    "DiscourseTree": (
        "DiscourseTreeMemory",
        "DiscourseTreeMiddleware",
        "DiscourseTreeSelector",
        "DiscourseTreeMemory",
        "DiscourseTreeBlock",
    ),
    "ACM": (
        "ACMTieredBuffer",
        "ACMTieredMiddleware",
        "ACMTieredSelector",
        "ACMTieredBuffer",
        "ACMTieredBlock",
    ),
    "TopicThread": (
        "TopicThreadMemory",
        "TopicThreadMiddleware",
        "TopicThreadSelector",
        "TopicThreadMemory",
        "TopicThreadBlock",
    ),
}
KWARGS = {"SWin": {"window": 4, "overlap": 1}}  # 8 turns: two windows summarised

COPIES: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "deepcopy": copy.deepcopy,
}
MODEL_COPIES = {**COPIES, "model_copy": lambda obj: obj.model_copy(deep=True)}

QUESTION = "Which pet did I bring home, and from where?"
FOLLOW_UP = [
    HumanMessage("Also, my sister Ines lives in Porto now.", id="x-h"),
    AIMessage("Noted.", id="x-a"),
]


def build(module: Any, method: str, surface: int, embedder: Any, **kwargs: Any) -> Any:
    cls = getattr(module, NAMES[method][surface])
    return cls(**{**fast_components(cls, embedder), **KWARGS.get(method, {}), **kwargs})


def view(messages: list[Any]) -> list[tuple[str, str]]:
    return [(str(getattr(m, "type", None) or m.role), str(m.content)) for m in messages]


def derived_turns(conversation: Conversation[Any]) -> int:
    return len(conversation.strategy)


def check_shared(original: Conversation[Any], clone: Conversation[Any], how: str) -> None:
    """A copy has its own lock and strategy; a deep copy shares the strategy's components."""
    assert clone is not original and clone.lock is not original.lock
    assert clone.strategy is not original.strategy
    assert derived_turns(clone) == derived_turns(original) > 0  # carried, not derived again
    if how != "pickle":
        for mine, theirs in zip(
            clone.strategy.shared_components(), original.strategy.shared_components(), strict=True
        ):
            assert mine is theirs


# -- LangChain -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("method", METHODS)
def test_middleware_in_create_agent(method, how, hashing_embedder):
    middleware = build(lc, method, 1, hashing_embedder, max_tokens=MAX_TOKENS, token_counter=words)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    model, agent = agent_with(middleware, [ANSWER] * 3)
    agent.invoke({"messages": full}, thread("t"))
    (sent,) = model.received

    clone = COPIES[how](middleware)
    check_shared(middleware.conversation("t"), clone.conversation("t"), how)
    clone_model, clone_agent = agent_with(clone, [ANSWER] * 3)
    clone_agent.invoke({"messages": full}, thread("t"))
    assert view(clone_model.received[-1]) == view(sent)
    assert len(sent) < len(full) + 1  # a selection: turns were dropped

    # the copy goes on with a longer conversation: the original never sees it
    before = derived_turns(middleware.conversation("t"))
    clone_agent.invoke({"messages": [*FOLLOW_UP, HumanMessage("Where does Ines live?")]}, thread("t"))
    assert "Porto" in text_of(clone_model.received[-1])
    assert derived_turns(middleware.conversation("t")) == before
    assert derived_turns(clone.conversation("t")) > before
    # the original keeps working, as before the copy
    again_model, again_agent = agent_with(middleware, [ANSWER])
    again_agent.invoke({"messages": full}, thread("t"))
    assert view(again_model.received[-1]) == view(sent)


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("method", METHODS)
async def test_selector(method, how, hashing_embedder):
    selector = build(lc, method, 2, hashing_embedder, max_tokens=BUDGET, token_counter=words)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    sent = selector.invoke(full, thread("t"))
    clone = COPIES[how](selector)
    check_shared(selector.conversation("t"), clone.conversation("t"), how)
    assert view(await clone.ainvoke(full, thread("t"))) == view(sent)
    assert view(clone.invoke({"messages": full}, thread("t"))["llm_input_messages"]) == view(sent)
    longer = [*full, AIMessage(ANSWER), *FOLLOW_UP, HumanMessage("Where does Ines live?")]
    assert "Porto" in text_of(clone.invoke(longer, thread("t")))
    assert derived_turns(selector.conversation("t")) < derived_turns(clone.conversation("t"))
    assert view(selector.invoke(full, thread("t"))) == view(sent)


@pytest.mark.parametrize("how", MODEL_COPIES)
@pytest.mark.parametrize("method", METHODS)
def test_classic_memory(method, how, hashing_embedder):
    memory = build(
        lc, method, 0, hashing_embedder, return_messages=True, max_token_limit=BUDGET, token_counter=words
    )
    for (human, ai), _ in zip(
        zip(lc_history()[::2], lc_history()[1::2], strict=True), range(8), strict=False
    ):
        memory.save_context({"input": human.content}, {"output": ai.content})
    sent = memory.load_memory_variables({"input": CAT_QUERY})["history"]
    clone = MODEL_COPIES[how](memory)
    check_shared(memory._conversation(), clone._conversation(), how)
    assert view(clone.load_memory_variables({"input": CAT_QUERY})["history"]) == view(sent)
    clone.save_context({"input": FOLLOW_UP[0].content}, {"output": "Noted."})
    assert len(clone.messages) == len(memory.messages) + 2 == 18
    assert "Porto" in text_of(clone.load_memory_variables({"input": "Where does Ines live?"})["history"])
    assert view(memory.load_memory_variables({"input": CAT_QUERY})["history"]) == view(sent)


# -- LlamaIndex ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", MODEL_COPIES)
@pytest.mark.parametrize("method", METHODS)
async def test_llamaindex_memory_in_chat_engine(method, how, hashing_embedder):
    memory = build(li, method, 3, hashing_embedder, token_limit=BUDGET, token_counter=words)
    memory.set(li_history())
    llm = RecordingLLM()
    SimpleChatEngine.from_defaults(llm=llm, memory=memory).chat(CAT_QUERY)
    assert len(llm.received[-1]) < len(memory.get_all())  # a selection: turns were dropped

    clone = MODEL_COPIES[how](memory)
    check_shared(memory._conversation(), clone._conversation(), how)
    assert clone.get_all() == memory.get_all()
    clone_llm = RecordingLLM()
    await SimpleChatEngine.from_defaults(llm=clone_llm, memory=clone).achat(QUESTION)
    SimpleChatEngine.from_defaults(llm=llm, memory=memory).chat(QUESTION)
    assert view(clone_llm.received[-1]) == view(llm.received[-1])
    # the copy's chat store is its own
    await SimpleChatEngine.from_defaults(llm=clone_llm, memory=clone).achat(FOLLOW_UP[0].content)
    assert len(clone.get_all()) == len(memory.get_all()) + 2
    assert derived_turns(clone._conversation()) > derived_turns(memory._conversation())
    SimpleChatEngine.from_defaults(llm=llm, memory=memory).chat(CAT_QUERY)
    assert len(llm.received[-1]) <= len(memory.get_all())


async def asked(block: Any, question: str = CAT_QUERY) -> list[ChatMessage]:
    """What an LLM receives from a new ``Memory`` (session ``alice``) with ``block`` for ``question``."""
    llm = RecordingLLM()
    memory = memory_with_block(block, session_id="alice")
    await SimpleChatEngine.from_defaults(llm=llm, memory=memory).achat(question)
    return llm.received[-1]


@pytest.mark.parametrize("how", MODEL_COPIES)
@pytest.mark.parametrize("method", METHODS)
async def test_memory_block_through_memory(method, how, hashing_embedder):
    block = build(li, method, 4, hashing_embedder, token_counter=words)
    memory = memory_with_block(block, session_id="alice")
    await memory.aput_messages(li_history())
    await memory.aget(input=CAT_QUERY)  # Memory flushes its oldest turns into the block
    flushed = block.stored_messages("alice")
    assert flushed
    sent = await asked(block)
    assert CAT_WORD in text_of(sent)

    clone = MODEL_COPIES[how](block)
    check_shared(block.conversation("alice"), clone.conversation("alice"), how)
    assert view(clone.stored_messages("alice")) == view(flushed)
    assert view(await asked(clone)) == view(sent)
    # the copy keeps what is flushed into it; the original never sees it
    await clone.aput(
        [
            ChatMessage(
                role=MessageRole.USER, content=FOLLOW_UP[0].content, additional_kwargs={"session_id": "alice"}
            ),
            ChatMessage(
                role=MessageRole.ASSISTANT, content="Noted.", additional_kwargs={"session_id": "alice"}
            ),
        ]
    )
    assert len(clone.stored_messages("alice")) == len(flushed) + 2
    assert view(block.stored_messages("alice")) == view(flushed)
    assert "Porto" in text_of(await asked(clone, "Where does my sister Ines live?"))
    assert view(await asked(block)) == view(sent)


# -- what a copy carries and shares ------------------------------------------------------------


@pytest.mark.parametrize("how", MODEL_COPIES)
def test_copy_makes_no_llm_call_again(how):
    """SWin's summaries travel with the copy: its first selection calls the LLM no more."""
    llm = PromptRecordingLLM()
    memory = li.SWinSummaryBuffer.from_defaults(
        chat_history=li_history(), llm=llm, token_limit=BUDGET, token_counter=words, window=4, overlap=1
    )
    sent = memory.get(input=CAT_QUERY)
    calls = len(llm.prompts)
    assert calls >= 2 and memory.llm_calls == calls
    clone = MODEL_COPIES[how](memory)
    assert view(clone.get(input=CAT_QUERY)) == view(sent)
    assert clone.llm_calls == calls and len(llm.prompts) == calls
    if how != "pickle":
        assert clone.strategy.summarizer is memory.strategy.summarizer  # the LLM is shared


def test_default_embedder_is_shared_not_copied(default_embedder):
    """The real bundled model: a deep copy shares it, a pickle carries its configuration only."""
    middleware = lc.KadaneDialMiddleware(max_tokens=MAX_TOKENS, token_counter=words)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    model, agent = agent_with(middleware, [ANSWER])
    agent.invoke({"messages": full}, thread("t"))
    embedder = middleware.conversation("t").strategy.embedder
    assert embedder is default_embedder
    assert len(pickle.dumps(middleware)) < 2_000_000  # vectors and settings, no model weights
    for clone in (copy.deepcopy(middleware), pickle.loads(pickle.dumps(middleware))):
        clone_model, clone_agent = agent_with(clone, [ANSWER])
        clone_agent.invoke({"messages": full}, thread("t"))
        assert view(clone_model.received[-1]) == view(model.received[-1])
    assert copy.deepcopy(middleware).conversation("t").strategy.embedder is embedder


def test_sqlite_store_is_reopened_by_a_pickled_copy(tmp_path, hashing_embedder):
    """A store is where the copy's state goes too: a pickle reopens it from its path."""
    selector = lc.KadaneDialSelector(
        embedder=hashing_embedder,
        store=f"sqlite:///{tmp_path / 'state.db'}",
        max_tokens=BUDGET,
        token_counter=words,
    )
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    sent = selector.invoke(full, thread("t"))
    clone = pickle.loads(pickle.dumps(selector))
    assert clone.conversation("t").store is not selector.conversation("t").store
    assert view(clone.invoke(full, thread("other"))) == view(sent)  # derived and written by the copy
    assert view(clone.invoke(full, thread("t"))) == view(sent)
    assert copy.deepcopy(selector).conversation("t").store is selector.conversation("t").store


def test_messages_list_token_counter_is_picklable(hashing_embedder):
    """A ``message -> int`` counter was wrapped in a local lambda, which no pickle takes."""

    middleware = lc.KadaneDialMiddleware(
        embedder=hashing_embedder, token_counter=_one_message_counter, max_tokens=500
    )
    clone = pickle.loads(pickle.dumps(middleware))
    assert clone._counter.count("one two three") == middleware._counter.count("one two three")


def _one_message_counter(message: BaseMessage) -> int:
    return len(str(message.content).split()) + 3


# -- conversations copied while the background worker derives ------------------------------------


class SlowEmbedder(HashingEmbedder):
    """A hashing embedder that takes 20 ms a text: a long history leaves a backlog."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(0.02 * len(texts))
        return super().embed(texts)


@pytest.mark.parametrize("how", COPIES)
def test_a_conversation_copied_during_background_derivation(how):
    """The copy is a consistent snapshot (taken under the lock) and derives the rest on its own."""
    conversation = Conversation("k", KadaneDialStrategy(embedder=SlowEmbedder()), LC_CODEC, index_seconds=0.0)
    history = [*lc_history(TURNS * 10), HumanMessage(CAT_QUERY)]
    conversation.select(history)
    assert conversation.backlog > 0 and conversation.in_background
    clone = COPIES[how](conversation)
    assert clone.lock is not conversation.lock
    assert len(clone.strategy) == len(clone.state.chains) and clone.backlog == 80 - len(clone.strategy) > 0
    assert clone.wait_derived(timeout=60) and conversation.wait_derived(timeout=60)
    assert len(clone.strategy) == len(conversation.strategy) == 80
    assert view(clone.select(history).messages) == view(conversation.select(history).messages)


# -- stores ------------------------------------------------------------------------------------------


def store_selector(store: Any, embedder: Any) -> lc.KadaneDialSelector:
    return lc.KadaneDialSelector(embedder=embedder, store=store, max_tokens=BUDGET, token_counter=words)


@pytest.mark.parametrize("kind", ["sqlite", "ctxmgmt-memory", "langgraph-memory"])
def test_a_selector_on_a_store_is_copied(kind, tmp_path, hashing_embedder):
    """A deep copy shares the store (a database); a pickle reopens it (or carries an in-process one)."""
    from langgraph.store.memory import InMemoryStore as GraphStore

    from ctxmgmt.store import InMemoryStore

    store = {
        "sqlite": f"sqlite:///{tmp_path / 'state.db'}",
        "ctxmgmt-memory": InMemoryStore(),
        "langgraph-memory": GraphStore(),
    }[kind]
    selector = store_selector(store, hashing_embedder)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    sent = selector.invoke(full, thread("t"))
    if kind != "langgraph-memory":  # LangGraph's InMemoryStore itself cannot be pickled (a local lambda)
        pickled = pickle.loads(pickle.dumps(selector))
        assert pickled.conversation("t").store is not selector.conversation("t").store
        assert view(pickled.invoke(full, thread("t"))) == view(sent)
        assert view(pickled.invoke(full, thread("other"))) == view(sent)  # derived and written by the copy
    deep = copy.deepcopy(selector)
    assert deep.conversation("t").store is selector.conversation("t").store
    assert view(deep.invoke(full, thread("t"))) == view(sent)


def test_a_middleware_on_the_agents_store_is_copied(hashing_embedder):
    """Without ``store=``, the state goes to the agent's store: the copy finds it there."""
    from langgraph.store.memory import InMemoryStore as GraphStore

    graph_store = GraphStore()
    middleware = build(lc, "KadaneDial", 1, hashing_embedder, max_tokens=MAX_TOKENS, token_counter=words)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    model, agent = agent_with(middleware, [ANSWER], store=graph_store)
    agent.invoke({"messages": full}, thread("t"))
    assert graph_store.search(("ctxmgmt",)) or list(graph_store.list_namespaces())
    for clone in (copy.deepcopy(middleware), pickle.loads(pickle.dumps(middleware))):
        clone_model, clone_agent = agent_with(clone, [ANSWER], store=graph_store)
        clone_agent.invoke({"messages": full}, thread("t"))
        assert view(clone_model.received[-1]) == view(model.received[-1])


def test_a_selector_on_postgres_is_copied(pg_dsn, hashing_embedder):
    """A pickle connects to the same database with pools of its own."""
    selector = store_selector(pg_dsn, hashing_embedder)
    full = [*lc_history(), HumanMessage(CAT_QUERY, id="q")]
    sent = selector.invoke(full, thread("t"))
    clone = pickle.loads(pickle.dumps(selector))
    assert view(clone.invoke(full, thread("t"))) == view(sent)
    assert view(store_selector(pg_dsn, hashing_embedder).invoke(full, thread("t"))) == view(sent)


def test_a_llamaindex_memory_on_a_database_chat_store_is_copied(tmp_path, hashing_embedder):
    """A deep copy shares the database chat store; a pickle opens the same database again."""
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    chat_store = SQLAlchemyChatStore(
        table_name="chats", async_database_uri=f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    )
    memory = li.KadaneDialMemory.from_defaults(
        chat_history=li_history(),
        chat_store=chat_store,
        embed_model=hashing_embedder,
        token_limit=BUDGET,
        token_counter=words,
    )
    sent = memory.get(input=CAT_QUERY)
    deep = copy.deepcopy(memory)
    assert deep.chat_store is memory.chat_store
    pickled = pickle.loads(pickle.dumps(memory))
    assert (
        pickled.chat_store is not memory.chat_store and memory.chat_store.db is chat_store
    )  # original intact
    for clone in (deep, pickled):
        assert view(clone.get(input=CAT_QUERY)) == view(sent)
