"""Embedding calls: documents and queries, bounded, checked, and shared within one call scope."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ctxmgmt.components.embedding_calls import embed_documents, embed_queries, embed_query, shared_queries
from ctxmgmt.components.llm_call import MAX_INPUT_CHARS
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError


class Recording:
    """Embeds each text as (its length, 1), recording what it was asked."""

    name = "recording"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts])


def test_documents_come_back_checked_as_unit_rows_in_one_batch() -> None:
    embedder = Recording()
    out = embed_documents(embedder, ["abc", "a"])
    assert embedder.batches == [["abc", "a"]]
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 1.0], rtol=1e-6)


def test_no_texts_embed_nothing() -> None:
    embedder = Recording()
    assert embed_documents(embedder, []).shape == (0, 0)
    assert embed_documents(embedder, [], dim=5).shape == (0, 5)
    assert embed_queries(embedder, [], dim=3).shape == (0, 3)
    assert embedder.batches == []


def test_a_text_is_cut_before_the_embedder_reads_it() -> None:
    embedder = Recording()
    embed_documents(embedder, ["x" * (MAX_INPUT_CHARS * 3)])
    assert len(embedder.batches[0][0]) <= MAX_INPUT_CHARS


def test_an_embedder_that_raises_becomes_a_component_error_with_the_cause() -> None:
    class Broken:
        name = "broken-embedder"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("embedding service unavailable")

    with pytest.raises(ComponentError, match="'broken-embedder' failed: RuntimeError") as error:
        embed_documents(Broken(), ["a"])
    assert isinstance(error.value.__cause__, RuntimeError)
    with pytest.raises(ComponentError):
        embed_queries(Broken(), ["a"])


def test_a_ctxmgmt_error_passes_through_unchanged() -> None:
    class Misconfigured:
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise ConfigurationError("bad setting")

    with pytest.raises(ConfigurationError, match="bad setting"):
        embed_documents(Misconfigured(), ["a"])


def test_queries_without_a_query_path_use_the_document_path_once_per_distinct_text() -> None:
    embedder = Recording()
    out = embed_queries(embedder, ["ab", "abc", "ab"])
    assert embedder.batches == [["ab", "abc"]]
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out[0], out[2])


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
