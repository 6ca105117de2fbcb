"""In-process state store (the default): the same semantics as the SQL stores, in a dict."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxmgmt.store.base import (
    SCHEMA_VERSION,
    AsyncStateStore,
    StaleStateError,
    StoredSession,
    TurnEntry,
    Value,
)
from ctxmgmt.store.keys import bounded_key


@dataclass
class _Session:
    strategy: str
    config: dict[str, Any]
    version: int = 0
    turns: list[TurnEntry] = field(default_factory=list)


class InMemoryStore(AsyncStateStore):
    """Keeps every session's turn entries in this process (lost on restart).

    Useful for tests and as the reference behaviour of the persistent stores. Memory grows
    with the stored sessions; the live-session bound (``max_sessions``) is separate. Sessions
    are filed under :func:`~ctxmgmt.store.keys.bounded_key` like every backend's.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """The sessions, copied under the lock; a copy is a store of its own with its own lock."""
        with self._lock:
            return {"_sessions": copy.deepcopy(self._sessions)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._sessions = state["_sessions"]
        self._lock = threading.Lock()

    def load(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """The session folded over its first ``turns`` turns; None if absent."""
        key = bounded_key(key)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            entries = session.turns if turns is None else session.turns[:turns]
            latest: dict[str, Value] = {}  # in the order of first write (turn, then name)
            for entry in entries:
                latest.update(sorted(entry.records.items()))
            records = {name: copy.deepcopy(v) for name, v in latest.items() if v is not None}
            return StoredSession(
                strategy=session.strategy,
                config=dict(session.config),
                schema=SCHEMA_VERSION,
                version=session.version,
                chains=[e.chain for e in entries],
                records=records,
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
        """Append turn entries (compare-and-set on the version)."""
        key = bounded_key(key)
        with self._lock:
            session = self._sessions.get(key)
            version = 0 if session is None else session.version
            stored = 0 if session is None else len(session.turns)
            if version != expected_version:
                raise StaleStateError(f"session {key!r} is at version {version}, not {expected_version}")
            if entries and entries[0].turn != stored:
                raise StaleStateError(
                    f"session {key!r} has {stored} turns; cannot append turn {entries[0].turn}"
                )
            if session is None:
                session = self._sessions[key] = _Session(strategy, dict(config))
            session.strategy, session.config = strategy, dict(config)
            session.turns.extend(
                TurnEntry(e.turn, e.chain, {k: copy.deepcopy(v) for k, v in e.records.items()})
                for e in entries
            )
            session.version += 1
            return session.version

    def truncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Drop turns ``>= turns`` and everything they wrote."""
        key = bounded_key(key)
        with self._lock:
            session = self._sessions.get(key)
            version = 0 if session is None else session.version
            if version != expected_version:
                raise StaleStateError(f"session {key!r} is at version {version}, not {expected_version}")
            if session is None:
                return 0
            del session.turns[turns:]
            session.version += 1
            return session.version

    def delete(self, key: str) -> None:
        """Forget the session."""
        with self._lock:
            self._sessions.pop(bounded_key(key), None)

    def close(self) -> None:
        """Nothing to release."""


def _copy(value: Value) -> Value:
    """A private copy, vectors as float32 (what the SQL stores give back)."""
    if isinstance(value, np.ndarray):
        return np.array(value, dtype=np.float32)
    return copy.deepcopy(value)
