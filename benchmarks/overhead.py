"""Overhead of KadaneDialMemory on this machine: ``add`` per turn and ``select`` per query.

Run: ``python benchmarks/overhead.py [--turns 300 10000] [--queries 30]``.
Conversations are built from the shipped demo conversation, repeated with a numbered suffix
so every turn is distinct (and is embedded). ``add`` is timed turn by turn over the first
300 turns (as a chat adds them); the rest is added in batches. ``select`` is timed over
questions of the demo, after a warm-up query.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ctxmgmt import KadaneDialStrategy, Turn  # noqa: E402
from ctxmgmt.bench.metrics import percentile  # noqa: E402
from ctxmgmt.data import load_demo  # noqa: E402


def conversation(n: int) -> list[Turn]:
    base = load_demo().turns
    turns = []
    for i in range(n):
        t = base[i % len(base)]
        rep = i // len(base)
        messages = (
            t.messages
            if rep == 0
            else tuple(
                type(m)(m.role, f"{m.text} (#{rep})", name=m.name, timestamp=m.timestamp) for m in t.messages
            )
        )
        turns.append(Turn(i, messages))
    return turns


def measure(n: int, queries: int) -> dict[str, float]:
    strategy = KadaneDialStrategy()
    strategy.embedder.embed(["warm up"])
    turns = conversation(n)
    add_ms = []
    for turn in turns[:300]:
        start = time.perf_counter()
        strategy.add(turn)
        add_ms.append((time.perf_counter() - start) * 1000)
    for k in range(300, n, 256):
        strategy.add_many(turns[k : k + 256])
    questions = [q.question for q in load_demo().questions]
    strategy.select("warm up the query path")
    select_ms = []
    for i in range(queries):
        start = time.perf_counter()
        strategy.select(questions[i % len(questions)])
        select_ms.append((time.perf_counter() - start) * 1000)
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
