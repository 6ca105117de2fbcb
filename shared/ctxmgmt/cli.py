"""``ctxmgmt`` command: ``demo`` replays the shipped conversation, ``bench`` measures memories."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path("..") / "shared" / "data" / "locomo_dev.json"


def _quiet_models() -> None:
    """Offline by construction, and no model-loading progress bars on the terminal."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def _fmt(value: Any, pct: bool = False) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.1%}" if pct else f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark and print (and optionally save) the results."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from ctxmgmt.bench.data import load_dialogues
    from ctxmgmt.bench.runner import FULL_HISTORY, run_memory, to_json
    from ctxmgmt.registry import MEMORIES, REFERENCES

    console = Console(stderr=False)
    paths = [Path(p) for p in (args.data or [DEFAULT_DATA])]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        console.print(
            f"[red]data file not found: {', '.join(missing)}[/red] (pass a LoCoMo/MT-Bench+/JSONL file)"
        )
        return 2
    dialogues = [d for p in paths for d in load_dialogues(p)]
    if args.limit:
        dialogues = dialogues[: args.limit]
    factories: dict[str, Any] = {FULL_HISTORY: None}
    chosen = dict(MEMORIES)
    if not args.no_references:
        chosen.update(REFERENCES)
    if args.memory:
        unknown = set(args.memory) - set(chosen)
        if unknown:
            console.print(
                f"[red]unknown memory: {', '.join(sorted(unknown))}[/red]; known: {', '.join(chosen)}"
            )
            return 2
        chosen = {k: v for k, v in chosen.items() if k in args.memory}
    factories.update(chosen)

    steps = sum(len(d.turns) + len(d.questions) for d in dialogues)
    results = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.no_progress,
    ) as progress:
        for name, factory in factories.items():
            task = progress.add_task(f"{name:<28}", total=steps)
            results.append(
                run_memory(name, factory, dialogues, on_step=lambda n, t=task: progress.advance(t, n))
            )

    table = Table(title=f"ctxmgmt bench on {', '.join(str(p) for p in paths)} ({len(dialogues)} dialogues)")
    for col in (
        "memory",
        "questions",
        "evidence recall",
        "answer containment",
        "token ratio",
        "add p50 ms",
        "add p95 ms",
        "select p50 ms",
        "select p95 ms",
        "LLM calls/turn",
    ):
        table.add_column(col, justify="left" if col == "memory" else "right")
    for r in results:
        s = r.summary()
        table.add_row(
            s["memory"],
            str(s["questions"]),
            _fmt(s["evidence_recall"]),
            _fmt(s["answer_containment"]),
            _fmt(s["token_ratio"]),
            _fmt(s["add_ms_p50"]),
            _fmt(s["add_ms_p95"]),
            _fmt(s["select_ms_p50"]),
            _fmt(s["select_ms_p95"]),
            _fmt(s["llm_calls_per_turn"]),
        )
    console.print(table)
    if args.categories:
        cat_table = Table(title="by question category (recall / containment / token ratio)")
        cat_table.add_column("memory")
        cats = sorted({q.category for r in results for q in r.questions})
        for c in cats:
            cat_table.add_column(f"cat {c}", justify="right")
        for r in results:
            by = r.by_category()
            cat_table.add_row(
                r.memory,
                *[
                    f"{_fmt(by[c]['evidence_recall'])} / {_fmt(by[c]['answer_containment'])} / "
                    f"{_fmt(by[c]['token_ratio'])}"
                    if c in by
                    else "-"
                    for c in cats
                ],
            )
        console.print(cat_table)
    if args.json:
        payload = to_json(results, data=[str(p) for p in paths])
        if args.json == "-":
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
            console.print(f"results written to {args.json}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Replay the shipped conversation and show what each memory would send."""
    from ctxmgmt.demo import run_demo

    run_demo(plot_dir=args.plots)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(prog="ctxmgmt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay the shipped multi-topic conversation")
    demo.add_argument("--plots", metavar="DIR", help="write a PNG of the relevance signal per question")
    demo.set_defaults(func=cmd_demo)
    bench = sub.add_parser("bench", help="measure memories on LoCoMo / MT-Bench+ / JSONL data")
    bench.add_argument("data", nargs="*", help=f"data files (default {DEFAULT_DATA})")
    bench.add_argument("--memory", action="append", help="only this memory (repeatable)")
    bench.add_argument("--limit", type=int, default=0, help="only the first N dialogues")
    bench.add_argument("--json", metavar="PATH", help="write results as JSON ('-' for stdout)")
    bench.add_argument("--categories", action="store_true", help="also print a per-category table")
    bench.add_argument("--no-references", action="store_true", help="skip the reference variants")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxmgmt`` command."""
    _quiet_models()
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
