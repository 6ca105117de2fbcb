"""Shared fixtures: models are loaded once per test session.

Tests that load the real MiniLM or spaCy weights carry the ``model`` mark (3-12 s a module the
first time); ``pytest -m "not model"`` leaves them out. Tests that use the ``default_embedder``,
``spacy_extractor`` or ``onnx_embedder`` fixtures are marked here; the others are marked in
their module. In a run that leaves the marked tests out, a test that still loads a model fails
and names the mark it needs, so a missing mark shows at once.
"""

from __future__ import annotations

import pytest

from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.store.sqlite import SQLiteStore

MODEL_FIXTURES = frozenset({"default_embedder", "spacy_extractor", "onnx_embedder"})
"""Fixtures that load real weights: a test that uses one is a ``model`` test."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use a model-loading fixture with ``model``."""
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


def _models_left_out(config: pytest.Config) -> bool:
    """Whether this run deselects the ``model`` tests (``-m "not model"``)."""
    return "not model" in " ".join((config.getoption("markexpr") or "").split())


@pytest.fixture(autouse=True)
def models_only_where_marked(request, monkeypatch):
    """In a ``-m "not model"`` run, loading MiniLM or spaCy fails the test and names the mark."""
    if request.node.get_closest_marker("model") is not None or not _models_left_out(request.config):
        return
    import ctxmgmt.components.entities as entities_module
    import ctxmgmt.components.sentence_transformer_embedder as embedder_module

    def refuse(*args, **kwargs):
        pytest.fail(
            f"{request.node.nodeid} loads real model weights: mark it @pytest.mark.model", pytrace=False
        )

    for module, name in (
        (embedder_module, "_load_sentence_transformer"),
        (embedder_module, "_load_onnx"),
        (entities_module, "_load_spacy"),
    ):
        monkeypatch.setattr(module, name, refuse)


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


@pytest.fixture
def pg_dsn(postgres_dsn):
    """A conninfo whose tables live in a fresh schema (an empty store per test)."""
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{postgres_dsn} options='-c search_path={schema}'"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(autouse=True)
def untimed_derivation(monkeypatch):
    """Conversations derive every new turn in each call (no ``INDEX_SECONDS`` limit), so what a
    test sees never depends on how fast the machine is; the time limit has its own tests, which
    set ``index_seconds`` and a fake clock (``tests/unit/session/test_conversation.py``)."""
    import ctxmgmt.session.conversation

    monkeypatch.setattr(ctxmgmt.session.conversation, "INDEX_SECONDS", None)


@pytest.fixture
def closed_stores(monkeypatch, tmp_path) -> tuple[str, list[str]]:
    """(a ``sqlite:///`` URL in the test's directory, the paths of SQLite stores closed so far).

    ``SQLiteStore.close`` is spied on; the real one still runs.
    """
    closed: list[str] = []
    real = SQLiteStore.close

    def close(self: SQLiteStore) -> None:
        closed.append(str(self.path))
        real(self)

    monkeypatch.setattr(SQLiteStore, "close", close)
    return f"sqlite:///{tmp_path / 'state.db'}", closed
