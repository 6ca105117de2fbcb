"""Store overhead: what a store adds to ``Session.sync`` adding one turn, in process vs SQLite vs PostgreSQL.

Run: ``python benchmarks/store_overhead.py [--quick] [--json overhead.json] [--postgres DSN]
[--no-postgres] [--embedder minilm|hash] [--overhead-prefill 300] [--overhead-adds 150]
[--data FILE] [--workdir DIR]``.

p50 ms of ``Session.sync`` adding one turn to a KadaneDial session (the real embedder by
default) of ``--overhead-prefill`` (300) turns, ``--overhead-adds`` (150) times, in process vs
SQLite vs PostgreSQL (the throwaway server with ``fsync=off``, and, when that server is
throwaway, a second one with the default durability), interleaved turn by turn; also the p50
of the store calls alone. Targets: SQLite <= +3 ms, PostgreSQL <= +5 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (the module next to this script)
    conversation,
    make_embedder,
    open_backend,
    parser_for,
    postgres_server,
    run_benchmark,
    table,
    warm_up,
)

SIZES = {"overhead_prefill": (300, 40), "overhead_adds": (150, 20)}
"""``name -> (default, with --quick)``."""


class TimedStore:
    """A StateStore proxy that times every call (to report the store's own share of a sync)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ms = 0.0

    def _timed(self, name: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return getattr(self.inner, name)(*args, **kwargs)
        finally:
            self.ms += (time.perf_counter() - start) * 1000

    def load(self, *a: Any, **k: Any) -> Any:
        return self._timed("load", *a, **k)

    def append(self, *a: Any, **k: Any) -> Any:
        return self._timed("append", *a, **k)

    def truncate(self, *a: Any, **k: Any) -> Any:
        return self._timed("truncate", *a, **k)

    def delete(self, *a: Any, **k: Any) -> Any:
        return self._timed("delete", *a, **k)

    def close(self) -> None:
        self.inner.close()


def measure(
    *, prefill: int, adds: int, pg: str | None, pg_durable: str | None, embedder: str, workdir: Path
) -> dict[str, Any]:
    """p50 of ``Session.sync`` adding one turn, per store, interleaved turn by turn."""
    from ctxmgmt.session.stored_state import StoredState as Session
    from ctxmgmt.strategies import KadaneDialStrategy

    base = make_embedder(embedder)
    warm_up("KadaneDialMemory")
    turns = conversation(prefill + adds)
    specs: dict[str, str | None] = {"in_process": None, "sqlite": f"sqlite:{workdir / 'overhead.db'}"}
    if pg:
        specs["postgres"] = f"pg:{pg}"
    if pg_durable:
        specs["postgres_fsync_on"] = f"pg:{pg_durable}"
    sessions: dict[str, tuple[Session, TimedStore | None]] = {}
    for name, spec in specs.items():
        raw = open_backend(spec)
        store = TimedStore(raw) if raw is not None else None
        key = f"kadanedial:overhead-{os.getpid()}-{name}"
        if raw is not None:
            raw.delete(key)
        session = Session(key, KadaneDialStrategy(embedder=base), store)
        session.sync(turns[:prefill])
        sessions[name] = (session, store)
    sync_ms: dict[str, list[float]] = {name: [] for name in specs}
    store_ms: dict[str, list[float]] = {name: [] for name in specs}
    names = list(specs)
    for k in range(prefill, prefill + adds):
        past = turns[: k + 1]
        for name in names[k % len(names) :] + names[: k % len(names)]:  # rotate who goes first
            session, store = sessions[name]
            spent = store.ms if store is not None else 0.0
            start = time.perf_counter()
            session.sync(past)
            sync_ms[name].append((time.perf_counter() - start) * 1000)
            store_ms[name].append((store.ms - spent) if store is not None else 0.0)
    out: dict[str, Any] = {"prefill_turns": prefill, "timed_adds": adds, "embedder": embedder}
    base_p50 = statistics.median(sync_ms["in_process"])
    for name in specs:
        p50 = statistics.median(sync_ms[name])
        out[name] = {
            "sync_p50_ms": p50,
            "sync_p95_ms": float(np.percentile(sync_ms[name], 95)),
            "over_in_process_ms": p50 - base_p50,
            "store_calls_p50_ms": statistics.median(store_ms[name]),
        }
        _, store = sessions[name]
        if store is not None:
            store.close()
    return out


def report(o: dict[str, Any]) -> str:
    """One line per store: sync p50 and p95, the difference to in process, the store calls' p50."""
    return table(
        f"Session.sync adding one turn to a {o['prefill_turns']}-turn KadaneDial session, "
        f"{'MiniLM' if o.get('embedder', 'minilm') == 'minilm' else 'hashing'} embedder "
        "(targets: SQLite <= +3 ms, PostgreSQL <= +5 ms)",
        ["store", "sync p50 ms", "sync p95 ms", "over in-process ms", "store calls p50 ms"],
        [
            [k, v["sync_p50_ms"], v["sync_p95_ms"], v["over_in_process_ms"], v["store_calls_p50_ms"]]
            for k, v in o.items()
            if isinstance(v, dict)
        ],
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"overhead"``."""
    parser = parser_for(__doc__, SIZES, postgres=True)
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm", help="default minilm")

    def run(args: argparse.Namespace, sizes: dict[str, int], pg: str | None, workdir: Path) -> dict[str, Any]:
        durable = pg is not None and not args.postgres  # a second throwaway server, default durability
        with postgres_server(None, durable, fsync=True) as pg_durable:
            return measure(
                prefill=sizes["overhead_prefill"],
                adds=sizes["overhead_adds"],
                pg=pg,
                pg_durable=pg_durable,
                embedder=args.embedder,
                workdir=workdir,
            )

    return run_benchmark("overhead", parser, SIZES, run, report, argv)


if __name__ == "__main__":
    main()
