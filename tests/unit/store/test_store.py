"""Picking a store from one line of configuration (``ctxmgmt.store``: :func:`open_store`)."""

from __future__ import annotations

import pytest

import ctxmgmt.store
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store import CircuitStore, InMemoryStore, SQLiteStore, open_store, opens_store
from ctxmgmt.store.base import StoreError


def test_none_and_memory_urls_are_in_process_stores() -> None:
    for spec in (None, "memory://", "memory:///"):
        assert type(open_store(spec)) is InMemoryStore


def test_sqlite_urls_open_a_sqlite_store_behind_a_circuit(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = {}
    for spec in ("sqlite:///state.db", f"sqlite:///{tmp_path}/abs.db", "sqlite://"):
        store = open_store(spec)
        assert isinstance(store, CircuitStore) and isinstance(store.inner, SQLiteStore)
        assert store.load("nobody") is None
        paths[spec] = store.inner.path
        store.close()
    assert list(paths.values()) == ["state.db", f"{tmp_path}/abs.db", ":memory:"]
    assert (tmp_path / "state.db").exists()


def test_a_store_object_is_wrapped_once() -> None:
    memory = InMemoryStore()
    assert open_store(memory) is memory
    circuit = CircuitStore(SQLiteStore(":memory:"))
    assert open_store(circuit) is circuit
    sqlite = SQLiteStore(":memory:")
    wrapped = open_store(sqlite)
    assert isinstance(wrapped, CircuitStore) and wrapped.inner is sqlite
    circuit.close()
    wrapped.close()


def test_framework_stores_are_wrapped_by_the_adapters_wrappers() -> None:
    class FrameworkStore:
        pass

    made: list[object] = []

    def wrap(backend):
        made.append(backend)
        return InMemoryStore()

    backend = FrameworkStore()
    store = open_store(backend, wrappers={FrameworkStore: wrap})  # type: ignore[arg-type]
    assert isinstance(store, CircuitStore) and made == [backend]
    store.close()


@pytest.mark.parametrize("spec", ["redis://localhost", "sqlite:", "memory://elsewhere", "state.db", 42])
def test_anything_else_is_a_configuration_error(spec) -> None:
    with pytest.raises(ConfigurationError, match="unknown store"):
        open_store(spec)


def test_a_password_never_reaches_the_error_message() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store("mysql://app:s3cret@db/app")
    assert "s3cret" not in str(caught.value) and "app:***@db/app" in str(caught.value)


def test_an_unopenable_sqlite_file_is_a_store_error(tmp_path) -> None:
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{tmp_path}/missing/dir/state.db")


def test_postgres_store_is_imported_on_first_use() -> None:
    from ctxmgmt.store.postgres import PostgresStore

    assert ctxmgmt.store.PostgresStore is PostgresStore
    with pytest.raises(AttributeError):
        ctxmgmt.store.NoSuchStore  # noqa: B018


def test_only_a_store_named_by_a_string_is_opened_for_its_caller_to_close() -> None:
    assert opens_store("sqlite:///:memory:") and opens_store("postgresql://app@db/app")
    given = SQLiteStore(":memory:")
    assert not opens_store(given) and not opens_store(None)
    assert open_store(given) is not given  # wrapped in a circuit, still the caller's store
    given.close()
