"""EmbeddingCache: bounded, content-keyed, least recently used out first; nothing kept from a
faulty embedder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.embedding_cache import EMBEDDING_CACHE_SIZE, EmbeddingCache
from ctxmgmt.messages.exceptions import ComponentError


class FaultyEmbedder:
    """A hashing embedder that returns NaN (``fault="nan"``), a row too few, twice the dimension,
    strings, or raises, as ``fault`` says; healthy when ``fault`` is None."""

    name = "faulty-test-embedder"

    def __init__(self, dim: int = 64) -> None:
        self.healthy = HashingEmbedder(dim)
        self.fault: str | None = None

    def embed(self, texts: Sequence[str]) -> Any:
        vectors = self.healthy.embed(texts)
        if self.fault == "nan":
            return np.full_like(vectors, np.nan)
        if self.fault == "rows":
            return vectors[:-1] if len(vectors) > 1 else np.vstack([vectors, vectors])
        if self.fault == "dim":
            return np.hstack([vectors, vectors])
        if self.fault == "strings":
            return [["a"] * vectors.shape[1]] * len(vectors)
        if self.fault == "raise":
            raise RuntimeError("embedding service unavailable")
        return vectors


COLD_FAULTS = ["nan", "rows", "strings", "raise"]
"""Faults of a first call: any dimension is fine until vectors of one are in use."""


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


def test_each_key_is_embedded_once_and_keys_may_differ_from_texts(hashing_embedder) -> None:
    cache = EmbeddingCache(hashing_embedder)
    first = cache.embed(["a cat", "a dog"], keys=["k1", "k2"])
    again = cache.embed(["changed text", "a bird"], keys=["k1", "k3"])  # k1 is served from the cache
    assert hashing_embedder.calls == [2, 1]
    np.testing.assert_array_equal(again[0], first[0])
    assert "k1" in cache and "a cat" not in cache and len(cache) == 3
    cache.embed(["same", "same"])  # a key repeated in one call is embedded once
    assert hashing_embedder.calls[-1] == 1


def test_queries_are_cached_apart_from_documents(hashing_embedder) -> None:
    cache = EmbeddingCache(hashing_embedder)
    cache.embed(["where is it"])
    cache.embed_queries(["where is it", "where is it"])
    assert "q:where is it" in cache and "where is it" in cache and len(cache) == 2
    cache.embed_queries(["where is it"])
    assert hashing_embedder.calls == [1, 1]


def test_the_least_recently_used_vector_goes_first(hashing_embedder) -> None:
    cache = EmbeddingCache(hashing_embedder, size=2)
    cache.embed(["a", "b"])
    assert cache.get("a") is not None  # "a" is now the most recently used
    cache.embed(["c"])
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2
    assert cache.get("b") is None


def test_put_sets_the_dimension_and_clear_forgets_it() -> None:
    cache = EmbeddingCache(HashingEmbedder(dim=8))
    assert cache.dim is None and cache.expected_dim() == 8  # declared by the embedder
    cache.put("k", np.ones(4, dtype=np.float64))
    assert cache.dim == 4 and cache.expected_dim() == 4 and cache.get("k").dtype == np.float32
    cache.clear()
    assert len(cache) == 0 and cache.dim is None


def test_the_default_size() -> None:
    assert EmbeddingCache(HashingEmbedder()).size == EMBEDDING_CACHE_SIZE == 4096
