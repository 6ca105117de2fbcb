"""How the cost of every memory grows with conversation length: ``add`` and ``select`` overhead.

Run: ``python benchmarks/scaling.py [--turns 100 1000] [--with-10000] [--baselines]
[--queries 10] [--timed-adds 50] [--plot scaling.png] [--json scaling.json]``.

For each memory of ``ctxmgmt.strategies.registry.MEMORIES`` (and, with ``--baselines``, the
framework-free baselines) and each length n, a conversation of n distinct turns is built from
the shipped demo conversation (repeated with a numbered suffix). The first n - m turns are
added in batches of 256 (untimed), then the last m turns are added one by one and timed, so
``add`` is measured at length ~n as a chat adds turns; then ``select`` is timed for
``--queries`` demo questions after a warm-up query. Prints a table and writes a PNG
(``ctxmgmt.app.bench.plots.plot_scaling``). 10,000 turns is optional (``--with-10000``): it takes a few
minutes per memory on 2 CPU cores, mostly embedding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ctxmgmt import Turn  # noqa: E402
from ctxmgmt.app.bench.metrics import percentile  # noqa: E402
from ctxmgmt.app.data import load_demo  # noqa: E402
from ctxmgmt.strategies.base import Strategy  # noqa: E402


def conversation(n: int) -> list[Turn]:
    """n distinct turns: the demo conversation repeated, each repeat with a numbered suffix."""
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


def time_adds(strategy: Strategy, turns: list[Turn]) -> list[float]:
    """Milliseconds of each ``add``, the turns added one by one (as a chat adds them)."""
    add_ms = []
    for turn in turns:
        start = time.perf_counter()
        strategy.add(turn)
        add_ms.append((time.perf_counter() - start) * 1000)
    return add_ms


def time_selects(strategy: Strategy, queries: int) -> list[float]:
    """Milliseconds of ``queries`` ``select`` calls on the demo's questions, after a warm-up query."""
    questions = [q.question for q in load_demo().questions]
    strategy.select("warm up the query path")
    select_ms = []
    for i in range(queries):
        start = time.perf_counter()
        strategy.select(questions[i % len(questions)])
        select_ms.append((time.perf_counter() - start) * 1000)
    return select_ms


def measure(
    name: str, factory: Callable[[], Strategy], n: int, *, queries: int, timed_adds: int
) -> dict[str, Any]:
    """Overhead of one memory at one conversation length."""
    strategy = factory()
    turns = conversation(n)
    m = min(timed_adds, n)
    started = time.perf_counter()
    for k in range(0, n - m, 256):
        strategy.add_many(turns[k : min(k + 256, n - m)])
    build_s = time.perf_counter() - started
    add_ms = time_adds(strategy, turns[n - m :])
    select_ms = time_selects(strategy, queries)
    calls = getattr(strategy, "llm_calls", None)
    return {
        "memory": name,
        "turns": n,
        "add_ms_p50": percentile(add_ms, 50),
        "add_ms_p95": percentile(add_ms, 95),
        "select_ms_p50": percentile(select_ms, 50),
        "select_ms_p95": percentile(select_ms, 95),
        "batched_add_s": build_s,
        "llm_calls_per_turn": (calls / n) if isinstance(calls, int | float) else 0.0,
    }


def memories(with_baselines: bool) -> dict[str, Callable[[], Strategy]]:
    """Every registered memory, and optionally the framework-free baselines."""
    from ctxmgmt.strategies.registry import MEMORIES

    chosen: dict[str, Callable[[], Strategy]] = dict(MEMORIES)
    if with_baselines:
        from ctxmgmt.app.bench.baselines import baselines

        chosen.update({b.name: b.factory for b in baselines(frameworks=False)})
    return chosen


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the scaling benchmark; returns the rows it printed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--turns", type=int, nargs="+", default=[100, 1000], help="lengths (default 100 1000)"
    )
    parser.add_argument("--with-10000", action="store_true", help="also measure 10,000 turns (slow)")
    parser.add_argument("--baselines", action="store_true", help="also the framework-free baselines")
    parser.add_argument("--memory", action="append", help="only this memory (repeatable)")
    parser.add_argument("--queries", type=int, default=10, help="timed select calls per length")
    parser.add_argument("--timed-adds", type=int, default=50, help="turns added one by one and timed")
    parser.add_argument("--plot", default="scaling.png", help="PNG to write ('' for none)")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    sizes = sorted(set(args.turns) | ({10_000} if args.with_10000 else set()))
    chosen = memories(args.baselines)
    if args.memory:
        chosen = {k: v for k, v in chosen.items() if k in args.memory}
    console = Console(width=None if sys.stdout.isatty() else 140)
    rows = []
    for name, factory in chosen.items():
        factory().add_many(conversation(2))  # load models before timing
        for n in sizes:
            with console.status(f"{name}: {n:,} turns"):
                rows.append(measure(name, factory, n, queries=args.queries, timed_adds=args.timed_adds))

    table = Table(title="overhead vs conversation length (ms per call)")
    for col in (
        "memory",
        "turns",
        "add p50",
        "add p95",
        "select p50",
        "select p95",
        "batched add s",
        "LLM/turn",
    ):
        table.add_column(col, justify="left" if col == "memory" else "right")
    for r in rows:
        table.add_row(
            r["memory"],
            f"{r['turns']:,}",
            f"{r['add_ms_p50']:.2f}",
            f"{r['add_ms_p95']:.2f}",
            f"{r['select_ms_p50']:.2f}",
            f"{r['select_ms_p95']:.2f}",
            f"{r['batched_add_s']:.1f}",
            f"{r['llm_calls_per_turn']:.3f}",
        )
    console.print(table)
    if args.plot:
        from ctxmgmt.app.bench.plots import plot_scaling

        console.print(f"plot written to {plot_scaling(rows, args.plot)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
        console.print(f"rows written to {args.json}")
    return rows


if __name__ == "__main__":
    main()
