"""Embedding calls: documents and queries, bounded and checked, each query once per call scope."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.embedder_protocol import Embedder, embedder_name
from ctxmgmt.components.embedding_checks import checked_vectors
from ctxmgmt.components.llm_call import bound_input
from ctxmgmt.messages.exceptions import ComponentError, CtxMgmtError


def _run(embedder: Any, call: Callable[[], Any]) -> Any:
    """``call()``, with any failure that is not a ctxmgmt error reported as a ComponentError."""
    try:
        return call()
    except CtxMgmtError:
        raise
    except Exception as exc:
        raise ComponentError(
            f"embedder {embedder_name(embedder)!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def embed_documents(embedder: Embedder, texts: Sequence[str], *, dim: int | None = None) -> np.ndarray:
    """Embed document texts in one batch, checked; shape (len(texts), dim).

    The vectors pass :func:`~ctxmgmt.components.embedding_checks.checked_vectors`.

    Each text is cut to :data:`~ctxmgmt.components.llm_call.MAX_INPUT_CHARS` characters first
    (:func:`~ctxmgmt.components.llm_call.bound_input`), so no message makes an embedder tokenise
    megabytes it would cut to a few hundred tokens anyway.

    Args:
        embedder: Any Embedder.
        texts: The texts.
        dim: The dimension the vectors must have (None: any).

    Raises:
        ComponentError: the embedder raised, or returned anything but one finite vector of
            dimension ``dim`` per text.
    """
    texts = [bound_input(t) for t in texts]
    if not texts:
        return np.zeros((0, dim or 0), dtype=np.float32)
    vectors = _run(embedder, lambda: embedder.embed(texts))
    return checked_vectors(vectors, len(texts), embedder=embedder, dim=dim)


def embed_query(embedder: Embedder, text: str, *, dim: int | None = None) -> np.ndarray:
    """Embed one query with the embedder's query path if it has one, checked; shape (1, dim)."""
    return embed_queries(embedder, [text], dim=dim)


_SHARED_QUERIES: contextvars.ContextVar[dict[tuple[int, str], tuple[Any, np.ndarray]] | None] = (
    contextvars.ContextVar("ctxmgmt_shared_queries", default=None)
)


@contextlib.contextmanager
def shared_queries() -> Iterator[None]:
    """Within it, each query text is embedded once per embedder, however many readers ask.

    A call that selects over a history with a backlog embeds its question for the strategy and
    for the fast index (:mod:`ctxmgmt.session.backlog`), with the same MiniLM: one forward pass serves
    both. Scoped to one call (:meth:`ctxmgmt.session.conversation.Conversation.select`), so nothing is
    kept between calls.
    """
    if _SHARED_QUERIES.get() is not None:  # nested: the outer scope serves
        yield
        return
    token = _SHARED_QUERIES.set({})
    try:
        yield
    finally:
        _SHARED_QUERIES.reset(token)


def embed_queries(embedder: Embedder, texts: Sequence[str], *, dim: int | None = None) -> np.ndarray:
    """Embed several queries: one batch, or the embedder's query path per text if it has one.

    Checked like :func:`embed_documents` (same arguments and errors); shape (len(texts), dim).
    Within :func:`shared_queries`, a text this embedder already embedded there is not embedded again.
    """
    texts = [bound_input(t) for t in texts]
    shared = _SHARED_QUERIES.get()
    found: dict[str, np.ndarray] = {}
    if shared is not None:
        for text in texts:
            hit = shared.get((id(embedder), text))
            if hit is not None and (dim is None or hit[1].shape[-1] == dim):
                found[text] = hit[1]
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        query_fn = getattr(embedder, "embed_query", None)
        if not callable(query_fn):
            computed = list(embed_documents(embedder, missing, dim=dim))
        else:
            computed = [
                checked_vectors(
                    _run(embedder, functools.partial(query_fn, text)), 1, embedder=embedder, dim=dim
                )[0]
                for text in missing
            ]
        for text, row in zip(missing, computed, strict=True):
            found[text] = row
            if shared is not None:  # the embedder kept with it: its id is not reused meanwhile
                shared[(id(embedder), text)] = (embedder, row)
    if not texts:
        return np.zeros((0, dim or 0), dtype=np.float32)
    return np.vstack([found[t] for t in texts])
