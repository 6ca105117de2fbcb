"""Embedder adapters, query embedding and the frozen encoder (``ctxmgmt.components.embedder``).

Token counters are tested in ``test_tokens.py``, ``normalise`` in ``tests/unit/scoring/test_vectors.py``
and the BM25 index in ``tests/unit/scoring/test_lexical.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components import (
    CallableEmbedder,
    Embedder,
    as_embedder,
)
from ctxmgmt.components.embedder import embed_queries, embed_query, normalise, shared_queries

# ---------------------------------------------------------------------------------------
# Embedders
# ---------------------------------------------------------------------------------------


def fake_vectors(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, 0.0] for t in texts]


def test_as_embedder_on_a_callable() -> None:
    calls: list[list[str]] = []

    def documents(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return fake_vectors(texts)

    embedder = as_embedder(documents)
    assert isinstance(embedder, CallableEmbedder)
    assert isinstance(embedder, Embedder)
    out = embedder.embed(["abc", "a"])
    assert out.shape == (2, 3) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 1.0], rtol=1e-6)
    assert calls == [["abc", "a"]]
    # Without a query path, queries go through the document path.
    query = embed_query(embedder, "abcd")
    assert query.shape == (1, 3)
    np.testing.assert_allclose(query, normalise([4.0, 1.0, 0.0]), rtol=1e-6)
    assert calls[-1] == ["abcd"]


def test_callable_embedder_empty_batch() -> None:
    calls: list[list[str]] = []
    embedder = CallableEmbedder(lambda texts: calls.append(texts) or fake_vectors(texts))
    assert embedder.embed([]).shape == (0, 0)
    assert calls == []


def test_as_embedder_on_a_langchain_style_object() -> None:
    class Embeddings:
        def __init__(self) -> None:
            self.log: list[str] = []

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.log.append("documents")
            return fake_vectors(texts)

        def embed_query(self, text: str) -> list[float]:
            self.log.append("query")
            return [0.0, 0.0, 2.0]

    backend = Embeddings()
    embedder = as_embedder(backend)
    assert isinstance(embedder, CallableEmbedder)
    assert embedder.name == "Embeddings"
    assert embedder.embed(["x", "yy"]).shape == (2, 3)
    query = embed_query(embedder, "q")
    np.testing.assert_allclose(query, [[0.0, 0.0, 1.0]])
    assert backend.log == ["documents", "query"]


def test_as_embedder_on_a_llamaindex_style_object() -> None:
    class BaseEmbedding:
        def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
            return fake_vectors(texts)

        def get_query_embedding(self, text: str) -> list[float]:
            return [0.0, 3.0, 0.0]

    embedder = as_embedder(BaseEmbedding())
    assert isinstance(embedder, CallableEmbedder)
    assert embedder.embed(["x"]).shape == (1, 3)
    np.testing.assert_allclose(embedder.embed_query("q"), [[0.0, 1.0, 0.0]])


def test_as_embedder_keeps_an_embedder(hashing_embedder) -> None:
    assert as_embedder(hashing_embedder) is hashing_embedder


@pytest.mark.parametrize("bad", [42, "all-MiniLM-L6-v2", object()])
def test_invalid_embedder(bad) -> None:
    with pytest.raises(ConfigurationError):
        as_embedder(bad)


def test_embed_query_normalises_the_embedders_own_query_path() -> None:
    class Raw:
        def embed(self, texts):
            return np.ones((len(texts), 2))

        def embed_query(self, text):
            return np.array([5.0, 0.0])

    np.testing.assert_allclose(embed_query(Raw(), "q"), [[1.0, 0.0]])


def test_shared_queries_embed_each_text_once_per_embedder_within_one_call() -> None:
    class Counting:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def embed(self, texts):
            return np.ones((len(texts), 2))

        def embed_query(self, text):
            self.asked.append(text)
            return np.array([float(len(text)), 1.0])

    a, b = Counting(), Counting()
    with shared_queries():
        first = embed_query(a, "where is the bike?")
        both = embed_queries(a, ["where is the bike?", "bike"])  # the strategy's query and its focused form
        embed_query(b, "bike")  # another embedder embeds for itself
        with shared_queries():  # a nested scope shares the outer one
            embed_query(a, "bike")
    assert a.asked == ["where is the bike?", "bike"] and b.asked == ["bike"]
    np.testing.assert_allclose(both[0], first[0])
    embed_query(a, "bike")  # nothing is kept after the call
    assert a.asked[-1] == "bike" and len(a.asked) == 3


def test_frozen_graph_matches_sentence_transformers_encode(default_embedder) -> None:
    """The frozen TorchScript path (calls of up to 8 texts, float16 weights) gives encode's vectors."""
    from ctxmgmt.components.embedder import (
        FROZEN_MAX_TEXTS,
        HALF_WEIGHTS_TOLERANCE,
        SentenceTransformerEmbedder,
    )

    texts = ["I adopted a cat last week.", "Where did we go hiking in May, and with whom?", "ok"]
    assert default_embedder.frozen_encoder is not None
    assert default_embedder.frozen_encoder.half_weights  # this machine has the float16 kernel
    fast = default_embedder.embed(texts)
    plain = SentenceTransformerEmbedder(frozen=False).embed(texts)
    assert fast.shape == plain.shape == (3, 384)
    np.testing.assert_allclose(fast, plain, atol=HALF_WEIGHTS_TOLERANCE)
    assert (fast * plain).sum(axis=1).min() > 0.99999
    one = default_embedder.embed(texts[1:2])
    np.testing.assert_allclose(one[0], fast[1], atol=1e-6)  # a text's vector does not depend on its batch
    many = default_embedder.embed(texts * FROZEN_MAX_TEXTS)  # a large batch goes through encode
    np.testing.assert_allclose(many[:3], plain, atol=1e-5)


def test_frozen_encoder_is_skipped_for_non_mean_pooling_models() -> None:
    from ctxmgmt.components.embedder import _frozen_encoder_for

    def module(name: str, config: dict[str, str]) -> object:
        return type(name, (), {"get_config_dict": lambda self: config})()

    cls_pooled = [module("Transformer", {}), module("Pooling", {"pooling_mode": "cls"})]
    assert _frozen_encoder_for(cls_pooled) is None


def test_embedder_batch_size_is_validated() -> None:
    from ctxmgmt.components.embedder import SentenceTransformerEmbedder

    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder(batch_size=0)
    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder(batch_size=True)
