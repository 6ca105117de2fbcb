"""CallableEmbedder: ``texts -> vectors`` callables (framework embeddings) as an Embedder."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.components.callable_embedder import CallableEmbedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.messages.exceptions import ComponentError


def fake_vectors(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, 0.0] for t in texts]


def test_callable_embedder_empty_batch() -> None:
    calls: list[list[str]] = []
    embedder = CallableEmbedder(lambda texts: calls.append(texts) or fake_vectors(texts))
    assert embedder.embed([]).shape == (0, 0)
    assert calls == []


def test_documents_are_checked_unit_rows_and_the_wrapper_is_an_embedder() -> None:
    embedder = CallableEmbedder(fake_vectors, name="fake")
    assert isinstance(embedder, Embedder) and embedder.name == "fake"
    out = embedder.embed(["abc"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[3 / np.sqrt(10), 1 / np.sqrt(10), 0.0]], rtol=1e-6)


def test_the_query_callable_serves_queries_and_the_documents_one_otherwise() -> None:
    with_query = CallableEmbedder(fake_vectors, lambda text: [0.0, 0.0, 4.0])
    np.testing.assert_allclose(with_query.embed_query("q"), [[0.0, 0.0, 1.0]])
    without = CallableEmbedder(fake_vectors)
    np.testing.assert_allclose(without.embed_query("ab"), without.embed(["ab"]))


def test_a_bad_answer_is_a_component_error_naming_the_wrapper() -> None:
    embedder = CallableEmbedder(lambda texts: [[1.0, 2.0]], name="short")
    with pytest.raises(ComponentError, match="'short' returned an array of shape"):
        embedder.embed(["a", "b"])
    nan_query = CallableEmbedder(fake_vectors, lambda text: [float("nan"), 1.0, 0.0], name="nan")
    with pytest.raises(ComponentError, match="'nan' returned NaN"):
        nan_query.embed_query("q")
