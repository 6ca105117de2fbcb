"""``ctxmgmt`` command: ``demo`` replays the shipped conversation, ``bench`` measures memories."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path("..") / "shared" / "data" / "locomo_dev.json"
DESCRIPTION = "ctxmgmt demo replays the shipped conversation; ctxmgmt bench measures memories."
"""What ``ctxmgmt --help`` says first (plain text: the terminal shows no markup)."""


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


QUICK_DIALOGUES = 1
"""Dialogues ``ctxmgmt bench --quick`` measures (the first of the data; ``--dialogues`` overrides)."""


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark and print (and optionally save and plot) the results."""
    from rich.console import Console

    from ctxmgmt.app.bench.baselines import baselines as make_baselines
    from ctxmgmt.app.bench.data import load_dialogues
    from ctxmgmt.app.bench.runner import BUDGET_NOTE, run_all, to_json
    from ctxmgmt.strategies.registry import MEMORIES, REFERENCES

    json_to_stdout = args.json == "-"
    console = Console(stderr=json_to_stdout)
    paths = [Path(p) for p in (args.data or [DEFAULT_DATA])]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        console.print(
            f"[red]data file not found: {', '.join(missing)}[/red] (pass a LoCoMo/MT-Bench+/JSONL file)"
        )
        return 2
    dialogues = [d for p in paths for d in load_dialogues(p)]
    limit = args.limit or (QUICK_DIALOGUES if args.quick else 0)
    if limit:
        dialogues = dialogues[:limit]
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
        from ctxmgmt.app.bench.framework_baselines import framework_notes

        baselines = make_baselines(frameworks=True)
        notes.extend(framework_notes())
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")

    rows = 1 + len(memories) + len(references) + len(baselines)
    if args.cost:
        return _bench_costs(args, console, paths, dialogues, memories, references, baselines, notes)
    with _progress(args.no_progress, rows) as hook:
        results = run_all(
            dialogues,
            memories=memories,
            references=references,
            baselines=baselines,
            progress=hook,
            budget=args.budget,
        )

    turns = sum(len(d.turns) for d in dialogues)
    questions = sum(len(d.questions) for d in dialogues)
    console.print(
        f"\nctxmgmt bench on {', '.join(str(p) for p in paths)}: {len(dialogues)} dialogues, "
        f"{turns} turns, {questions} questions"
        + (
            " (--quick: a short run; `ctxmgmt bench` without it measures every dialogue)"
            if args.quick
            else ""
        )
    )
    summaries = [r.summary() for r in results]
    console.print(_quality_table(summaries))
    console.print(_cost_table(summaries))
    console.print(
        "Means over questions. evidence: gold evidence turns sent verbatim; answer: gold answer "
        "in what is sent; tokens: context tokens / full history tokens. Overhead in ms of the "
        "memory's own work. LI = LlamaIndex, LC = LangChain. Budgets: "
        + (f"{args.budget:,} tokens for every row." if args.budget else f"{BUDGET_NOTE}.")
        + (" sessions: gold evidence sessions with a turn sent." if _has_sessions(summaries) else ""),
        style="dim",
    )
    cats = sorted({q.category for r in results for q in r.questions})
    if args.categories or (len(cats) > 1 and not args.quick):
        for key, label in CATEGORY_METRICS:
            if key != "session_recall" or _has_sessions(summaries):
                console.print(_category_table(results, cats, key, label))
    if args.plot:
        from ctxmgmt.app.bench.plots import plot_tradeoff

        title = f"{', '.join(p.name for p in paths)}: quality vs tokens sent"
        written = plot_tradeoff(summaries, args.plot, title=title)
        console.print(f"trade-off plot written to {written}")
    if args.json:
        payload = to_json(results, data=[str(p) for p in paths], notes=notes)
        if json_to_stdout:
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
            console.print(f"results written to {args.json}")
    return 0


def _bench_costs(
    args: argparse.Namespace,
    console: Any,
    paths: Sequence[Path],
    dialogues: Sequence[Any],
    memories: Mapping[str, Any],
    references: Mapping[str, Any],
    baselines: Sequence[Any],
    notes: Sequence[str],
) -> int:
    """``ctxmgmt bench --cost``: replay as a chat (one call per user turn) and bill prompt caching."""
    from ctxmgmt.app.bench.cost import PRICES, SYSTEM_PROMPT, costs_json, run_costs

    prices = tuple(args.cached_price or PRICES)
    rows = 1 + len(memories) + len(references) + len(baselines)
    with _progress(args.no_progress, rows) as hook:
        results = run_costs(
            dialogues,
            memories=memories,
            references=references,
            baselines=baselines,
            min_prefix=args.min_prefix,
            stable=args.layout,
            progress=hook,
        )
    calls = sum(len(d.turns) for d in dialogues)
    console.print(
        f"\nctxmgmt bench --cost on {', '.join(str(p) for p in paths)}: {len(dialogues)} dialogues, "
        f"{calls} calls (one per user turn)"
    )
    full = results[0]
    console.print(cost_table([r.summary(full, prices) for r in results], prices))
    console.print(
        f"One call per user turn: input = a fixed system prompt ({SYSTEM_PROMPT[:24]}...) + the memory's "
        "messages + the user message. cached share: input tokens in the leading messages identical to "
        f"the previous call's, when at least {args.min_prefix:,} tokens (--min-prefix). bill @p: "
        "uncached tokens + p x cached tokens, relative to the full history sent uncached. x full: "
        "billed / the full history's billed at the same price. even: median history (turns/tokens) "
        "from which the memory bills less than the full history (20-call means; * not in every "
        "dialogue). Equal-token "
        "baselines get the first memory's input per call; summarising ones its mean per dialogue.",
        style="dim",
    )
    if args.json:
        payload = costs_json(
            results, data=[str(p) for p in paths], prices=prices, min_prefix=args.min_prefix, notes=notes
        )
        if args.json == "-":
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
            console.print(f"results written to {args.json}")
    return 0


def cost_table(summaries: Sequence[Mapping[str, Any]], prices: Sequence[float]) -> Any:
    """The ``--cost`` table (80 columns): per row, input per call, cached share, billed, break-even."""
    table = _table("Cost with prompt caching")
    table.add_column("input\n/call", justify="right", no_wrap=True)
    table.add_column("cached\nshare", justify="right", no_wrap=True)
    for price in prices:
        table.add_column(f"bill\n@{price:g}", justify="right", no_wrap=True)
        table.add_column("x\nfull", justify="right", no_wrap=True)
    table.add_column(f"even\n@{prices[0]:g}", justify="right", no_wrap=True)
    for s in summaries:
        cells = [f"{s['input_tokens_per_call']:,.0f}", f"{s['cached_share']:.2f}"]
        for price in prices:
            cells += [f"{s[f'billed_{price:g}']:.3f}", f"{s.get(f'vs_full_{price:g}', 1.0):.2f}"]
        table.add_row(short_name(s["memory"]), *cells, _break_even_cell(s, prices[0]))
    return table


def _break_even_cell(summary: Mapping[str, Any], price: float) -> str:
    """``turns/tokens`` (e.g. ``57/4.5k``, ``236/17k``), ``never``, or ``-`` for the full history."""
    even = summary.get(f"break_even_{price:g}") or {}
    if summary["kind"] == "full":
        return "-"
    if even.get("turns") is None:
        return "never"
    thousands = even["tokens"] / 1000
    cell = f"{even['turns']:.0f}/{thousands:.{0 if thousands >= 10 else 1}f}k"
    return cell if even["dialogues"] == even["total"] else f"{cell}*"


@contextlib.contextmanager
def _progress(disabled: bool, rows: int) -> Iterator[Any]:
    """The progress hook of a bench run, on stderr: a bar on a terminal, plain lines otherwise.

    Plain lines (:class:`ctxmgmt.app.bench.runner.LineProgress`) show when the output is piped or
    logged, where a live bar would print nothing.
    """
    if disabled:
        yield None
        return
    if not sys.stderr.isatty():
        from ctxmgmt.app.bench.runner import LineProgress

        progress = LineProgress(rows, sys.stderr)
        yield progress
        progress.write(f"done: {rows} rows in {progress.elapsed():.0f} s")
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        count = 0

        def hook(name: str, total: int) -> Any:
            nonlocal count
            count += 1
            task = bar.add_task(f"{count}/{rows} {name[:28]:<28}", total=total)
            return lambda n: bar.advance(task, n)

        yield hook


SHORT_KIND = {"full": "full", "memory": "memory", "reference": "ref", "baseline": "baseline"}
"""How the tables name each kind of row."""

CATEGORY_METRICS = (
    ("evidence_recall", "evidence recall"),
    ("session_recall", "session recall"),
    ("answer_containment", "answer containment"),
    ("token_ratio", "token ratio"),
)
"""Per-category tables: metric key, title."""


def short_name(name: str) -> str:
    """A row's name as the tables print it (LI = LlamaIndex, LC = LangChain), to fit 80 columns."""
    return (
        name.replace("LlamaIndex ", "LI ")
        .replace("LangChain ", "LC ")
        .replace(" (equal tokens)", "")
        .replace(" settings)", ")")
    )


def _table(title: str) -> Any:
    """A table that fits 80 columns: no borders, one space between columns, names never cut."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False, padding=(0, 0, 0, 1)
    )
    table.add_column("memory", no_wrap=True)
    return table


def _has_sessions(summaries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the data marks evidence sessions (LongMemEval): then recall per session is shown."""
    return any(s.get("session_recall") == s.get("session_recall") for s in summaries)  # not nan


def _quality_table(summaries: Sequence[Mapping[str, Any]]) -> Any:
    table = _table("Quality")
    table.add_column("kind", no_wrap=True)
    keys = ["evidence_recall", "session_recall", "answer_containment", "token_ratio"]
    if not _has_sessions(summaries):
        keys.remove("session_recall")
    headers = {"evidence_recall": "evidence", "session_recall": "sessions"}
    for key in keys:
        table.add_column(headers.get(key, key.split("_")[0]), justify="right", no_wrap=True)
    for s in summaries:
        table.add_row(
            short_name(s["memory"]), SHORT_KIND.get(s["kind"], s["kind"]), *[_fmt(s[key]) for key in keys]
        )
    return table


def _cost_table(summaries: Sequence[Mapping[str, Any]]) -> Any:
    table = _table("Cost")
    for header in (
        "add ms\np50",
        "add ms\np95",
        "select\nms p50",
        "select\nms p95",
        "LLM per\nturn",
        "LLM per\nquery",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    for s in summaries:
        table.add_row(
            short_name(s["memory"]),
            *[
                _fmt(s[key])
                for key in (
                    "add_ms_p50",
                    "add_ms_p95",
                    "select_ms_p50",
                    "select_ms_p95",
                    "llm_calls_per_turn",
                    "llm_calls_per_query",
                )
            ],
        )
    return table


def _category_table(results: Sequence[Any], cats: Sequence[str], key: str, label: str) -> Any:
    """One metric per question category (LoCoMo's numbered categories named)."""
    table = _table(f"{label.capitalize()} by question category")
    for c in cats:
        count = sum(1 for q in results[0].questions if q.category == c) if results else 0
        table.add_column(f"{_category_label(c)}\n({count})", justify="right", no_wrap=True)
    for r in results:
        by = r.by_category()
        table.add_row(short_name(r.memory), *[_fmt(by[c][key]) if c in by else "-" for c in cats])
    return table


def cmd_demo(args: argparse.Namespace) -> int:
    """Replay the shipped conversation and show what each memory would send."""
    from ctxmgmt.app.demo import run_demo

    run_demo(plot_dir=args.plots, show=args.questions)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(prog="ctxmgmt", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay the shipped multi-topic conversation")
    demo.add_argument(
        "--plots", metavar="DIR", help="write each memory's picture of its choice per question (PNG)"
    )
    demo.add_argument(
        "--questions",
        type=int,
        metavar="N",
        help="show the first N questions (default one of each kind; the closing table covers all)",
    )
    demo.set_defaults(func=cmd_demo)
    bench = sub.add_parser("bench", help="measure memories on LoCoMo / MT-Bench+ / JSONL data")
    bench.add_argument("data", nargs="*", help=f"data files (default {DEFAULT_DATA})")
    bench.add_argument("--memory", action="append", help="only this memory (repeatable)")
    bench.add_argument(
        "--dialogues",
        "--limit",
        dest="limit",
        type=int,
        default=0,
        metavar="N",
        help="only the first N dialogues",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help=f"a short run: the first {QUICK_DIALOGUES} dialogue (unless --dialogues), no category tables",
    )
    bench.add_argument(
        "--budget",
        type=int,
        metavar="TOKENS",
        help="one context budget for every memory and baseline (default: memories choose their size)",
    )
    bench.add_argument("--json", metavar="PATH", help="write results as JSON ('-' for stdout)")
    bench.add_argument(
        "--categories", action="store_true", help="print the per-category table even for one category"
    )
    bench.add_argument("--no-references", action="store_true", help="skip the reference variants")
    bench.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (default: a bar on a terminal, a line every 5 s otherwise)",
    )
    bench.add_argument(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the baselines (last-k, top-k dense, LangChain / LlamaIndex memories); default on",
    )
    bench.add_argument("--plot", metavar="PATH", help="write a PNG of quality vs token ratio per memory")
    bench.add_argument(
        "--cost",
        action="store_true",
        help="bill as providers with prompt caching do: replay each dialogue as a chat, one call per "
        "user turn, and report input tokens per call, the cached share, billed tokens at the cached "
        "prices and the break-even history length, for every memory and baseline",
    )
    bench.add_argument(
        "--cached-price",
        type=float,
        action="append",
        metavar="SHARE",
        help="with --cost: price of a cached token as a share of the input price (repeatable; "
        "default 0.1 and 0.5)",
    )
    bench.add_argument(
        "--min-prefix",
        type=int,
        default=1024,
        metavar="TOKENS",
        help="with --cost: fewest tokens a provider caches as a prefix (default 1,024)",
    )
    bench.add_argument(
        "--layout",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --cost: lay memories out for prompt caching (default: each memory's default)",
    )
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxmgmt`` command."""
    _quiet_models()
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
