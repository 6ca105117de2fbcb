"""A bounded, content-keyed cache of embeddings, through which every strategy embeds."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from ctxmgmt.components.embedder_protocol import Embedder, embedder_dimension
from ctxmgmt.components.embedding_calls import embed_documents, embed_queries

EMBEDDING_CACHE_SIZE = 4096
"""Texts whose vectors one :class:`EmbeddingCache` keeps (about 6 MB of 384-d float32)."""


class EmbeddingCache:
    """Bounded, content-keyed cache of embeddings (least recently used out first).

    Keys are texts' fingerprints (e.g. ``Turn.fingerprint``) or the texts themselves; every
    strategy embeds through one of these, so a text is embedded once while it is in use and
    memory stays bounded however long the conversation. It survives a strategy's ``reset``, so a
    rebuild after an edited history re-embeds only the turns whose text changed.

    Vectors are checked before they are stored
    (:func:`~ctxmgmt.components.embedding_checks.checked_vectors`): one finite vector per text,
    all of one dimension (that of the first vector stored), so a faulty embedder raises
    :class:`~ctxmgmt.messages.exceptions.ComponentError` and leaves nothing behind; the next
    call embeds again.

    Args:
        embedder: The Embedder that computes missing vectors.
        size: Most vectors kept; 4096.

    Attributes:
        dim: Dimension of the vectors (None until the first is stored).
    """

    def __init__(self, embedder: Embedder, *, size: int = EMBEDDING_CACHE_SIZE) -> None:
        self.embedder = embedder
        self.size = size
        self.dim: int | None = None
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, key: str) -> bool:
        return key in self._vectors

    def put(self, key: str, vector: np.ndarray) -> None:
        """Store ``vector`` (float32) under ``key``; the first vector stored sets :attr:`dim`."""
        vector = np.asarray(vector, dtype=np.float32)
        if self.dim is None:
            self.dim = int(vector.shape[-1])
        self._vectors[key] = vector
        self._touch(key)
        while len(self._vectors) > self.size:
            try:
                self._vectors.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def get(self, key: str) -> np.ndarray | None:
        """The cached vector of ``key`` (None if absent)."""
        vector = self._vectors.get(key)
        if vector is not None:
            self._touch(key)
        return vector

    def _touch(self, key: str) -> None:
        # The background worker fills the cache (Strategy.prepare) while a call reads it: each
        # OrderedDict operation is atomic, and a key evicted in between is simply not moved.
        try:
            self._vectors.move_to_end(key)
        except KeyError:
            pass

    def embed(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> list[np.ndarray]:
        """Vectors of ``texts`` (documents), embedding only the keys not cached, in one batch."""
        keys = list(keys) if keys is not None else list(texts)
        return self._cached(keys, texts, embed_documents)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Query vectors of ``queries`` (the embedder's query path), cached by text."""
        return self._cached([f"q:{q}" for q in queries], queries, embed_queries)

    def _cached(
        self, keys: list[str], texts: Sequence[str], compute: Callable[..., np.ndarray]
    ) -> list[np.ndarray]:
        """The vectors of ``keys``: cached ones as they are, the rest computed from ``texts`` in one batch."""
        found = {k: v for k in dict.fromkeys(keys) if (v := self.get(k)) is not None}
        missing = [i for k, i in {k: i for i, k in enumerate(keys)}.items() if k not in found]
        if missing:
            vectors = compute(self.embedder, [texts[i] for i in missing], dim=self.dim)
            for i, vector in zip(missing, vectors, strict=True):
                found[keys[i]] = np.asarray(vector, dtype=np.float32)
                self.put(keys[i], vector)
        return [found[k] for k in keys]

    def expected_dim(self) -> int | None:
        """The dimension new vectors will have: :attr:`dim`, else the one the embedder declares."""
        return self.dim if self.dim is not None else embedder_dimension(self.embedder)

    def clear(self) -> None:
        """Drop every vector (and forget :attr:`dim`)."""
        self._vectors.clear()
        self.dim = None
