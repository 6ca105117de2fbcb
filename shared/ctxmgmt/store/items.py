"""State stores over a framework's key-value store of JSON documents (LangGraph, LlamaIndex).

The adapters' stores (``langchain_ctxmgmt.LangGraphStateStore`` over a LangGraph
``BaseStore``, ``llamaindex_ctxmgmt.KVStateStore`` over a LlamaIndex ``BaseKVStore``) share
this layout and logic; they only translate four item operations.

Layout: one *space* per session (:func:`space_name` of the session's
:func:`~ctxmgmt.store.keys.bounded_key`: escaped to ``[A-Za-z0-9_%-]``, or a digest when long), holding

- ``meta``: ``{"strategy", "config", "schema", "version", "turns"}``;
- ``turn:{i:08d}``: ``{"turn": i, "chain": str, "records": {name: {"kind", "data"}}}`` where
  ``kind`` is ``"json"`` (``data`` is the JSON *text*, so key order, NaN and large integers
  survive any backend's JSON handling), ``"f32"`` (``data`` is the base64 of the
  little-endian float32 bytes) or ``"del"`` (the record was removed).

Compare-and-set is exact between the threads of one process (one lock per store) but only
best effort across processes: these stores have no transactions, so two processes adding to
the same session at the same moment can both succeed and one's turn is overwritten. Writes
are ordered so that a crash never leaves a readable inconsistent session (turn items first,
then ``meta``, which commits them; a truncation rewrites ``meta`` first), and a load that
finds a turn missing raises :class:`StoreError` (the caller rebuilds). For several worker
processes writing the same sessions, use :class:`~ctxmgmt.store.SQLiteStore` (one host) or
:class:`~ctxmgmt.store.PostgresStore`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import string
import threading
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import (
    SCHEMA_VERSION,
    AsyncStateStore,
    CorruptRecordError,
    StaleStateError,
    StoredSession,
    StoreError,
    TurnEntry,
    checked_header,
    encode,
    fold,
)
from ctxmgmt.store.keys import bounded_key

META = "meta"
TURN_PREFIX = "turn:"
MAX_TURNS = 100_000_000
"""A stored turn count above this is a corrupt header (a load would list that many items)."""
MAX_SPACE_CHARS = 120
"""Longer escaped keys become ``h_`` + SHA-256 hex (namespace/collection names are indexed)."""

_SAFE = frozenset(string.ascii_letters + string.digits + "_-")


def space_name(key: str) -> str:
    """A session key as a namespace label / collection suffix, one-to-one.

    ``k_`` + the key with every character outside ``[A-Za-z0-9_-]`` percent-encoded (UTF-8),
    so it never contains ``.``, ``/``, NUL or spaces and is never empty; ``h_`` + the SHA-256
    hex digest when that would exceed :data:`MAX_SPACE_CHARS`.

    Example:
        >>> space_name("thread 1.a")
        'k_thread%201%2Ea'
    """
    escaped = "".join(
        ch if ch in _SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) for ch in key
    )
    if len(escaped) <= MAX_SPACE_CHARS:
        return "k_" + escaped
    return "h_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def turn_name(turn: int) -> str:
    """The item name of turn ``turn`` (``turn:00000042``)."""
    return f"{TURN_PREFIX}{turn:08d}"


def turn_of(name: str) -> int | None:
    """The turn index an item name stands for, or None (``meta``, foreign items)."""
    if not name.startswith(TURN_PREFIX):
        return None
    digits = name[len(TURN_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def record_item(value: Any) -> dict[str, str]:
    """A record value as ``{"kind", "data"}`` (JSON-safe strings)."""
    kind, data = encode(value)
    if kind == "f32":
        return {"kind": kind, "data": base64.b64encode(data).decode("ascii")}
    return {"kind": kind, "data": data.decode("utf-8")}


def record_row(name: str, item: Any) -> tuple[str, str, bytes]:
    """``(name, kind, raw bytes)`` of a stored record item (for :func:`~ctxmgmt.store.base.fold`).

    Raises:
        StoreError: malformed item.
    """
    if not (
        isinstance(item, Mapping) and isinstance(item.get("kind"), str) and isinstance(item.get("data"), str)
    ):
        raise CorruptRecordError(f"corrupt record {name!r}: {item!r:.80}")
    kind, data = item["kind"], item["data"]
    if kind == "f32":
        try:
            return name, kind, base64.b64decode(data.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise CorruptRecordError(f"corrupt f32 record {name!r}: {exc}") from exc
    return name, kind, data.encode("utf-8")


class ItemStateStore(AsyncStateStore):
    """A :class:`~ctxmgmt.store.base.StateStore` over four item operations on JSON documents.

    Subclasses implement :meth:`_get_items`, :meth:`_put_items`, :meth:`_delete_items` and
    :meth:`_list_names` for one *space* (a session's namespace or collection). See the module
    docstring for the layout and the consistency guarantees.
    """

    backend_type: ClassVar[type] = object
    """The framework store class this wraps (checked on construction)."""

    def __init__(self, backend: Any) -> None:
        if not isinstance(backend, self.backend_type):
            raise ConfigurationError(
                f"{type(self).__name__} wraps a {self.backend_type.__name__}, not {type(backend).__name__}"
            )
        self.backend = backend
        # One lock for the whole store: the stores wrapped (LangGraph's InMemoryStore among them)
        # are not safe for concurrent use from several threads, even on different namespaces.
        self._store_lock = threading.RLock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.backend).__name__})"

    def __getstate__(self) -> dict[str, Any]:
        """The wrapped store (copied or pickled as it allows); a copy has its own lock."""
        return {k: v for k, v in self.__dict__.items() if k != "_store_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._store_lock = threading.RLock()

    # -- what a backend provides -----------------------------------------------------------------
    @abstractmethod
    def _get_items(self, space: str, names: Sequence[str]) -> list[dict[str, Any] | None]:
        """The items ``names`` of ``space`` in that order (None where absent)."""

    @abstractmethod
    def _put_items(self, space: str, items: Mapping[str, dict[str, Any]]) -> None:
        """Write (insert or replace) items of ``space``."""

    @abstractmethod
    def _delete_items(self, space: str, names: Sequence[str]) -> None:
        """Delete items of ``space`` (absent ones ignored)."""

    @abstractmethod
    def _list_names(self, space: str) -> list[str]:
        """Every item name in ``space``."""

    # -- StateStore ------------------------------------------------------------------------------
    def _lock(self, key: str) -> threading.RLock:
        del key  # every session shares the store's lock
        return self._store_lock

    def _meta(self, space: str) -> dict[str, Any] | None:
        (meta,) = self._get_items(space, [META])
        if meta is None:
            return None
        if not isinstance(meta, Mapping):
            raise CorruptRecordError(f"corrupt session header in {space!r}: not an object")
        strategy, config, schema, version = checked_header(
            meta.get("strategy"), meta.get("config"), meta.get("schema"), meta.get("version")
        )
        turns = meta.get("turns")
        if isinstance(turns, bool) or not isinstance(turns, int) or not 0 <= turns <= MAX_TURNS:
            raise CorruptRecordError(f"corrupt session header in {space!r}: turns {turns!r:.40}")
        return {"strategy": strategy, "config": config, "schema": schema, "version": version, "turns": turns}

    def load(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """The session folded over its first ``turns`` turns; None if absent."""
        space = space_name(bounded_key(key))
        with self._lock(key):
            meta = self._meta(space)
            if meta is None:
                return None
            stored = int(meta["turns"])
            count = stored if turns is None else max(0, min(turns, stored))
            items = self._get_items(space, [turn_name(i) for i in range(count)]) if count else []
        chains: list[str] = []
        rows: list[tuple[str, str, bytes]] = []
        for i, item in enumerate(items):
            if item is None:
                raise StoreError(f"session {key!r}: turn {i} of {stored} is missing (concurrent writer?)")
            if not isinstance(item, Mapping):
                raise CorruptRecordError(f"session {key!r}: corrupt turn {i}")
            records, chain = item.get("records"), item.get("chain")
            if not isinstance(chain, str) or not isinstance(records, Mapping):
                raise CorruptRecordError(f"session {key!r}: corrupt turn {i}")
            chains.append(chain)
            rows.extend(record_row(str(name), records[name]) for name in sorted(records, key=str))
        return StoredSession(
            strategy=meta["strategy"],
            config=dict(meta["config"]),
            schema=int(meta["schema"]),
            version=int(meta["version"]),
            chains=chains,
            records=fold(rows),
        )

    def append(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """Write the new turns' items, then ``meta`` (compare-and-set, see the module docs)."""
        space = space_name(bounded_key(key))
        with self._lock(key):
            meta = self._meta(space)
            version, stored = (0, 0) if meta is None else (int(meta["version"]), int(meta["turns"]))
            if version != expected_version:
                raise StaleStateError(f"session {key!r} is at version {version}, not {expected_version}")
            if entries and entries[0].turn != stored:
                raise StaleStateError(
                    f"session {key!r} has {stored} turns; cannot append turn {entries[0].turn}"
                )
            items = {
                turn_name(stored + offset): {
                    "turn": stored + offset,
                    "chain": entry.chain,
                    "records": {name: record_item(value) for name, value in entry.records.items()},
                }
                for offset, entry in enumerate(entries)
            }
            if items:
                self._put_items(space, items)
            new = {
                "strategy": strategy,
                "config": dict(config),
                "schema": SCHEMA_VERSION,
                "version": version + 1,
                "turns": stored + len(entries),
            }
            self._put_items(space, {META: new})
            return version + 1

    def truncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Rewrite ``meta`` to ``turns`` turns, then delete the later turns' items."""
        space = space_name(bounded_key(key))
        with self._lock(key):
            meta = self._meta(space)
            version = 0 if meta is None else int(meta["version"])
            if version != expected_version:
                raise StaleStateError(f"session {key!r} is at version {version}, not {expected_version}")
            if meta is None:
                return 0
            kept = max(0, min(turns, int(meta["turns"])))
            self._put_items(space, {META: {**meta, "version": version + 1, "turns": kept}})
            doomed = [n for n in self._list_names(space) if (turn := turn_of(n)) is not None and turn >= kept]
            if doomed:
                self._delete_items(space, doomed)
            return version + 1

    def delete(self, key: str) -> None:
        """Delete ``meta`` (the session is gone), then every other item of the session."""
        space = space_name(bounded_key(key))
        with self._lock(key):
            self._delete_items(space, [META])
            rest = [name for name in self._list_names(space) if name != META]
            if rest:
                self._delete_items(space, rest)

    def close(self) -> None:
        """Nothing to release: the framework store belongs to the caller."""
