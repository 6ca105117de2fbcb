"""Resident memory: many sessions touched in one process, with and without ``max_sessions``.

Run: ``python benchmarks/resident_memory.py [--quick] [--json sessions.json]
[--rss-sessions 10000] [--rss-bound 1000] [--data FILE] [--workdir DIR]``.

``--rss-sessions`` (10,000) sessions touched in one process with ``max_sessions`` =
``--rss-bound`` (1,000) on SQLite (KadaneDial, the hashing embedder of :mod:`ctxmgmt.app.testing`,
5 turns each): resident memory (VmRSS) after the bound, half and all the sessions; the same
without the bound for comparison; and the texts embedded again when 100 evicted sessions come
back (target 0).
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (the module next to this script)
    answer_child_or_run,
    hash_embedder,
    open_backend,
    parser_for,
    run_benchmark,
    run_child,
    session_query,
    session_turns,
    sqlite_size,
    table,
    warm_up,
)

from ctxmgmt.app.testing import CountingEmbedder  # noqa: E402

SIZES = {"rss_sessions": (10_000, 300), "rss_bound": (1000, 100)}
"""``name -> (default, with --quick)``."""


def rss_mb() -> float:
    """Resident memory of this process (VmRSS), MB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _child_rss(task: dict[str, Any]) -> dict[str, Any]:
    from ctxmgmt.app.testing import StatePool
    from ctxmgmt.strategies import KadaneDialStrategy

    warm_up("KadaneDialMemory")
    inner = hash_embedder()
    embedder = CountingEmbedder(inner)
    store = open_backend(task["store"])
    pool = StatePool(
        surface="bench",
        factory=lambda: KadaneDialStrategy(embedder=embedder),
        store=store,
        max_sessions=task["bound"],
    )
    total, checkpoints = task["sessions"], set(task["checkpoints"])
    gc.collect()
    points = {"0": rss_mb()}
    start = time.perf_counter()
    for i in range(1, total + 1):
        s = i - 1
        session = pool.get(f"user-{s:06d}")
        session.sync(session_turns(s, 5, tag="u"))
        session.strategy.select(session_query(s, 0))
        if i in checkpoints:
            gc.collect()
            points[str(i)] = rss_mb()
    elapsed = time.perf_counter() - start
    live = len(pool)
    # sessions evicted long ago come back from the store without embedding their turns again
    reembedded = 0
    for s in range(min(100, total)):
        session = pool.get(f"user-{s:06d}")
        before = embedder.texts
        session.sync(session_turns(s, 5, tag="u"))
        reembedded += embedder.texts - before
        session.strategy.select(session_query(s, 0))
    store.close()
    return {
        "rss_mb": points,
        "live_sessions": live,
        "seconds": elapsed,
        "reloaded_sessions_embedded_texts": reembedded,
    }


def measure(*, sessions: int, bound: int, workdir: Path) -> dict[str, Any]:
    """RSS after touching many sessions with ``max_sessions=bound`` (and without a bound)."""
    checkpoints = sorted({min(sessions, x) for x in (bound, sessions // 2, sessions)})
    out = {}
    for label, limit in (("bounded", bound), ("unbounded", sessions * 2)):
        path = workdir / f"sessions-{label}.db"
        task = {
            "kind": "rss",
            "store": f"sqlite:{path}",
            "sessions": sessions,
            "bound": limit,
            "checkpoints": checkpoints,
        }
        out[label] = {"max_sessions": limit, **run_child(__file__, task, timeout=3600)}
        out[label]["sqlite_mb"] = sqlite_size(path) / 1e6
    return out


def report(s: dict[str, Any]) -> str:
    """One line per bound: resident memory at each checkpoint, live sessions, texts re-embedded."""
    points = list(s["bounded"]["rss_mb"])
    return table(
        "resident memory (MB, VmRSS) after touching N sessions (SQLite store)",
        [
            "max_sessions",
            *[f"N={int(p):,}" for p in points],
            "live sessions",
            "re-embedded on reload",
        ],
        [
            [
                str(v["max_sessions"]),
                *[v["rss_mb"].get(p) for p in points],
                v["live_sessions"],
                v["reloaded_sessions_embedded_texts"],
            ]
            for v in s.values()
        ],
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"sessions"``."""
    parser = parser_for(__doc__, SIZES, postgres=False)

    def run(args: Any, sizes: dict[str, int], pg: str | None, workdir: Path) -> dict[str, Any]:
        return measure(sessions=sizes["rss_sessions"], bound=sizes["rss_bound"], workdir=workdir)

    return run_benchmark("sessions", parser, SIZES, run, report, argv)


if __name__ == "__main__":
    answer_child_or_run(_child_rss, main)
