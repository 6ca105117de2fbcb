"""The :class:`ForestVectors` a discourse tree embeds: whole turns and user messages, cached."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.embedder import (
    Embedder,
    embed_documents,
    embed_query,
    embedder_dimension,
    restored_vectors,
)
from ctxmgmt.components.llm_call import bound_input
from ctxmgmt.messages.types import Turn

__all__ = ["QUERY_CACHE", "ForestVectors"]

QUERY_CACHE = 64
"""User-message vectors kept, the least recently used dropped first (a plan and its select
embed the same query once)."""


class ForestVectors:
    """Embeddings of whole turns (by fingerprint) and of user messages (by their text).

    Turn vectors are kept for every turn seen, user-message vectors for the newest
    :data:`QUERY_CACHE` messages (a message bound by :func:`~ctxmgmt.components.llm_call.bound_input`).
    Both survive a reset: they depend on the text only. The embedder is passed to each call
    (the strategy's own, a component it shares).
    """

    def __init__(self) -> None:
        self.contents: dict[str, np.ndarray] = {}  # turn fingerprint -> whole-turn vector
        self.queries: OrderedDict[str, np.ndarray] = OrderedDict()  # user message -> its vector
        self._asked: set[str] = set()  # the queries embedded as questions (embed_query)
        self._staged: dict[str, np.ndarray] = {}  # vectors embedded ahead of add (:meth:`stage`)

    def dimension(self) -> int | None:
        """Dimension of the embeddings in use (None before the first): new ones must match it."""
        for cache in (self.contents, self.queries):
            try:  # a background prepare reads this while a call may change the caches
                return int(next(iter(list(cache.values()))).shape[-1])
            except StopIteration:
                continue
        return None

    def query(self, embedder: Embedder, text: str) -> np.ndarray:
        """The vector of the user message ``text``, embedded as a query when not cached."""
        vector = self.queries.get(text)
        if vector is None:
            vector = embed_query(embedder, text, dim=self.dimension())[0]
            self.queries[text] = vector
            self._asked.add(text)
            while len(self.queries) > QUERY_CACHE:
                self._asked.discard(self.queries.popitem(last=False)[0])
        else:
            self.queries.move_to_end(text)
        return vector

    def asked(self, text: str) -> bool:
        """Whether the cached vector of ``text`` was embedded as a question (``embed_query``).

        A fast twin's questions and turns are embedded by different encoders, whose cosines
        with the turns are read through different maps.
        """
        return text in self._asked

    def stage(self, embedder: Embedder, turns: Sequence[Turn]) -> None:
        """Embed ``turns``' contents and user messages in one batch for the next :meth:`take`.

        Safe beside a call on another thread: the vectors are staged in a new dict, assigned at once.
        """
        self._staged = self._embed_new(embedder, turns, self._staged)

    def take(self, embedder: Embedder, turns: Sequence[Turn]) -> None:
        """Cache the vectors of ``turns`` (the staged ones, the others embedded in one batch)."""
        staged, self._staged = self._embed_new(embedder, turns, self._staged), {}
        for key, vector in staged.items():
            cache = self.contents if key.startswith("c:") else self.queries
            cache[key[2:]] = vector
            self._asked.discard(key[2:])

    def drop_staged(self) -> None:
        """Forget the vectors staged for turns that will not be added."""
        self._staged = {}

    def restore(
        self, embedder: Embedder, state: Mapping[str, Any], turns: Sequence[Turn]
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(whole-turn vectors, user-message vectors) of a saved forest, checked; the first cached.

        States saved before user-message vectors were kept reuse the whole-turn ones.

        Raises:
            CorruptStateError: a vector is missing, of another dimension or not finite.
        """
        # checked before any is cached: a bad one must not set the caches' dimension
        count, dim = len(turns), self.dimension() or embedder_dimension(embedder)
        vectors = restored_vectors(state["embeddings"], count, dim=dim, what="embeddings")
        dim = int(vectors[0].shape[0]) if vectors else dim
        queries = state.get("query_embeddings", state["embeddings"])
        query_vectors = restored_vectors(queries, count, dim=dim, what="query embeddings")
        for turn, vector in zip(turns, vectors, strict=True):
            self.contents[turn.fingerprint] = vector
        return vectors, query_vectors

    def _embed_new(
        self, embedder: Embedder, turns: Sequence[Turn], have: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """``have`` plus the vectors, embedded in one batch, that neither it nor the caches hold.

        Keys: ``c:`` + a turn's fingerprint (its content), ``q:`` + a turn's query text.
        """
        wanted: dict[str, str] = {}
        for turn in turns:
            if turn.fingerprint not in self.contents and f"c:{turn.fingerprint}" not in have:
                wanted[f"c:{turn.fingerprint}"] = turn.text
        for query in sorted({bound_input(t.query or t.text) for t in turns}):
            if query not in self.queries and f"q:{query}" not in have:
                wanted[f"q:{query}"] = query
        out = dict(have)
        if wanted:  # one batch: a turn whose query was never selected costs two forward passes
            vectors = embed_documents(embedder, list(wanted.values()), dim=self.dimension())
            out.update(zip(wanted, vectors, strict=True))
        return out
