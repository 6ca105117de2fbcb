"""Faulty embedders are named as such.

An embedder that returns NaN or infinite values, the wrong number of rows, another dimension
than before, or no numbers at all raises :class:`ComponentError` naming it, before anything is
cached; nothing silently changes a selection. After the error the conversation works again as
soon as the embedder does: the next call selects exactly what a healthy embedder selects.
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
from ctxmgmt.components.embedder import (
    CallableEmbedder,
    EmbeddingCache,
    checked_vectors,
    embed_documents,
    embed_queries,
)
from ctxmgmt.messages.types import group_turns
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


# -- checked_vectors --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("vectors", "count", "message"),
    [
        ([[0.1, float("nan")]], 1, "NaN or infinite values"),
        ([[0.1, 0.2], [float("inf"), 0.0]], 2, "1 of 2"),
        ([[1e300, 0.0]], 1, "NaN or infinite values (in float32)"),  # finite float64, inf as float32
        ([[0.1, 0.2]], 2, "shape (1, 2) for 2 text(s)"),
        ([[[0.1]]], 1, "shape (1, 1, 1)"),
        (np.zeros((1, 0)), 1, "dim >= 1"),
        ([0.1, 0.2], 2, "shape (2,)"),
        ([["a", "b"]], 1, "expected real numbers"),
        ([[1 + 2j, 0]], 1, "expected real numbers"),
        ([[True, False]], 1, "expected real numbers"),
        ([[0.1, 0.2], [0.3]], 2, "not an array of vectors"),
        (None, 1, "expected real numbers"),
    ],
)
def test_bad_vectors_raise_a_component_error_naming_the_embedder(
    vectors: Any, count: int, message: str
) -> None:
    with pytest.raises(ComponentError, match="'my-embedder'") as error:
        checked_vectors(vectors, count, embedder=CallableEmbedder(lambda t: t, name="my-embedder"))
    assert message in str(error.value)
    assert not isinstance(error.value, ConfigurationError)  # a component fault, not a usage mistake


def test_good_vectors_come_back_as_unit_float32_rows() -> None:
    out = checked_vectors([[3, 4], [0, 0]], 2, embedder=object(), dim=2)
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert checked_vectors(np.array([1.0, 0.0]), 1, embedder=object()).shape == (1, 2)  # one flat vector


def test_another_dimension_than_the_vectors_in_use_is_refused() -> None:
    with pytest.raises(
        ComponentError, match="returned 3-dimensional vectors; the vectors already in use have 2"
    ):
        checked_vectors([[1.0, 0.0, 0.0]], 1, embedder=object(), dim=2)


def test_an_embedder_that_raises_becomes_a_component_error_with_the_cause() -> None:
    embedder = FaultyEmbedder()
    embedder.fault = "raise"
    with pytest.raises(ComponentError, match="'faulty-test-embedder' failed: RuntimeError") as error:
        embed_documents(embedder, ["a"])
    assert isinstance(error.value.__cause__, RuntimeError)
    with pytest.raises(ComponentError):
        embed_queries(embedder, ["a"])


def test_langchain_style_embeddings_returning_nan_are_named() -> None:
    class NaNEmbeddings:  # a LangChain Embeddings look-alike gone wrong
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float("nan")] * 4 for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [float("nan")] * 4

    from ctxmgmt.components.embedder import as_embedder

    embedder = as_embedder(NaNEmbeddings())
    with pytest.raises(ComponentError, match="'NaNEmbeddings' returned NaN"):
        embedder.embed(["hello"])
    with pytest.raises(ComponentError, match="'NaNEmbeddings' returned NaN"):
        embed_queries(embedder, ["hello"])


# -- the cache --------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", COLD_FAULTS)
def test_the_cache_keeps_nothing_from_a_faulty_embedder(fault: str) -> None:
    embedder = FaultyEmbedder()
    cache = EmbeddingCache(embedder)
    embedder.fault = fault
    with pytest.raises(ComponentError, match="faulty-test-embedder"):
        cache.embed(["a cat", "a dog"])
    with pytest.raises(ComponentError):
        cache.embed_queries(["a cat"])
    assert len(cache) == 0 and cache.dim is None
    embedder.fault = None
    vectors = cache.embed(["a cat", "a dog"])
    assert len(cache) == 2 and cache.dim == 64
    np.testing.assert_allclose(vectors, embedder.healthy.embed(["a cat", "a dog"]))


def test_the_cache_refuses_a_dimension_change() -> None:
    embedder = FaultyEmbedder()
    cache = EmbeddingCache(embedder)
    cache.embed(["a cat"])
    embedder.fault = "dim"
    with pytest.raises(ComponentError, match="128-dimensional vectors; the vectors already in use have 64"):
        cache.embed(["a dog"])
    assert list(cache._vectors) == ["a cat"]


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


def test_warm_up_embeds_once_in_the_background_and_logs_a_failure(caplog):
    from ctxmgmt import warm_up
    from ctxmgmt.app.testing import HashingEmbedder

    embedder = HashingEmbedder()
    thread = warm_up(embedder, background=True, entities=False)
    assert thread is not None
    thread.join(timeout=10)
    assert embedder.calls == [1]
    assert warm_up(embedder, entities=False) is None and embedder.calls == [1, 1]

    def broken(texts):
        raise RuntimeError("model file missing")

    with caplog.at_level("WARNING"):
        assert warm_up(broken, entities=False) is None  # logged, never raised
    assert "model file missing" in caplog.text


def test_warm_up_loads_spacy_too_and_logs_its_failure(monkeypatch, caplog):
    from ctxmgmt import warm_up
    from ctxmgmt.app.testing import HashingEmbedder
    from ctxmgmt.components import entities

    loads: list[tuple[str, ...]] = []
    ran: list[str] = []

    class Pipeline:
        def pipe(self, texts, **kwargs):
            ran.extend(texts)
            return iter(type("Doc", (), {"ents": ()})() for _ in texts)

    def fake_load(exclude=entities.SPACY_EXCLUDE):
        loads.append(exclude)
        return Pipeline()

    monkeypatch.setattr(entities, "load_spacy", fake_load)
    entities._CACHE.clear()
    embedder = HashingEmbedder()
    assert warm_up(embedder) is None
    assert embedder.calls == [1] and loads and ran  # the pipeline loaded and ran once
    loads.clear()
    assert warm_up(embedder, entities=False) is None and not loads

    def broken(exclude=entities.SPACY_EXCLUDE):
        raise entities.ComponentError("spaCy weights damaged")

    monkeypatch.setattr(entities, "load_spacy", broken)
    with caplog.at_level("WARNING"):
        assert warm_up(embedder) is None  # logged, never raised
    assert "spaCy weights damaged" in caplog.text


def test_embedders_declare_their_dimension_without_embedding():
    import sys

    from ctxmgmt.app.testing import CountingEmbedder, HashingEmbedder
    from ctxmgmt.components.embedder import SentenceTransformerEmbedder, embedder_dimension

    torch_loaded = "torch" in sys.modules
    assert embedder_dimension(SentenceTransformerEmbedder()) == 384  # read from the model folder
    assert ("torch" in sys.modules) == torch_loaded
    assert embedder_dimension(CountingEmbedder(HashingEmbedder(dim=64))) == 64
    assert embedder_dimension(lambda texts: texts) is None
