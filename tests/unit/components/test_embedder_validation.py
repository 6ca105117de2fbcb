"""Faulty embedders are named as such.

An embedder that returns NaN or infinite values, the wrong number of rows, another dimension
than before, or no numbers at all raises :class:`ComponentError` naming it, before anything is
cached; nothing silently changes a selection. After the error the conversation works again as
soon as the embedder does: the next call selects exactly what a healthy embedder selects.

Here through the strategies and middlewares; the checks themselves are tested in
``test_embedding_checks.py``, the calls in ``test_embedding_calls.py`` and the cache in
``test_embedding_cache.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from langchain.agents.middleware import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxmgmt import ComponentError, ConfigurationError, CtxMgmtError, Message
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.messages.history import group_turns
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy
from ctxmgmt.strategies.topic_thread import TopicThreadStrategy
from langchain_ctxmgmt import DiscourseTreeMiddleware, KadaneDialMiddleware, TopicThreadMiddleware
from tests.helpers import TOPICS


class FaultyEmbedder:
    """A hashing embedder that can be made to misbehave (``fault``) on documents or queries."""

    name = "faulty-test-embedder"

    def __init__(self, dim: int = 64) -> None:
        self.healthy = HashingEmbedder(dim)
        self.fault: str | None = None
        self.on_queries_only = False
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        vectors = self.healthy.embed(texts)
        if self.fault is None or self.on_queries_only:
            return vectors
        return broken(vectors, self.fault)

    def embed_query(self, text: str) -> Any:
        vector = self.healthy.embed([text])  # shape (1, dim): a valid answer for one text
        return vector if self.fault is None else broken(vector, self.fault)


def broken(vectors: np.ndarray, fault: str) -> Any:
    """``vectors`` spoilt the way ``fault`` says."""
    if fault == "nan":
        out = vectors.copy()
        out[:, 3] = np.nan
        return out
    if fault == "inf":
        out = vectors.copy()
        out[-1, 0] = np.inf
        return out
    if fault == "rows":
        return vectors[:-1] if len(vectors) > 1 else np.vstack([vectors, vectors])
    if fault == "dim":
        return np.hstack([vectors, vectors])
    if fault == "strings":
        return [["a"] * vectors.shape[1]] * len(vectors)
    if fault == "raise":
        raise RuntimeError("embedding service unavailable")
    raise AssertionError(fault)


FAULTS = ["nan", "inf", "rows", "dim", "strings", "raise"]
COLD_FAULTS = [f for f in FAULTS if f != "dim"]
"""Faults of a first call: any dimension is fine until vectors of one are in use."""


# -- strategies and adapters ------------------------------------------------------------------
def turns_of_topics() -> list[Message]:
    return [Message(role, text) for q, a in TOPICS for role, text in (("user", q), ("assistant", a))]


STRATEGIES = {
    "kadanedial": KadaneDialStrategy,
    "topic_thread": TopicThreadStrategy,
    "discourse_tree": DiscourseTreeStrategy,
}


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize(
    ("fault", "queries_only"),
    [(f, False) for f in COLD_FAULTS] + [(f, True) for f in FAULTS],
    ids=[f"turns-{f}" for f in COLD_FAULTS] + [f"query-{f}" for f in FAULTS],
)
def test_every_embedding_strategy_raises_a_component_error_then_recovers(
    name: str, fault: str, queries_only: bool
) -> None:
    """NaN turns or queries: ComponentError (KadaneDial no longer says ConfigurationError,
    TopicThread no longer selects silently); then, healthy again, the same selection as a
    strategy that never saw the fault."""
    turns = group_turns(turns_of_topics())
    healthy = STRATEGIES[name](embedder=FaultyEmbedder())
    healthy.add_many(turns)
    expected = healthy.select("Which sauce goes with spaghetti?", budget=200)

    embedder = FaultyEmbedder()
    strategy = STRATEGIES[name](embedder=embedder)
    if queries_only:
        strategy.add_many(turns)
        embedder.on_queries_only = True
    embedder.fault = fault
    with pytest.raises(ComponentError, match="faulty-test-embedder") as error:
        if not queries_only:
            strategy.add_many(turns)
        strategy.select("Which sauce goes with spaghetti?", budget=200)
    assert not isinstance(error.value, ConfigurationError)
    embedder.fault = None
    if not queries_only:
        assert len(strategy) == 0  # the failed add added nothing
        strategy.add_many(turns)
    context = strategy.select("Which sauce goes with spaghetti?", budget=200)
    assert context.turn_indices == expected.turn_indices


def _request(messages: list[BaseMessage]) -> ModelRequest:
    return ModelRequest(model=GenericFakeChatModel(messages=iter([])), messages=messages)


def _history() -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for question, answer in TOPICS:
        messages += [HumanMessage(question), AIMessage(answer)]
    return [*messages, HumanMessage("Which sauce goes with spaghetti?")]


@pytest.mark.parametrize(
    "middleware_class", [KadaneDialMiddleware, TopicThreadMiddleware, DiscourseTreeMiddleware]
)
def test_a_middleware_reports_the_faulty_embedder_and_the_thread_recovers(middleware_class: Any) -> None:
    history = _history()
    expected = middleware_class(embedder=FaultyEmbedder(), max_tokens=300).select_messages(_request(history))

    embedder = FaultyEmbedder()
    middleware = middleware_class(embedder=embedder, max_tokens=300)
    embedder.fault = "nan"
    for _ in range(2):
        with pytest.raises(CtxMgmtError, match="faulty-test-embedder returned NaN|'faulty-test-embedder'"):
            middleware.select_messages(_request(history))
    embedder.fault = None
    selected = middleware.select_messages(_request(history))
    assert [m.content for m in selected] == [m.content for m in expected]
    assert selected[-1] is history[-1]
