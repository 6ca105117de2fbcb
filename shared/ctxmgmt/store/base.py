"""The state-store protocol: per-session derived state, written one turn at a time.

A session's derived state is a log of *turn entries*. Adding turn ``i`` writes one entry: the
turn's chain hash (a running hash of every turn's fingerprint up to ``i``, so any edit or
deletion anywhere before ``i`` changes it) and the records that changed when the strategy
took the turn: ``key -> value`` where a value is JSON data, a float32 vector
(``numpy.ndarray``, stored as raw bytes) or None (the record was removed). The state after
turn ``k`` is the latest value of each key over the entries of turns ``0..k``, so the state
before an edited turn is always recoverable and everything derived from the edited turn and
later is deleted with :meth:`StateStore.truncate`.

Writes are compare-and-set on a per-session ``version``: an append names the version it
read, and fails with :class:`StaleStateError` if another writer got there first. Nothing is
pickled; every SQL statement is parameterised; any string is a valid session key.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ctxmgmt.adapter.offload import run_blocking_stored
from ctxmgmt.messages.exceptions import CtxMgmtError

SCHEMA_VERSION = 1
"""Version of the stored layout; a stored session of another version is rebuilt."""


class StoreError(CtxMgmtError, RuntimeError):
    """A state store failed (connection, corrupt data); selection falls back to a rebuild."""


class CorruptRecordError(StoreError):
    """A stored record cannot be decoded; the session's derived state is rebuilt."""


class StaleStateError(StoreError):
    """Another writer changed the session since it was read (compare-and-set failed)."""


RETRY_BACKOFF = 0.005
"""Seconds bounding the first wait after a lost compare-and-set (:func:`wait_after_conflict`)."""

MAX_RETRY_WAIT = 0.2
"""Longest wait (seconds) between two attempts after a lost compare-and-set."""


def wait_after_conflict(attempt: int) -> None:
    """Sleep before retry ``attempt`` (0-based) after a lost compare-and-set.

    A random time below ``RETRY_BACKOFF * 2**attempt`` seconds (capped at
    :data:`MAX_RETRY_WAIT`), so writers that keep colliding on one session spread out.
    """
    time.sleep(random.uniform(0.0, min(MAX_RETRY_WAIT, RETRY_BACKOFF * 2**attempt)))  # noqa: S311


Value = Any
"""A record value: JSON data, a float32 ``numpy.ndarray`` or None (deleted)."""


@dataclass(frozen=True)
class TurnEntry:
    """What adding one turn wrote.

    Attributes:
        turn: The turn's index in the session (0-based).
        chain: Running hash of the fingerprints of turns ``0..turn`` (hex).
        records: Records that changed: key -> value (None = removed).
    """

    turn: int
    chain: str
    records: Mapping[str, Value] = field(default_factory=dict)


@dataclass
class StoredSession:
    """A session as loaded: header plus the folded records.

    Attributes:
        strategy: Name of the strategy that wrote it.
        config: That strategy's parameters (``StrategyConfig.to_dict()``).
        schema: :data:`SCHEMA_VERSION` it was written with.
        version: Compare-and-set counter (0 = never written).
        chains: Chain hash per stored turn, in order.
        records: Latest value per key over the loaded turns (removed keys left out).
    """

    strategy: str
    config: dict[str, Any]
    schema: int
    version: int
    chains: list[str]
    records: dict[str, Value]


def checked_header(
    strategy: Any, config: Any, schema: Any, version: Any
) -> tuple[str, dict[str, Any], int, int]:
    """A stored session header as ``(strategy, config, schema, version)``, its types checked.

    ``config`` may be the stored JSON text (the SQL stores) or the decoded mapping.

    Raises:
        CorruptRecordError: a field has the wrong type, the config is not a JSON object, or
            schema/version are not integers.
    """
    try:
        if isinstance(config, bytes | bytearray | memoryview):
            config = bytes(config).decode("utf-8")
        if isinstance(config, str):
            config = json.loads(config)
        if not isinstance(strategy, str) or not isinstance(config, Mapping):
            raise TypeError("strategy is not text or config is not a JSON object")
        numbers = []
        for value in (schema, version):
            if isinstance(value, bool) or not isinstance(value, int | str | float):
                raise TypeError(f"{value!r:.40} is not an integer")
            number = int(value)
            if number != value and str(number) != str(value).strip():
                raise ValueError(f"{value!r:.40} is not an integer")
            numbers.append(number)
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"corrupt session header: {type(exc).__name__}: {str(exc):.200}") from None
    return strategy, dict(config), numbers[0], numbers[1]


def encode(value: Value) -> tuple[str, bytes]:
    """A record value as ``(kind, bytes)``: ``"f32"`` vectors, ``"json"`` data, ``"del"``."""
    if value is None:
        return "del", b""
    if isinstance(value, np.ndarray):
        return "f32", np.ascontiguousarray(value, dtype="<f4").tobytes()
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return "json", text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON's \uXXXX escape keeps it, in ASCII
        return "json", json.dumps(value, separators=(",", ":")).encode("ascii")


def decode(kind: str, data: bytes | memoryview) -> Value:
    """Inverse of :func:`encode`.

    Raises:
        CorruptRecordError: unknown kind or undecodable data.
    """
    raw = _raw(data)
    try:
        if kind == "f32":
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if kind == "json":
            return json.loads(raw.decode("utf-8"))
        if kind == "del":
            return None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CorruptRecordError(f"corrupt {kind} record: {type(exc).__name__}: {str(exc):.200}") from None
    raise CorruptRecordError(f"unknown record kind {str(kind)[:40]!r}")


def fold(rows: Iterable[tuple[str, str, bytes | memoryview]]) -> dict[str, Value]:
    """Latest value per key from ``(key, kind, data)`` rows in write order; removed keys dropped.

    Only each key's newest row is decoded (a record rewritten on every turn costs one decode,
    not one per turn), the JSON ones in one parse. Keys come out in the order of their first row.

    Raises:
        CorruptRecordError: a newest row cannot be decoded.
    """
    latest: dict[str, tuple[str, bytes | memoryview]] = {}
    for key, kind, data in rows:
        if not isinstance(key, str):
            raise CorruptRecordError(f"corrupt record name {key!r:.80}")
        latest[key] = (kind, data)
    records: dict[str, Value] = {}
    texts: dict[str, bytes] = {}
    for key, (kind, data) in latest.items():
        if kind == "json":
            records[key] = None  # keeps the key's place; filled below
            texts[key] = _raw(data)
        elif kind != "del":
            records[key] = decode(kind, data)
    records.update(_decode_json(texts))
    return records


def _raw(data: Any) -> bytes:
    """A stored record's bytes; anything else (a database may hand back text or a number) is corrupt."""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise CorruptRecordError(f"corrupt record data of type {type(data).__name__}")


_CLOSING = {ord("{"): ord("}"), ord("["): ord("]"), ord('"'): ord('"')}


def _decode_json(texts: Mapping[str, bytes]) -> dict[str, Value]:
    """JSON records decoded as one array (~3x faster than one by one), each by itself if that fails.

    Concatenating is only tried when every record is shaped like one JSON value (an object, array
    or string ends with its closing character; a scalar has no brackets, quotes or commas), so a
    corrupt record can never shift its neighbours' values: it fails the shape check or the count.
    """
    if not texts:
        return {}
    if all(_one_value(text) for text in texts.values()):
        try:
            values = json.loads(b"[" + b",".join(texts.values()) + b"]")
        except (ValueError, RecursionError):
            values = None
        if isinstance(values, list) and len(values) == len(texts):
            return dict(zip(texts, values, strict=True))
    return {key: decode("json", text) for key, text in texts.items()}


def _one_value(text: bytes) -> bool:
    if not text:
        return False
    closing = _CLOSING.get(text[0])
    if closing is not None:
        return len(text) > 1 and text[-1] == closing
    return not any(c in text for c in (b"[", b"]", b"{", b"}", b'"', b","))


@runtime_checkable
class StateStore(Protocol):
    """Where sessions' derived state lives (in process, SQLite, PostgreSQL, a framework store).

    ``key`` names one session of one memory kind (the adapter composes it from the strategy
    name and the framework's session identity). Implementations are safe to share between
    threads; the SQL ones also between processes.
    """

    def load(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """The session folded over its first ``turns`` turns (None = all); None if absent.

        Raises:
            StoreError: the backend failed or a record is corrupt.
        """
        ...

    def append(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """Write the entries of new turns in one transaction; return the new version.

        ``expected_version`` is the version the writer read (0 for a new session); entries
        must continue the stored turns (``entries[0].turn`` == stored turn count).

        Raises:
            StaleStateError: the stored version differs, or the turns do not continue.
        """
        ...

    def truncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Delete every turn ``>= turns`` and all it wrote; return the new version.

        Raises:
            StaleStateError: the stored version differs.
        """
        ...

    def delete(self, key: str) -> None:
        """Remove the session entirely (no error if absent)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class AsyncStateStore:
    """Async variants of :class:`StateStore` methods, run on pooled threads by default.

    The threads are :mod:`ctxmgmt.adapter.offload`'s pool for store work (never those of store-less
    conversations). Backends with a native async driver (PostgreSQL) override them.
    """

    async def aload(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """Async :meth:`StateStore.load`."""
        return await run_blocking_stored(self.load, key, turns=turns)  # type: ignore[attr-defined]

    async def aappend(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """Async :meth:`StateStore.append`."""
        return await run_blocking_stored(
            self.append,  # type: ignore[attr-defined]
            key,
            entries,
            expected_version=expected_version,
            strategy=strategy,
            config=config,
        )

    async def atruncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Async :meth:`StateStore.truncate`."""
        return await run_blocking_stored(self.truncate, key, turns, expected_version=expected_version)  # type: ignore[attr-defined]

    async def adelete(self, key: str) -> None:
        """Async :meth:`StateStore.delete`."""
        await run_blocking_stored(self.delete, key)  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        """Async :meth:`StateStore.close`."""
        await run_blocking_stored(self.close)  # type: ignore[attr-defined]


async def aclose_store(store: StateStore) -> None:
    """Close ``store`` from async code: its ``aclose`` when it has one, else ``close`` on a store thread.

    A PostgreSQL store's ``aclose`` awaits the async pool it opened on the running event loop.
    """
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
    else:
        await run_blocking_stored(store.close)
