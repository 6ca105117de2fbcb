"""Overhead of KadaneDialMemory on this machine: ``add`` per turn and ``select`` per query.

Run: ``python benchmarks/overhead.py [--turns 300 10000] [--queries 30]``.
Conversations are built from the shipped demo conversation, repeated with a numbered suffix
so every turn is distinct (and is embedded), as in ``scaling.py``. ``add`` is timed turn by
turn over the first 300 turns (as a chat adds them); the rest is added in batches. ``select``
is timed over questions of the demo, after a warm-up query.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from scaling import conversation, time_adds, time_selects  # noqa: E402  (the script next to this one)

from ctxmgmt import KadaneDialStrategy  # noqa: E402
from ctxmgmt.app.bench.metrics import percentile  # noqa: E402


def measure(n: int, queries: int) -> dict[str, float]:
    strategy = KadaneDialStrategy()
    strategy.embedder.embed(["warm up"])
    turns = conversation(n)
    add_ms = time_adds(strategy, turns[:300])
    for k in range(300, n, 256):
        strategy.add_many(turns[k : k + 256])
    select_ms = time_selects(strategy, queries)
    return {
        "turns": n,
        "add_ms_p50": statistics.median(add_ms),
        "add_ms_p95": percentile(add_ms, 95),
        "select_ms_p50": statistics.median(select_ms),
        "select_ms_p95": percentile(select_ms, 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[300, 10_000])
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    for n in args.turns:
        print(json.dumps({k: round(v, 2) for k, v in measure(n, args.queries).items()}))


if __name__ == "__main__":
    main()
