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


LOCOMO_CATEGORIES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
"""Display names of LoCoMo's numeric question categories."""


def _category_label(category: str) -> str:
    name = LOCOMO_CATEGORIES.get(category)
    return f"{category} {name}" if name else (category or "(none)")


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark and print (and optionally save and plot) the results."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from ctxmgmt.bench.baselines import baselines as make_baselines
    from ctxmgmt.bench.data import load_dialogues
    from ctxmgmt.bench.runner import BUDGET_NOTE, run_all, to_json
    from ctxmgmt.registry import MEMORIES, REFERENCES

    json_to_stdout = args.json == "-"
    stream = sys.stderr if json_to_stdout else sys.stdout
    console = Console(stderr=json_to_stdout, width=None if stream.isatty() else 180)
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
    memories = dict(MEMORIES)
    references = {} if args.no_references else dict(REFERENCES)
    notes: list[str] = []
    if args.memory:
        known = {**memories, **references}
        unknown = set(args.memory) - set(known)
        if unknown:
            console.print(
                f"[red]unknown memory: {', '.join(sorted(unknown))}[/red]; known: {', '.join(known)}"
            )
            return 2
        reference = next(iter(MEMORIES))
        memories = {k: v for k, v in memories.items() if k in args.memory}
        references = {k: v for k, v in references.items() if k in args.memory}
        if args.baselines and reference not in memories:
            memories = {reference: MEMORIES[reference], **memories}
            notes.append(f"{reference} added: it sets the budgets of the equal-token baselines")
    baselines = []
    if args.baselines:
        from ctxmgmt.bench.framework_baselines import framework_notes

        baselines = make_baselines(frameworks=True)
        notes.extend(framework_notes())
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.no_progress,
    ) as progress:

        def hook(name: str, total: int) -> Any:
            task = progress.add_task(f"{name:<36}", total=total)
            return lambda n: progress.advance(task, n)

        results = run_all(
            dialogues, memories=memories, references=references, baselines=baselines, progress=hook
        )

    questions = sum(len(d.questions) for d in dialogues)
    table = Table(
        title=f"ctxmgmt bench on {', '.join(str(p) for p in paths)} "
        f"({len(dialogues)} dialogues, {sum(len(d.turns) for d in dialogues)} turns, {questions} questions)",
        caption=f"Means over questions; overhead in ms of the memory's own work. Budgets: {BUDGET_NOTE}.",
    )
    for col in (
        "memory",
        "kind",
        "evidence recall",
        "answer containment",
        "token ratio",
        "add p50 ms",
        "add p95 ms",
        "select p50 ms",
        "select p95 ms",
        "LLM calls/turn",
        "LLM calls/query",
    ):
        table.add_column(col, justify="left" if col in ("memory", "kind") else "right")
    for r in results:
        s = r.summary()
        table.add_row(
            s["memory"],
            s["kind"],
            _fmt(s["evidence_recall"]),
            _fmt(s["answer_containment"]),
            _fmt(s["token_ratio"]),
            _fmt(s["add_ms_p50"]),
            _fmt(s["add_ms_p95"]),
            _fmt(s["select_ms_p50"]),
            _fmt(s["select_ms_p95"]),
            _fmt(s["llm_calls_per_turn"]),
            _fmt(s["llm_calls_per_query"]),
        )
    console.print(table)
    cats = sorted({q.category for r in results for q in r.questions})
    if args.categories or len(cats) > 1:
        cat_table = Table(title="by question category: evidence recall / answer containment / token ratio")
        cat_table.add_column("memory")
        for c in cats:
            count = sum(1 for q in results[0].questions if q.category == c) if results else 0
            cat_table.add_column(f"{_category_label(c)} ({count})", justify="right")
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
    if args.plot:
        from ctxmgmt.bench.plots import plot_tradeoff

        title = f"{', '.join(p.name for p in paths)}: quality vs tokens sent"
        written = plot_tradeoff([r.summary() for r in results], args.plot, title=title)
        console.print(f"trade-off plot written to {written}")
    if args.json:
        payload = to_json(results, data=[str(p) for p in paths], notes=notes)
        if json_to_stdout:
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
            console.print(f"results written to {args.json}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Replay the shipped conversation and show what each memory would send."""
    from ctxmgmt.demo import run_demo

    run_demo(plot_dir=args.plots, show=args.questions)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(prog="ctxmgmt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay the shipped multi-topic conversation")
    demo.add_argument(
        "--plots", metavar="DIR", help="write each memory's picture of its choice per question (PNG)"
    )
    demo.add_argument(
        "--questions",
        type=int,
        metavar="N",
        help="show only the first N questions side by side (default all)",
    )
    demo.set_defaults(func=cmd_demo)
    bench = sub.add_parser("bench", help="measure memories on LoCoMo / MT-Bench+ / JSONL data")
    bench.add_argument("data", nargs="*", help=f"data files (default {DEFAULT_DATA})")
    bench.add_argument("--memory", action="append", help="only this memory (repeatable)")
    bench.add_argument("--limit", type=int, default=0, help="only the first N dialogues")
    bench.add_argument("--json", metavar="PATH", help="write results as JSON ('-' for stdout)")
    bench.add_argument(
        "--categories", action="store_true", help="print the per-category table even for one category"
    )
    bench.add_argument("--no-references", action="store_true", help="skip the reference variants")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.add_argument(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the baselines (last-k, top-k dense, LangChain / LlamaIndex memories); default on",
    )
    bench.add_argument("--plot", metavar="PATH", help="write a PNG of quality vs token ratio per memory")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxmgmt`` command."""
    _quiet_models()
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
