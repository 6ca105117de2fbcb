"""What ctxmgmt stores, where, under which key, and how a restart finds it: the one story of state.

**Two kinds of state.** The *raw history* (the caller's messages) is the framework's: a
LangGraph checkpoint, a LangChain chat history, a LlamaIndex chat store. ctxmgmt never keeps
its own copy, except for messages a LlamaIndex ``Memory`` flushes into a memory block, which
the block logs (:class:`~ctxmgmt.store.message_log.MessageLog`, one entry per message, under
``compose_key("flushed", block name, session id)``). The *derived state* (what a strategy
computed from the turns: embeddings, token counts, summaries, entities, spans, trees) is a
cache of the raw history: losing it costs a rebuild, never a message.

**What is stored.** For each conversation, a log of *turn entries*
(:class:`~ctxmgmt.store.base.TurnEntry`): adding turn ``i`` writes its chain hash and the records
of :meth:`Strategy.derived_state <ctxmgmt.strategies.base.Strategy.derived_state>` that changed
when the strategy took the turn (:func:`~ctxmgmt.store.records.flatten` splits the state into
``name``, ``name[i]``, ``name{key}`` records; :class:`~ctxmgmt.store.records.RecordTracker`
finds what changed). A header holds the strategy's name, its
:meth:`~ctxmgmt.strategies.base.Strategy.stored_config` (parameters, and the embedder and token
counter the state was built with),
:data:`~ctxmgmt.store.base.SCHEMA_VERSION` and a compare-and-set ``version``. The state after
turn ``k`` is the newest value of each record over entries ``0..k``. The same derived state is
what :meth:`~ctxmgmt.strategies.base.Strategy.to_state` puts in one JSON document beside the
turns (for a strategy saved by hand); the adapters' ``to_dict()`` saves parameters and the raw
history only (:func:`ctxmgmt.adapter.kit.plain_data` checks it), never derived state.

**Where.** A :class:`~ctxmgmt.store.base.StateStore`: in process
(:class:`~ctxmgmt.store.memory.InMemoryStore`, the default), SQLite or PostgreSQL
(:mod:`ctxmgmt.store.sql`: tables ``ctxmgmt_sessions``, ``ctxmgmt_turns``, ``ctxmgmt_records``),
or a framework's key-value store (:mod:`ctxmgmt.store.items`: LangGraph ``BaseStore``,
LlamaIndex ``BaseKVStore``); :func:`ctxmgmt.store.open_store` wraps each real backend in a
:class:`~ctxmgmt.store.circuit.CircuitStore`.

**Under which key.** ``strategy:surface[:name]:id`` (:meth:`ctxmgmt.session.pool.Pool.key`,
:func:`~ctxmgmt.store.keys.compose_key`, each part escaped): the strategy's name, the adapter
surface (``middleware``, ``classic``, ``memory``, ``block``, ...), the adapter instance's name
when it has one, and the framework's conversation id (``thread_id``, ``session_id``,
``chat_store_key``). Backends file it under :func:`~ctxmgmt.store.keys.bounded_key` (a digest
when longer than 1 KB).

**How a restart finds it.** Nothing in the process is needed: the first call of a conversation
after a restart gets a new :class:`~ctxmgmt.session.conversation.Conversation` for the same key,
and :meth:`StoredState.sync` loads the stored header and chain hashes and compares them with the
chain hashes of the raw history the framework passes (a running hash of every turn's
fingerprint: an edit or deletion anywhere is found). It restores the state after the longest
prefix that still matches (:meth:`~ctxmgmt.strategies.base.Strategy.restore`, nothing
recomputed), deletes what was derived after it (:meth:`~ctxmgmt.store.base.StateStore.truncate`)
and derives only the turns after it. A header built by another strategy, other parameters,
another embedder or token counter, or another schema is rebuilt from the raw history.

**Erasure.** An edited or deleted message changes the chain hashes from its turn on, so the next
call rewinds the stored state to the turn before it and rebuilds from there; a memory block's
``erase`` does it at once (and rewrites its message log). ``clear()`` deletes the key. SWin's
``new_session`` (:meth:`~ctxmgmt.session.conversation.Conversation.carry_over`) deletes the key
and writes the carried-over state with the next turn.

**Fork and copies.** A forked child (:mod:`ctxmgmt.session.worker`) or a ``copy.deepcopy`` of an
adapter shares the store and the keys: the next call of either side compares chain hashes and
versions (a lost compare-and-set reloads), so two processes never mix their derived state.

:meth:`StoredState.sync` is the one entry point: it brings a strategy up to date with the
completed turns of the raw history, rewinding where the history changed, and writes each turn's
changed records in one store transaction. :class:`ctxmgmt.session.conversation.Conversation`
owns one and calls it under its lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ctxmgmt.messages.types import Turn, chain_hashes
from ctxmgmt.store.base import (
    SCHEMA_VERSION,
    CorruptRecordError,
    StaleStateError,
    StateStore,
    StoreError,
    TurnEntry,
    wait_after_conflict,
)
from ctxmgmt.store.keys import shown_key
from ctxmgmt.store.records import RecordTracker, flatten, unflatten
from ctxmgmt.strategies.base import Strategy

logger = logging.getLogger(__name__)

RETRIES = 8
"""Attempts at a call's store writes when other writers keep winning the compare-and-set; after
that the call works in process and the next call uses the store again (it never gives up on it)."""


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


class StoredState:
    """A conversation's strategy, kept in step with the raw history and the store.

    Not thread-safe on its own: the owning :class:`~ctxmgmt.session.conversation.Conversation` calls
    it under the conversation's lock.

    Args:
        key: Store key of the conversation.
        strategy: The conversation's own strategy (never shared).
        store: Where derived state persists; None = only in this process.

    Attributes:
        chains: Chain hashes of the turns the strategy holds.
        version: Version of the stored state this process last read or wrote.
        home: The store given (``store`` is None during a call that works without it;
            :meth:`clear` always deletes from ``home``).
    """

    def __init__(self, key: str, strategy: Strategy, store: StateStore | None = None) -> None:
        self.key = key
        self.strategy = strategy
        self.store = store
        self.home = store
        self.chains: list[str] = []
        self.version = 0
        self._tracker = RecordTracker()
        self._loaded = store is None

    # -- the one entry point ------------------------------------------------------------------
    def sync(
        self,
        past: Sequence[Turn],
        chains: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        reload_on_conflict: bool = False,
    ) -> None:
        """Make the strategy hold exactly the completed turns ``past`` (and persist what changed).

        ``chains`` are the chain hashes of ``past`` when the caller keeps them
        (:meth:`ctxmgmt.session.converted.ConvertedHistory.chains`); by default they are computed.
        ``limit``: add at most this many new turns (the strategy then holds a prefix of ``past``;
        loading and rewinding still compare the whole of ``past``). None = all of them.
        The caller holds the conversation's lock.
        Never raises for store trouble: a failing or inconsistent store is reported as a
        warning and the state is rebuilt from ``past``. A lost compare-and-set (another worker
        wrote the session) reloads and retries after a short random wait (:data:`RETRIES`
        attempts, :func:`~ctxmgmt.store.base.wait_after_conflict`); if other writers keep
        winning, this call works in process and the next call uses the store again.
        ``reload_on_conflict=True`` (the background worker's commit): a lost compare-and-set
        only reloads, and adds nothing more: the turns after the stored ones were not prepared
        (embedded) outside the lock, and deriving them here would hold the lock, and an exiting
        process, for a whole batch's forward pass (0.6-0.9 s for 8 DiscourseTree turns at load
        1-1.3 on 2 cores). The next step prepares them.
        """
        chains = chain_hashes(past) if chains is None else list(chains)
        if len(chains) != len(past):
            raise ValueError(f"{len(chains)} chain hashes for {len(past)} turns")
        for attempt in range(RETRIES):
            try:
                self._sync(past, chains, limit)
                return
            except StaleStateError:
                if attempt + 1 < RETRIES:
                    logger.info("session %s was written by another worker; reloading", shown_key(self.key))
                    self._unload()
                    wait_after_conflict(attempt)
                    if reload_on_conflict:
                        limit = 0
                else:  # the strategy keeps what it derived (it matches self.chains); the next call reloads
                    self._tracker.reset()
            except CorruptRecordError as exc:
                logger.warning("session %s: stored state unusable (%s); rebuilding", shown_key(self.key), exc)
                assert self.store is not None
                try:
                    self.store.delete(self.key)
                except StoreError as failed:
                    self._sync_without_store(past, chains, failed, limit)
                    return
                self._unload()
            except StoreError as exc:
                self._sync_without_store(past, chains, exc, limit)
                return
        conflict = StaleStateError(f"other workers won {RETRIES} compare-and-sets in a row")
        self._sync_without_store(past, chains, conflict, limit)

    def _sync_without_store(
        self, past: Sequence[Turn], chains: list[str], cause: StoreError, limit: int | None = None
    ) -> None:
        """Bring the state up to date in process for this call; the next call loads from the store again.

        The strategy keeps what it holds (it always matches :attr:`chains`, whichever store
        call failed), so during an outage each call adds only its new turns; when the store
        answers again, the next call restores the stored prefix and writes the turns it misses.
        """
        logger.warning(
            "state store failed for session %s (%s); this call works without it", shown_key(self.key), cause
        )
        store, self.store = self.store, None
        self._loaded = True
        try:
            self._sync(past, chains, limit)
        finally:
            self.store, self._loaded = store, store is None

    def _sync(self, past: Sequence[Turn], chains: list[str], limit: int | None = None) -> None:
        if not self._loaded:
            self._load(past, chains)
        keep = _common_prefix(self.chains, chains)
        if keep < len(self.chains):
            logger.warning(
                "session %s: the history changed at turn %d of %d; derived state from there on is rebuilt",
                shown_key(self.key),
                keep,
                len(self.chains),
            )
            self._rewind(past, chains, keep)
        end = len(past) if limit is None else min(len(past), len(self.chains) + limit)
        self._add(past[:end], chains[:end])

    def catch_up(
        self,
        past: Sequence[Turn],
        chains: Sequence[str],
        *,
        seconds: float | None,
        first_step: int,
        batch: int,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[int, int], None] | None = None,
        reload_on_conflict: bool = False,
    ) -> int:
        """:meth:`sync` in steps for about ``seconds``; returns how many turns of ``past`` the strategy holds.

        Loading and rewinding compare the whole of ``past``; new turns are then derived in
        steps of at most ``batch`` turns (one embedding batch and one store write each) until
        all are derived or ``seconds`` (None = no limit, by ``clock``) have passed after the
        first ``first_step`` turns, which are not timed (the first use of a model loads it; 0
        with ``seconds=0``: load or rewind only). Later steps are sized from the measured rate
        to fit the time left, and at most double the step before. ``progress`` is called after
        each step with ``(turns done, turns total)``. ``reload_on_conflict``: see :meth:`sync`.
        """
        self.sync(past, chains, limit=0)  # load or rewind only
        done = len(self.chains)
        step = batch if seconds is None else first_step
        start: float | None = None  # the first step (which may load models) is not timed
        timed = 0
        while done < len(past) and step > 0:
            self.sync(past, chains, limit=step, reload_on_conflict=reload_on_conflict)
            done, last = len(self.chains), done
            if progress is not None:
                progress(done, len(past))
            if done == last:  # nothing could be added: never loop on it
                break
            if seconds is None:
                continue
            if start is None:
                if seconds <= 0:  # the untimed first step only
                    break
                start = clock()
                continue
            timed += done - last
            spent = clock() - start
            if spent >= seconds:
                break
            step = min(  # a strategy's cost per turn can jump (ACM's first collapses): at most doubled
                2 * (done - last),
                max(1, min(batch, int((seconds - spent) * timed / spent))) if spent > 0 else batch,
            )
        return done

    # -- loading and rewinding ----------------------------------------------------------------
    def _forget_derived(self) -> None:
        """The strategy holds no turns and nothing is known to be written (the store is not touched)."""
        self.strategy.reset()
        self._tracker.reset()
        self.chains = []

    def _unload(self) -> None:
        self._forget_derived()
        self.version = 0
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
                "session %s: stored state was built by %s %s (schema %d); rebuilding",
                shown_key(self.key),
                stored.strategy,
                stored.config,
                stored.schema,
            )
        elif keep < len(stored.chains):
            logger.warning(
                "session %s: the history no longer matches the stored state at turn %d of %d; "
                "derived state from there on is deleted and rebuilt",
                shown_key(self.key),
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
                "session %s: stored state unusable (%s: %s); rebuilding",
                shown_key(self.key),
                type(exc).__name__,
                exc,
            )
            self._forget_derived()
            if self.store is not None:
                self.version = self.store.truncate(self.key, 0, expected_version=self.version)
            return
        self._tracker.reset(records)
        self.chains = list(chains)

    def _rewind(self, past: Sequence[Turn], chains: list[str], keep: int) -> None:
        """State as it was after turn ``keep - 1``; everything derived later is deleted."""
        if self.store is None:
            self._forget_derived()  # content-keyed caches make the rebuild cheap
            return
        self.version = self.store.truncate(self.key, keep, expected_version=self.version)
        self._forget_derived()
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
        self.chains = []
        self._tracker.reset()
        if self.home is not None:
            self.home.delete(self.key)
            self.version = 0

    def clear(self) -> None:
        """Forget the conversation's derived state, here and in the store.

        The stored session is deleted from the store given (:attr:`home`) whatever happened
        before (conflicts, a call that worked without the store); a store that fails is
        reported as a warning (a :class:`~ctxmgmt.store.CircuitStore` replays the deletion
        when its store answers again).
        """
        self.store = self.home
        if self.home is not None:
            try:
                self.home.delete(self.key)
            except StoreError as exc:
                logger.warning("could not delete session %s from the store: %s", shown_key(self.key), exc)
        self._unload()
