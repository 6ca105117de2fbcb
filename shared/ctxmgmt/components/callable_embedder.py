"""An Embedder made of ``texts -> vectors`` callables (LangChain and LlamaIndex embeddings)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ctxmgmt.components.embedding_checks import checked_vectors


class CallableEmbedder:
    """Wraps ``texts -> vectors`` callables (sync and optionally async) as an Embedder.

    Used for LangChain ``Embeddings`` (``embed_documents``/``embed_query``) and LlamaIndex
    ``BaseEmbedding`` (``get_text_embedding_batch``/``get_query_embedding``).
    """

    def __init__(
        self,
        documents: Callable[[list[str]], Sequence[Sequence[float]]],
        query: Callable[[str], Sequence[float]] | None = None,
        *,
        name: str = "callable",
    ) -> None:
        self._documents = documents
        self._query = query
        self.name = name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed document texts in one call.

        Raises:
            ComponentError: the callable's output is not one finite vector per text.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return checked_vectors(self._documents(list(texts)), len(texts), embedder=self)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query (the framework's query path when it has one); shape (1, dim)."""
        if self._query is None:
            return self.embed([text])
        return checked_vectors(self._query(text), 1, embedder=self)
