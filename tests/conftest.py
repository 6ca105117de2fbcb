"""Shared fixtures: models are loaded once per test session."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import pytest

from ctxmgmt.components.embedder import normalise


class HashingEmbedder:
    """Deterministic bag-of-words embedder for fast tests (no model weights).

    Texts sharing words get similar vectors, so relevance still behaves sensibly.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[row, h % self.dim] += 1.0
            out[row, 0] += 0.01
        return normalise(out)


@pytest.fixture
def hashing_embedder() -> HashingEmbedder:
    """A fresh fast embedder (counts its calls in ``.calls``)."""
    return HashingEmbedder()


@pytest.fixture(scope="session")
def default_embedder():
    """The real default embedder (bundled all-MiniLM-L6-v2), loaded once per session."""
    from ctxmgmt.components.embedder import default_embedder as make

    embedder = make()
    embedder.embed(["warm up"])
    return embedder


# -- a throwaway PostgreSQL server ---------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres_dsn():
    """A PostgreSQL server for this test session, reachable only through a unix socket.

    Started from the server binaries (``initdb``/``pg_ctl``, as the ``postgres`` user when
    running as root), trust auth, data and socket in a fresh temporary directory; yields a
    conninfo string (``host=DIR dbname=ctxmgmt user=postgres``). Missing binaries fail the
    session under CI (``$CI`` set) and skip elsewhere.
    """
    import os
    from contextlib import ExitStack

    from ctxmgmt.store.testing import PostgresUnavailableError, throwaway_postgres

    with ExitStack() as stack:
        try:
            dsn = stack.enter_context(throwaway_postgres())
        except PostgresUnavailableError as exc:
            if os.environ.get("CI"):
                pytest.fail(str(exc))
            pytest.skip(str(exc))
        yield dsn
