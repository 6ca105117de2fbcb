"""Where sessions' derived state lives: in process, SQLite, PostgreSQL, or a framework's store.

One line of configuration picks the backend (:func:`open_store`); every real backend is
wrapped in a :class:`CircuitStore`, so an outage costs one failed call (the others skip the
store at once and work in process) and a memory starts while its PostgreSQL server is down::

    open_store(None)                          # in process (the default)
    open_store("sqlite:///memories.db")       # one file, several processes on one host
    open_store("postgresql://app@db/app")     # many application servers

:class:`PostgresStore` is imported on first use, so ``import ctxmgmt.store`` never imports
psycopg.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import (
    AsyncStateStore,
    StaleStateError,
    StateStore,
    StoredSession,
    StoreError,
    TurnEntry,
)
from ctxmgmt.store.circuit import CircuitStore, StoreSlowError, StoreTimeoutError, StoreUnavailableError
from ctxmgmt.store.memory import InMemoryStore
from ctxmgmt.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from ctxmgmt.store.postgres import PostgresStore

__all__ = [
    "AsyncStateStore",
    "CircuitStore",
    "InMemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "StaleStateError",
    "StateStore",
    "StoreError",
    "StoreSlowError",
    "StoreTimeoutError",
    "StoreUnavailableError",
    "StoredSession",
    "TurnEntry",
    "open_store",
    "opens_store",
]

ACCEPTED = (
    "None or 'memory://' (in process), 'sqlite:///relative/path.db', 'sqlite:////absolute/path.db', "
    "'sqlite:///:memory:', a PostgreSQL DSN ('postgresql://user:password@host:5432/dbname', "
    "'postgres://...' or 'host=... dbname=...'), or a StateStore object"
)


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from ctxmgmt.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_KEYWORD_CONNINFO = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|service|sslmode)\s*=", re.IGNORECASE
)
"""A libpq keyword/value connection string (its first keyword is a connection keyword)."""


def open_store(
    spec: StateStore | str | None = None,
    *,
    wrappers: Mapping[type, Callable[[Any], StateStore]] | None = None,
) -> StateStore:
    """The state store ``spec`` names.

    Args:
        spec: ``None`` or ``"memory://"``: an :class:`InMemoryStore`.
            ``"sqlite:///path.db"``: a :class:`SQLiteStore` on ``path.db`` relative to the
            working directory (``"sqlite:////abs/path.db"`` for an absolute path,
            ``"sqlite:///:memory:"`` for a private in-memory database).
            ``"postgresql://..."`` or ``"postgres://..."`` (also ``"postgresql+psycopg://..."``):
            a :class:`PostgresStore` on that DSN; so is a libpq keyword conninfo
            (``"host=/run/postgresql dbname=app user=app"``).
            A :class:`StateStore` object is wrapped too (an :class:`InMemoryStore` or a
            :class:`CircuitStore` is returned as is).
            Every store but the in-process one comes back in a :class:`CircuitStore`; a
            PostgreSQL server that is down when the store is opened is connected in the
            background (the store starts unavailable instead of raising).
        wrappers: Framework store classes and the StateStore that wraps each (the adapters
            pass theirs: a LangGraph ``BaseStore``, a LlamaIndex ``BaseKVStore``).

    Raises:
        ConfigurationError: ``spec`` is none of these, or psycopg is missing for a DSN.
        StoreError: the SQLite file cannot be opened (a PostgreSQL server that cannot be
            reached is retried in the background instead).

    Example:
        >>> open_store("sqlite:///:memory:").load("nobody") is None
        True
    """
    if spec is None:
        return InMemoryStore()
    for kind, wrap in (wrappers or {}).items():
        if isinstance(spec, kind):
            return CircuitStore(wrap(spec))
    if isinstance(spec, str):
        text = spec.strip()
        scheme, sep, rest = text.partition("://")
        scheme = scheme.lower()
        if sep and scheme == "memory" and rest in ("", "/"):
            return InMemoryStore()
        if sep and scheme == "sqlite":
            if rest == "":
                return CircuitStore(SQLiteStore(":memory:"))
            if rest.startswith("/") and rest != "/":
                return CircuitStore(SQLiteStore(rest[1:]))
        if sep and scheme.split("+", 1)[0] in ("postgresql", "postgres"):
            return _postgres("postgresql://" + rest)
        if not sep and _KEYWORD_CONNINFO.match(text):  # libpq keyword form: "host=/tmp dbname=app"
            return _postgres(text)
        raise ConfigurationError(f"unknown store {_shorten(spec)!r}; use {ACCEPTED}")
    if isinstance(spec, InMemoryStore | CircuitStore):
        return spec
    if isinstance(spec, StateStore):
        return CircuitStore(spec)
    raise ConfigurationError(f"unknown store {type(spec).__name__} object; use {ACCEPTED}")


def opens_store(spec: object) -> bool:
    """Whether :func:`open_store` opens a store of its own for ``spec``: a URL or DSN string.

    Its caller owns that store and closes it (an adapter's ``close()``). A store object passed
    in, wrapped or not, belongs to whoever passed it.
    """
    return isinstance(spec, str)


def _postgres(conninfo: str) -> StateStore:
    """A :class:`PostgresStore` on ``conninfo`` behind a circuit; created later if the server is down."""
    from ctxmgmt.store.postgres import PostgresStore
    from ctxmgmt.store.postgres_pools import import_psycopg

    import_psycopg()  # a missing driver is a ConfigurationError now, not a retry forever
    return CircuitStore(factory=functools.partial(PostgresStore, conninfo))


def _shorten(text: str, limit: int = 80) -> str:
    """``text`` for a message: cut, and without a URL password."""
    scheme, sep, rest = text.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        creds, _, host = rest.partition("@")
        text = f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else text
    return text if len(text) <= limit else text[: limit - 3] + "..."
