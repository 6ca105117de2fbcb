"""as_embedder (what users pass as ``embedder``), the default embedder, warm_up, and the names
``ctxmgmt.components.embedder`` still exports from the modules it was split into."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import ComponentError, ConfigurationError
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components import embedder as embedder_module
from ctxmgmt.components.callable_embedder import CallableEmbedder
from ctxmgmt.components.embedder import ENCODER_NAMES, as_embedder, default_embedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.components.embedding_calls import embed_queries, embed_query
from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder
from ctxmgmt.scoring.vectors import normalise


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


def test_langchain_style_embeddings_returning_nan_are_named() -> None:
    class NaNEmbeddings:  # a LangChain Embeddings look-alike gone wrong
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float("nan")] * 4 for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [float("nan")] * 4

    embedder = as_embedder(NaNEmbeddings())
    with pytest.raises(ComponentError, match="'NaNEmbeddings' returned NaN"):
        embedder.embed(["hello"])
    with pytest.raises(ComponentError, match="'NaNEmbeddings' returned NaN"):
        embed_queries(embedder, ["hello"])


def test_a_framework_object_is_named_with_its_model() -> None:
    class Embeddings:
        model = "text-embedding-3-small"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [1.0, 0.0]

    assert as_embedder(Embeddings()).name == "Embeddings:text-embedding-3-small"


def test_none_and_minilm_give_the_shared_default_without_loading_it() -> None:
    assert ENCODER_NAMES == ("minilm", "static")
    assert as_embedder(None) is default_embedder() is as_embedder("minilm")
    assert isinstance(default_embedder(), SentenceTransformerEmbedder)  # built, not loaded


def test_the_default_is_looked_up_where_tests_replace_it(monkeypatch, hashing_embedder) -> None:
    monkeypatch.setattr(embedder_module, "default_embedder", lambda: hashing_embedder)
    assert as_embedder(None) is hashing_embedder


def test_static_names_the_shipped_static_encoder() -> None:
    from ctxmgmt.components.static_embedder import StaticEmbedder

    assert isinstance(as_embedder("static"), StaticEmbedder)


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


def test_warm_up_loads_the_static_encoders_turns_projection_too(monkeypatch):
    from ctxmgmt import warm_up
    from ctxmgmt.app.testing import HashingEmbedder
    from ctxmgmt.components import static_embedder

    loaded = []
    load = static_embedder.load_projection
    monkeypatch.setattr(static_embedder, "load_projection", lambda *a: loaded.append(a) or load(*a))
    warm_up(HashingEmbedder(), entities=False)
    assert loaded  # KadaneDial's twin and the fast index embed turns through it


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


OLD_NAMES = """BACKENDS BUNDLED_MODEL CallableEmbedder EMBEDDING_CACHE_SIZE ENCODER_NAMES Embedder
EmbeddingCache FROZEN_MAX_TEXTS HALF_WEIGHTS_TOLERANCE SentenceTransformerEmbedder UNIT_TOLERANCE
Vector as_embedder bundled_minilm_path checked_vectors default_embedder dot_rows embed_documents
embed_queries embed_query embedder_dimension embedder_name normalise restored_vectors
shared_queries warm_up""".split()
"""The public names ``ctxmgmt.components.embedder`` held before it was split."""


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_name_of_the_old_module_is_still_exported(name: str) -> None:
    assert hasattr(embedder_module, name)


def test_the_exported_names_are_the_new_modules_objects() -> None:
    from ctxmgmt.components import embedding_cache, embedding_checks, frozen_encoder

    assert embedder_module.EmbeddingCache is embedding_cache.EmbeddingCache
    assert embedder_module.checked_vectors is embedding_checks.checked_vectors
    assert embedder_module.HALF_WEIGHTS_TOLERANCE == frozen_encoder.HALF_WEIGHTS_TOLERANCE
    assert embedder_module.normalise is normalise
    assert isinstance(HashingEmbedder(), Embedder)
