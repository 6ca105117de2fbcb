"""Live sessions: one strategy per conversation, kept in step with its raw history and a store.

A :class:`SessionPool` maps the framework's own conversation identity (a LangGraph
``thread_id``, a LlamaIndex ``chat_store_key`` or ``Memory`` ``session_id``) to a
:class:`Session`: that conversation's strategy, its lock, and the chain hashes of the turns
it holds. At most ``max_sessions`` sessions stay live (least recently used out first); an
evicted session is loaded again from the store when it returns.

:meth:`Session.sync` brings the strategy up to date with the completed turns of the raw
history: it compares chain hashes (a running hash of every turn's fingerprint, so an edit
or deletion anywhere is found, not only in sampled turns), rewinds to the last turn that
still matches (state restored from the store as it was after that turn, or rebuilt), and
adds the new turns, writing each turn's changed records in one store transaction.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ctxmgmt.exceptions import ConfigurationError
from ctxmgmt.records import RecordTracker, flatten, unflatten
from ctxmgmt.store.base import (
    SCHEMA_VERSION,
    CorruptRecordError,
    StaleStateError,
    StateStore,
    StoreError,
    TurnEntry,
)
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.types import Turn, chain_hashes

logger = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 1000
"""Live sessions a pool keeps in memory (the rest are reloaded from the store on demand)."""

DEFAULT_SESSION = "default"
"""Session id used when the framework gives none (e.g. an agent run without a ``thread_id``)."""

RETRIES = 5
"""Attempts at writing a turn when other writers keep winning the compare-and-set."""


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading chain hashes ``a`` and ``b`` share.

    A chain hash covers every turn up to its own, so two chains agree up to the first
    difference and differ from there on: one comparison settles the usual case (nothing
    changed) and a binary search finds where an edit begins.
    """
    n = min(len(a), len(b))
    if n == 0 or a[n - 1] == b[n - 1]:
        return n
    low, high = 0, n - 1  # a[high] != b[high]
    while low < high:
        middle = (low + high) // 2
        if a[middle] == b[middle]:
            low = middle + 1
        else:
            high = middle
    return low


class Session:
    """One conversation: its strategy, kept in step with the raw history and the store.

    Args:
        key: Store key of the conversation (the pool adds the strategy name).
        strategy: The conversation's own strategy (never shared).
        store: Where derived state persists; None = only in this process.
    """

    def __init__(self, key: str, strategy: Strategy, store: StateStore | None = None) -> None:
        self.key = key
        self.strategy = strategy
        self.store = store
        self.lock = threading.RLock()
        self.chains: list[str] = []
        self.version = 0
        self._tracker = RecordTracker()
        self._loaded = store is None

    # -- the one entry point ------------------------------------------------------------------
    def sync(self, past: Sequence[Turn], chains: Sequence[str] | None = None) -> None:
        """Make the strategy hold exactly the completed turns ``past`` (and persist what changed).

        ``chains`` are the chain hashes of ``past`` when the caller keeps them
        (:meth:`ctxmgmt.converted.ConvertedHistory.chains`); by default they are computed.
        Never raises for store trouble: a failing or inconsistent store is reported as a
        warning and the state is rebuilt from ``past``.
        """
        chains = chain_hashes(past) if chains is None else list(chains)
        if len(chains) != len(past):
            raise ValueError(f"{len(chains)} chain hashes for {len(past)} turns")
        with self.lock:
            for _ in range(RETRIES):
                try:
                    self._sync(past, chains)
                    return
                except StaleStateError:
                    logger.info("session %r was written by another worker; reloading", self.key)
                    self._unload()
                except CorruptRecordError as exc:
                    logger.warning("session %r: stored state unusable (%s); rebuilding", self.key, exc)
                    assert self.store is not None
                    try:
                        self.store.delete(self.key)
                    except StoreError as failed:
                        logger.warning(
                            "state store failed for session %r (%s); working without it", self.key, failed
                        )
                        self._sync_without_store(past, chains)
                        return
                    self._unload()
                except StoreError as exc:
                    logger.warning(
                        "state store failed for session %r (%s); this call works without it", self.key, exc
                    )
                    self._sync_without_store(past, chains)
                    return
            self._unload()
            self.store, self._loaded = None, True
            logger.warning(
                "session %r: gave up writing after %d conflicts; working in process", self.key, RETRIES
            )
            self._sync(past, chains)

    def _sync_without_store(self, past: Sequence[Turn], chains: list[str]) -> None:
        """Bring the state up to date in process for this call; the next call loads from the store again.

        The strategy keeps what it holds (it always matches :attr:`chains`, whichever store
        call failed), so during an outage each call adds only its new turns; when the store
        answers again, the next call restores the stored prefix and writes the turns it misses.
        """
        store, self.store = self.store, None
        self._loaded = True
        try:
            self._sync(past, chains)
        finally:
            self.store, self._loaded = store, store is None

    def _sync(self, past: Sequence[Turn], chains: list[str]) -> None:
        if not self._loaded:
            self._load(past, chains)
        keep = _common_prefix(self.chains, chains)
        if keep < len(self.chains):
            logger.warning(
                "session %r: the history changed at turn %d of %d; derived state from there on is rebuilt",
                self.key,
                keep,
                len(self.chains),
            )
            self._rewind(past, chains, keep)
        self._add(past, chains)

    # -- loading and rewinding ----------------------------------------------------------------
    def _unload(self) -> None:
        self.strategy.reset()
        self.chains = []
        self.version = 0
        self._tracker.reset()
        self._loaded = self.store is None

    def _load(self, past: Sequence[Turn], chains: list[str]) -> None:
        """Restore the state stored for the longest prefix of ``past`` the store agrees with."""
        assert self.store is not None
        self._loaded = True
        stored = self.store.load(self.key)
        if stored is None:
            return
        self.version = stored.version
        expected = self.strategy.stored_config()
        same_kind = (
            stored.strategy == self.strategy.name
            and stored.config == expected
            and stored.schema == SCHEMA_VERSION
        )
        keep = _common_prefix(stored.chains, chains) if same_kind else 0
        if not same_kind:
            logger.warning(
                "session %r: stored state was built by %s %s (schema %d); rebuilding",
                self.key,
                stored.strategy,
                stored.config,
                stored.schema,
            )
        elif keep < len(stored.chains):
            logger.warning(
                "session %r: the history no longer matches the stored state at turn %d of %d; "
                "derived state from there on is deleted and rebuilt",
                self.key,
                keep,
                len(stored.chains),
            )
        if keep < len(stored.chains):
            self.version = self.store.truncate(self.key, keep, expected_version=self.version)
        if keep == 0:
            return
        records = stored.records if keep == len(stored.chains) else self._records_upto(keep)
        self._restore(past[:keep], chains[:keep], records)

    def _records_upto(self, turns: int) -> dict[str, Any]:
        assert self.store is not None
        stored = self.store.load(self.key, turns=turns)
        return {} if stored is None else stored.records

    def _restore(self, turns: Sequence[Turn], chains: list[str], records: dict[str, Any]) -> None:
        try:
            self.strategy.restore(turns, unflatten(records))
        except Exception as exc:  # a corrupt or foreign record: rebuild, never fail the call
            logger.warning(
                "session %r: stored state unusable (%s: %s); rebuilding", self.key, type(exc).__name__, exc
            )
            self.strategy.reset()
            self._tracker.reset()
            self.chains = []
            if self.store is not None:
                self.version = self.store.truncate(self.key, 0, expected_version=self.version)
            return
        self._tracker.reset(records)
        self.chains = list(chains)

    def _rewind(self, past: Sequence[Turn], chains: list[str], keep: int) -> None:
        """State as it was after turn ``keep - 1``; everything derived later is deleted."""
        if self.store is None:
            self.strategy.reset()  # content-keyed caches make the rebuild cheap
            self._tracker.reset()
            self.chains = []
            return
        self.version = self.store.truncate(self.key, keep, expected_version=self.version)
        self.strategy.reset()
        self._tracker.reset()
        self.chains = []
        if keep:
            self._restore(past[:keep], chains[:keep], self._records_upto(keep))

    # -- adding -------------------------------------------------------------------------------
    def _add(self, past: Sequence[Turn], chains: list[str]) -> None:
        start = len(self.chains)
        if start >= len(past):
            return
        new = list(past[start:])
        self.strategy.prepare(new)
        if self.store is None:
            self.strategy.add_many(new)
            self.chains.extend(chains[start:])
            return
        entries = []
        for offset, turn in enumerate(new):
            self.strategy.add(turn)
            changes = self._tracker.changes(flatten(self.strategy.derived_state()))
            entries.append(TurnEntry(start + offset, chains[start + offset], changes))
        self.chains.extend(chains[start:])
        self.version = self.store.append(
            self.key,
            entries,
            expected_version=self.version,
            strategy=self.strategy.name,
            config=self.strategy.stored_config(),
        )

    def detach_history(self) -> None:
        """The strategy keeps its derived state but no turns (SWin's ``new_session``).

        The stored state is replaced by the carried-over state when the next turn is written.
        """
        with self.lock:
            self.chains = []
            self._tracker.reset()
            if self.store is not None:
                self.store.delete(self.key)
                self.version = 0

    def clear(self) -> None:
        """Forget the conversation's derived state, here and in the store."""
        with self.lock:
            if self.store is not None:
                try:
                    self.store.delete(self.key)
                except StoreError as exc:
                    logger.warning("could not delete session %r from the store: %s", self.key, exc)
            self.strategy.reset()
            self.chains = []
            self.version = 0
            self._tracker.reset()
            self._loaded = self.store is None


class SessionPool:
    """Live sessions by id, at most ``max_sessions`` of them (least recently used evicted).

    Args:
        factory: Builds a new, empty strategy (one per session).
        store: Where sessions' derived state persists; None = in this process only.
        max_sessions: Live sessions kept in memory; 1000.

    Raises:
        ConfigurationError: ``max_sessions`` is not a positive int.
    """

    def __init__(
        self,
        factory: Callable[[], Strategy],
        *,
        store: StateStore | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigurationError(f"max_sessions must be an int >= 1, got {max_sessions!r}")
        self.factory = factory
        self.store = store
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: str | None) -> Session:
        """The live session ``session_id`` (None = :data:`DEFAULT_SESSION`), created or reloaded."""
        session_id = DEFAULT_SESSION if session_id is None else str(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                strategy = self.factory()
                session = Session(f"{strategy.name}:{session_id}", strategy, self.store)
                self._sessions[session_id] = session
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(session_id)
            return session

    def sessions(self) -> list[Session]:
        """The live sessions, least recently used first."""
        with self._lock:
            return list(self._sessions.values())

    def discard(self, session_id: str | None) -> None:
        """Drop the live session (its stored state stays)."""
        with self._lock:
            self._sessions.pop(DEFAULT_SESSION if session_id is None else str(session_id), None)


class MessageLog:
    """Raw messages an adapter keeps itself (a ``Memory`` block's flushed turns), in a store.

    Each message is one entry (``turn`` = its position), written as JSON data; appends are
    compare-and-set like derived state, so two workers never lose or duplicate a message.

    Args:
        store: Where the messages persist.
        key: The log's store key.
    """

    def __init__(self, store: StateStore, key: str) -> None:
        self.store = store
        self.key = key

    def load(self) -> list[Any]:
        """Every message, in order (empty if none)."""
        stored = self.store.load(self.key)
        if stored is None:
            return []
        return [stored.records[f"m[{i}]"] for i in range(len(stored.chains))]

    def append(self, messages: Sequence[Any]) -> None:
        """Append JSON-serialisable messages (retried on a concurrent append)."""
        for _ in range(RETRIES):
            stored = self.store.load(self.key)
            start, version = (0, 0) if stored is None else (len(stored.chains), stored.version)
            entries = [
                TurnEntry(
                    start + i, hashlib.sha1(repr(m).encode("utf-8")).hexdigest(), {f"m[{start + i}]": m}
                )
                for i, m in enumerate(messages)
            ]
            try:
                self.store.append(self.key, entries, expected_version=version, strategy="messages", config={})
                return
            except StaleStateError:
                continue
        raise StoreError(f"could not append to {self.key!r} after {RETRIES} conflicts")


def _digest(message: Any) -> str:
    return hashlib.sha1(repr(message).encode("utf-8")).hexdigest()
