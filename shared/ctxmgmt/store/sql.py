"""The SQL both database stores share: three tables, parameterised statements, compare-and-set.

Tables (created if missing):

- ``ctxmgmt_sessions(key, strategy, config, schema, version, turns)``: one row per session;
  ``version`` is the compare-and-set counter, ``turns`` the stored turn count.
- ``ctxmgmt_turns(key, turn, chain)``: the chain hash of each stored turn.
- ``ctxmgmt_records(key, turn, name, kind, data)``: what each turn wrote (``kind`` ``json``,
  ``f32`` raw little-endian float32 bytes, or ``del``); primary key ``(key, turn, name)``, so
  a record is never written twice. A load reads only the newest row of each name.

Every operation is written once, as a *plan*: a generator that yields the statements to run
(:class:`Step`) and receives each one's result. :func:`run_plan` drives a plan on a DB-API
cursor and :func:`arun_plan` on an async (psycopg) cursor, so the synchronous and the native
async paths run the same statements in the same order.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ctxmgmt.store.base import (
    SCHEMA_VERSION,
    AsyncStateStore,
    CorruptRecordError,
    StaleStateError,
    StoredSession,
    TurnEntry,
    checked_header,
    encode,
    fold,
)
from ctxmgmt.store.keys import HASHED as HASHED  # re-exported
from ctxmgmt.store.keys import bounded_key, shown_key

TABLES = (
    """CREATE TABLE IF NOT EXISTS ctxmgmt_sessions (
        key TEXT PRIMARY KEY, strategy TEXT NOT NULL, config TEXT NOT NULL,
        schema INTEGER NOT NULL, version INTEGER NOT NULL, turns INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ctxmgmt_turns (
        key TEXT NOT NULL, turn INTEGER NOT NULL, chain TEXT NOT NULL, PRIMARY KEY (key, turn))""",
    """CREATE TABLE IF NOT EXISTS ctxmgmt_records (
        key TEXT NOT NULL, turn INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
        data {blob} NOT NULL, PRIMARY KEY (key, turn, name))""",
)

# The statements, with ``?`` placeholders (each backend substitutes its own).
SELECT_HEADER = "SELECT strategy, config, schema, version FROM ctxmgmt_sessions WHERE key = ?"
SELECT_CHAINS = "SELECT chain FROM ctxmgmt_turns WHERE key = ? AND turn < ? ORDER BY turn"
SELECT_RECORDS = (
    # The newest row of each record name (only it is read and decoded), live records only, with
    # the turn of its first write (the caller sorts: an ORDER BY would sort the data too). The
    # primary key serves the grouping (an index-only scan) and each lookup.
    "SELECT r.name, r.kind, r.data, n.oldest FROM ctxmgmt_records AS r JOIN ("
    "SELECT name, MAX(turn) AS newest, MIN(turn) AS oldest FROM ctxmgmt_records "
    "WHERE key = ? AND turn < ? GROUP BY name) AS n ON r.name = n.name AND r.turn = n.newest "
    "WHERE r.key = ? AND r.kind <> 'del'"
)
SELECT_VERSION = "SELECT version, turns FROM ctxmgmt_sessions WHERE key = ?"
INSERT_SESSION = (
    "INSERT INTO ctxmgmt_sessions (key, strategy, config, schema, version, turns) VALUES (?, ?, ?, ?, 1, ?)"
)
UPDATE_SESSION = (
    "UPDATE ctxmgmt_sessions SET version = version + 1, turns = ?, strategy = ?, config = ? "
    "WHERE key = ? AND version = ?"
)
UPDATE_TURNS = "UPDATE ctxmgmt_sessions SET version = version + 1, turns = ? WHERE key = ? AND version = ?"
INSERT_TURN = "INSERT INTO ctxmgmt_turns (key, turn, chain) VALUES (?, ?, ?)"
INSERT_RECORD = "INSERT INTO ctxmgmt_records (key, turn, name, kind, data) VALUES (?, ?, ?, ?, ?)"
DELETE_RECORDS_FROM = "DELETE FROM ctxmgmt_records WHERE key = ? AND turn >= ?"
DELETE_TURNS_FROM = "DELETE FROM ctxmgmt_turns WHERE key = ? AND turn >= ?"
DELETE_SESSION = tuple(
    f"DELETE FROM {table} WHERE key = ?"  # noqa: S608 - fixed table names
    for table in ("ctxmgmt_records", "ctxmgmt_turns", "ctxmgmt_sessions")
)


def storage_key(key: str) -> str:
    r"""The value the ``key`` columns hold for session key ``key``: :func:`.keys.bounded_key`.

    Example:
        >>> storage_key("kadanedial:classic:u1")
        'kadanedial:classic:u1'
        >>> storage_key("u\udc80")[:8] == HASHED
        True
    """
    return bounded_key(key)


ALL_TURNS = 2**62
"""``turn < ALL_TURNS`` selects every turn."""

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One statement of a plan and what the plan wants back.

    Attributes:
        sql: The statement, ``?`` placeholders.
        params: Its parameters (for ``"many"``, one parameter tuple per row).
        result: ``"one"`` (the first row or None), ``"all"`` (every row), ``"rowcount"``
            (rows changed) or ``"many"`` (``executemany``; the plan receives None).
    """

    sql: str
    params: Sequence[Any]
    result: Literal["one", "all", "rowcount", "many"] = "rowcount"


Plan = Generator[Step, Any, T]
"""An operation: yields :class:`Step` s, receives each one's result, returns its value."""


def run_plan(cur: Any, plan: Plan[T], placeholder: str = "?") -> T:
    """Run ``plan`` on a DB-API cursor (inside the caller's transaction)."""
    try:
        step = next(plan)
        while True:
            sql = step.sql.replace("?", placeholder)
            if step.result == "many":
                cur.executemany(sql, step.params)
                result: Any = None
            else:
                cur.execute(sql, step.params)
                if step.result == "one":
                    result = cur.fetchone()
                elif step.result == "all":
                    result = cur.fetchall()
                else:
                    result = cur.rowcount
            step = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def arun_plan(cur: Any, plan: Plan[T], placeholder: str = "?") -> T:
    """Run ``plan`` on an async cursor (``await cur.execute(...)``, psycopg style)."""
    try:
        step = next(plan)
        while True:
            sql = step.sql.replace("?", placeholder)
            if step.result == "many":
                await cur.executemany(sql, step.params)
                result: Any = None
            else:
                await cur.execute(sql, step.params)
                if step.result == "one":
                    result = await cur.fetchone()
                elif step.result == "all":
                    result = await cur.fetchall()
                else:
                    result = cur.rowcount
            step = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


# -- the operations ------------------------------------------------------------------------------
def load_plan(key: str, turns: int | None) -> Plan[StoredSession | None]:
    """The session folded over its first ``turns`` turns; None if absent."""
    limit = ALL_TURNS if turns is None else turns
    header = yield Step(SELECT_HEADER, (key,), "one")
    if header is None:
        return None
    chain_rows = yield Step(SELECT_CHAINS, (key, limit), "all")
    rows = yield Step(SELECT_RECORDS, (key, limit, key), "all")
    strategy, config, schema, version = checked_header(*header)
    chains = [row[0] for row in chain_rows]
    if not all(isinstance(chain, str) for chain in chains):
        raise CorruptRecordError("corrupt turn chain hash (not text)")
    try:
        ordered = sorted(rows, key=_first_written)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(f"corrupt record row: {exc}") from None
    return StoredSession(
        strategy=strategy,
        config=config,
        schema=schema,
        version=version,
        chains=chains,
        records=fold((name, kind, data) for name, kind, data, _ in ordered),
    )


def _first_written(row: Sequence[Any]) -> tuple[int, str]:
    """Sort key of a loaded record row: the turn it was first written, then its name."""
    return int(row[3]), str(row[0])


def append_plan(
    key: str,
    entries: Sequence[TurnEntry],
    *,
    expected_version: int,
    strategy: str,
    config: Mapping[str, Any],
    label: str | None = None,
) -> Plan[int]:
    """Write new turns' entries (compare-and-set on the version); the new version."""
    label = key if label is None else label
    stored = yield from _check_version(key, expected_version, label)
    if entries and entries[0].turn != stored:
        raise StaleStateError(f"session {label!r} has {stored} turns; cannot append turn {entries[0].turn}")
    turns = stored + len(entries)
    config_text = json.dumps(dict(config))
    if expected_version == 0:
        yield Step(INSERT_SESSION, (key, strategy, config_text, SCHEMA_VERSION, turns))
    else:
        changed = yield Step(UPDATE_SESSION, (turns, strategy, config_text, key, expected_version))
        if changed != 1:
            raise StaleStateError(f"session {label!r} changed while writing")
    if entries:
        yield Step(INSERT_TURN, [(key, e.turn, e.chain) for e in entries], "many")
        rows = list(_record_rows(key, entries))
        if rows:
            yield Step(INSERT_RECORD, rows, "many")
    return expected_version + 1


def truncate_plan(key: str, turns: int, *, expected_version: int, label: str | None = None) -> Plan[int]:
    """Delete turns ``>= turns`` and everything they wrote (compare-and-set); the new version."""
    label = key if label is None else label
    stored = yield from _check_version(key, expected_version, label)
    if expected_version == 0:
        return 0
    kept = max(0, min(turns, stored))  # truncating past the end keeps every turn
    yield Step(DELETE_RECORDS_FROM, (key, kept))
    yield Step(DELETE_TURNS_FROM, (key, kept))
    changed = yield Step(UPDATE_TURNS, (kept, key, expected_version))
    if changed != 1:
        raise StaleStateError(f"session {label!r} changed while truncating")
    return expected_version + 1


def delete_plan(key: str) -> Plan[None]:
    """Remove the session and all it wrote."""
    for sql in DELETE_SESSION:
        yield Step(sql, (key,))


def _check_version(key: str, expected: int, label: str) -> Plan[int]:
    """The stored turn count, after checking the stored version is ``expected``."""
    row = yield Step(SELECT_VERSION, (key,), "one")
    try:
        version, turns = (0, 0) if row is None else (int(row[0]), int(row[1]))
    except (TypeError, ValueError, OverflowError) as exc:
        raise CorruptRecordError(f"session {label!r}: corrupt version or turn count: {exc}") from None
    if version != expected:
        raise StaleStateError(f"session {label!r} is at version {version}, not {expected}")
    return turns


def _record_rows(key: str, entries: Sequence[TurnEntry]) -> Iterator[tuple[str, int, str, str, bytes]]:
    for entry in entries:
        for name, value in entry.records.items():
            kind, data = encode(value)
            yield key, entry.turn, name, kind, data


class SQLStore(AsyncStateStore):
    """A :class:`~ctxmgmt.store.base.StateStore` over a DB-API database.

    Subclasses provide :meth:`_transaction` (a cursor inside one transaction that commits on
    success and rolls back on error) and the placeholder style; all SQL lives in this module.
    """

    placeholder = "?"
    blob = "BLOB"

    @abstractmethod
    def _transaction(self, *, readonly: bool = False) -> AbstractContextManager[Any]:
        """A cursor in one transaction (commit on success, rollback on error).

        Write-locked where the database allows; with ``readonly``, a consistent snapshot for
        the reads of a load.
        """

    def _storage_key(self, key: str) -> str:
        """The value of the ``key`` columns for session ``key`` (:func:`~ctxmgmt.store.keys.bounded_key`)."""
        return bounded_key(key)

    def _run(self, plan: Plan[T], *, readonly: bool = False) -> T:
        with self._transaction(readonly=readonly) as cur:
            return run_plan(cur, plan, self.placeholder)

    def _create_tables(self) -> None:
        with self._transaction() as cur:
            for statement in TABLES:
                cur.execute(statement.format(blob=self.blob))

    # -- StateStore ----------------------------------------------------------------------------
    def load(self, key: str, *, turns: int | None = None) -> StoredSession | None:
        """The session folded over its first ``turns`` turns; None if absent."""
        return self._run(load_plan(self._storage_key(key), turns), readonly=True)

    def append(
        self,
        key: str,
        entries: Sequence[TurnEntry],
        *,
        expected_version: int,
        strategy: str,
        config: Mapping[str, Any],
    ) -> int:
        """Write new turns' entries in one transaction (compare-and-set on the version)."""
        return self._run(
            append_plan(
                self._storage_key(key),
                entries,
                expected_version=expected_version,
                strategy=strategy,
                config=config,
                label=shown_key(key),
            )
        )

    def truncate(self, key: str, turns: int, *, expected_version: int) -> int:
        """Delete turns ``>= turns`` and everything they wrote (compare-and-set)."""
        plan = truncate_plan(
            self._storage_key(key), turns, expected_version=expected_version, label=shown_key(key)
        )
        return self._run(plan)

    def delete(self, key: str) -> None:
        """Remove the session and all it wrote."""
        self._run(delete_plan(self._storage_key(key)))
