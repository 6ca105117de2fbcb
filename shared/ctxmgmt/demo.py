"""``ctxmgmt demo``: replay the shipped conversation and show what each memory would send.

The conversation goes through every memory; then, question by question, the memories are
shown side by side: the turns each chose, how many tokens that is against the full history,
where the gold evidence was and whether it made it in, each memory's own account of its
choice (``Context.explain()``) and the start of what would be sent. With a plot folder every
memory also draws its choice (KadaneDial its relevance signal, the others their blocks).
``rich`` (and matplotlib for plots) come with the ``[cli]`` extra and are imported inside the
functions that use them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from ctxmgmt.context import Context
from ctxmgmt.data import DemoConversation, DemoQuestion, load_demo
from ctxmgmt.exceptions import ComponentError
from ctxmgmt.memory import ConversationMemory
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy

__all__ = ["DEFAULT_STRATEGIES", "run_demo", "summarise"]

DEFAULT_STRATEGIES: dict[str, Callable[[], Strategy]] = {"KadaneDialMemory": KadaneDialStrategy}
"""Fallback memories when the registry cannot be imported: display name -> strategy factory."""
EXPLAIN_LINES = 10
"""Lines of ``Context.explain()`` shown per memory and question."""

PREVIEW_MESSAGES = 4
"""Messages shown in the preview of what would be sent."""
PREVIEW_CHARS = 110
"""Characters shown per previewed message."""


def run_demo(
    *,
    strategies: Mapping[str, Callable[[], Strategy]] | None = None,
    console: Any = None,
    plot_dir: str | os.PathLike[str] | None = None,
    show: int | None = None,
) -> list[dict[str, Any]]:
    """Replay the demo conversation into each memory and report on every demo question.

    The whole conversation is added to a fresh :class:`~ctxmgmt.memory.ConversationMemory`
    per strategy; then each question is asked as the query for the next call (no budget), and
    the context is compared with the question's gold evidence turns.

    Args:
        strategies: Display name -> zero-argument factory of a strategy; default every
            memory of ``ctxmgmt.registry.MEMORIES`` (embedded defaults).
        console: A ``rich.console.Console`` to print to; default a new console on stdout.
        plot_dir: If given, one PNG per question and strategy is written there: the relevance
            signal with the chosen spans shaded for strategies that record ``z`` scores, the
            context's blocks over the turns (:func:`ctxmgmt.plot.plot_context`) for the others.
        show: Print only the first ``show`` questions side by side (all are measured and
            returned; the summary covers all); default all.

    Returns:
        One dict per (strategy, question), in order, with keys ``strategy``, ``index``,
        ``question``, ``kind``, ``answer``, ``evidence``, ``evidence_dates``, ``selected``,
        ``spans``, ``evidence_included``, ``evidence_recall``, ``answer_in_context``,
        ``context_tokens``, ``history_tokens``, ``token_ratio``, ``select_seconds``,
        ``preview``, ``explain`` and ``plot`` (path or None).

    Raises:
        ComponentError: ``rich`` is not installed (``pip install "ctxmgmt[cli]"``).

    Example:
        >>> records = run_demo()  # doctest: +SKIP
        >>> sum(r["evidence_recall"] for r in records) / len(records)  # doctest: +SKIP
    """
    try:
        from rich.console import Console
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ComponentError('the demo needs rich: pip install "ctxmgmt[cli]"') from exc

    console = console if console is not None else Console()
    factories = dict(strategies) if strategies is not None else _registry_memories()
    demo = load_demo()
    out_dir = Path(plot_dir) if plot_dir is not None else None
    _print_intro(console, demo)

    records: list[dict[str, Any]] = []
    for name, factory in factories.items():
        started = time.perf_counter()
        memory = ConversationMemory(factory())
        memory.add_messages(demo.messages)
        replay_seconds = time.perf_counter() - started
        calls = getattr(memory.strategy, "llm_calls", None)
        console.print(
            f"[bold]{name}[/bold]: replayed {len(demo.turns)} turns in {replay_seconds:.2f} s "
            f"({memory.strategy.total_tokens:,} tokens of history"
            + (f", {calls} LLM calls" if calls is not None else "")
            + ")"
        )
        for k, question in enumerate(demo.questions):
            started = time.perf_counter()
            context = memory.select(question.question)
            seconds = time.perf_counter() - started
            record = _record(name, k, question, context, demo, seconds)
            if out_dir is not None:
                record["plot"] = str(
                    _draw(context, out_dir / f"{_slug(name)}_q{k + 1:02d}.png", question, demo)
                )
            records.append(record)
    console.print()
    shown = len(demo.questions) if show is None else max(0, min(show, len(demo.questions)))
    for k in range(shown):
        _print_side_by_side(console, [r for r in records if r["index"] == k])
    _print_summary(console, records)
    return records


def _registry_memories() -> dict[str, Callable[[], Strategy]]:
    try:
        from ctxmgmt.registry import MEMORIES
    except ImportError:  # pragma: no cover - registry always ships
        return dict(DEFAULT_STRATEGIES)
    return dict(MEMORIES)


def _draw(context: Context, path: Path, question: DemoQuestion, demo: DemoConversation) -> Path:
    """The picture a memory draws of its choice."""
    if "z" in context.details:
        from ctxmgmt.plot import plot_relevance

        return plot_relevance(context, path, evidence=question.evidence)
    from ctxmgmt.plot import plot_context

    return plot_context(context, path, n_turns=len(demo.turns), evidence=question.evidence)


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-strategy means of :func:`run_demo` records.

    Returns:
        Strategy name -> ``{"questions", "evidence_recall", "answer_in_context",
        "token_ratio", "select_ms"}`` (recall, containment and ratio as fractions).
    """
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_name.setdefault(str(record["strategy"]), []).append(record)
    return {
        name: {
            "questions": float(len(rows)),
            "evidence_recall": fmean(float(r["evidence_recall"]) for r in rows),
            "answer_in_context": fmean(1.0 if r["answer_in_context"] else 0.0 for r in rows),
            "token_ratio": fmean(float(r["token_ratio"]) for r in rows),
            "select_ms": fmean(1000.0 * float(r["select_seconds"]) for r in rows),
        }
        for name, rows in by_name.items()
    }


# -- records ------------------------------------------------------------------------------


def _record(
    name: str,
    index: int,
    question: DemoQuestion,
    context: Context,
    demo: DemoConversation,
    seconds: float,
) -> dict[str, Any]:
    selected = context.turn_indices
    chosen = set(selected)
    evidence = list(question.evidence)
    included = [i for i in evidence if i in chosen]
    return {
        "strategy": name,
        "index": index,
        "question": question.question,
        "kind": question.kind,
        "answer": question.answer,
        "evidence": evidence,
        "evidence_dates": [demo.date_of(i) for i in evidence],
        "selected": selected,
        "spans": [list(run) for run in _ranges(selected)],
        "evidence_included": included,
        "evidence_recall": len(included) / len(evidence) if evidence else 1.0,
        "answer_in_context": question.answer.lower() in context.text().lower(),
        "context_tokens": context.tokens,
        "history_tokens": context.history_tokens,
        "token_ratio": context.token_ratio,
        "select_seconds": seconds,
        "preview": _preview(context),
        "explain": context.explain(),
        "plot": None,
    }


def _ranges(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Ascending indices as inclusive ``(start, end)`` runs of consecutive values."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [(s, e) for s, e in runs]


def _preview(context: Context) -> str:
    messages = context.messages()
    lines = []
    for message in messages[:PREVIEW_MESSAGES]:
        text = " ".join(message.text.split())
        if len(text) > PREVIEW_CHARS:
            text = text[: PREVIEW_CHARS - 1] + "…"
        stamp = f"[{message.timestamp}] " if message.timestamp else ""
        lines.append(f"{stamp}{message.role}: {text}")
    if len(messages) > PREVIEW_MESSAGES:
        lines.append(f"… and {len(messages) - PREVIEW_MESSAGES} more messages")
    return "\n".join(lines) if lines else "(nothing from the history)"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower() or "memory"


def _span_text(spans: Sequence[Sequence[int]]) -> str:
    return ", ".join(str(s) if s == e else f"{s}-{e}" for s, e in spans) or "none"


# -- printing -----------------------------------------------------------------------------


def _print_intro(console: Any, demo: DemoConversation) -> None:
    from rich.panel import Panel

    sessions = ", ".join(
        f"{date} (turns {start}-{end - 1})"
        for date, start, end in zip(
            demo.session_dates, demo.session_starts, [*demo.session_starts[1:], len(demo.turns)], strict=True
        )
    )
    console.print(
        Panel(
            f"{demo.title}\n\n{len(demo.turns)} turns in {len(demo.session_dates)} sessions: {sessions}\n"
            f"{len(demo.questions)} questions, each asked after the whole conversation.",
            title="ctxmgmt demo",
            expand=True,
        )
    )


def _print_side_by_side(console: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """One question, one column per memory."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if not records:
        return
    first = records[0]
    table = Table(show_lines=True, expand=True)
    table.add_column("", style="bold", no_wrap=True, width=12)
    for record in records:
        table.add_column(str(record["strategy"]), overflow="fold", ratio=1)
    table.add_row("chosen turns", *[Text(_span_text(r["spans"])) for r in records])
    table.add_row(
        "tokens",
        *[
            Text(f"{r['context_tokens']:,} of {r['history_tokens']:,} ({r['token_ratio']:.1%})")
            for r in records
        ],
    )
    table.add_row("evidence", *[_evidence_text(r) for r in records])
    table.add_row(
        "answer sent",
        *[Text("yes", style="green") if r["answer_in_context"] else Text("no", style="red") for r in records],
    )
    table.add_row(
        "explain", *[Text(_clip_lines(str(r["explain"]), EXPLAIN_LINES), style="cyan") for r in records]
    )
    table.add_row("would send", *[Text(str(r["preview"]), style="dim") for r in records])
    if any(r.get("plot") for r in records):
        table.add_row("picture", *[Text(str(r.get("plot") or "-")) for r in records])
    dates = ", ".join(
        f"turn {t} ({d})" for t, d in zip(first["evidence"], first["evidence_dates"], strict=True)
    )
    title = f"Q{int(first['index']) + 1} [{first['kind']}] {first['question']}"
    console.print(
        Panel(
            table,
            title=Text(title, style="bold"),
            title_align="left",
            subtitle=Text(f"gold answer: {first['answer']} — evidence: {dates}"),
            subtitle_align="left",
        )
    )


def _evidence_text(record: Mapping[str, Any]) -> Any:
    from rich.text import Text

    text = Text()
    included = set(record["evidence_included"])
    for k, turn in enumerate(record["evidence"]):
        if k:
            text.append(", ")
        mark, style = ("✓", "green") if turn in included else ("✗", "red")
        text.append(f"{turn} {mark}", style=style)
    text.append(f" ({float(record['evidence_recall']):.0%})")
    return text


def _clip_lines(text: str, limit: int) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join([*lines[:limit], f"… {len(lines) - limit} more lines"])


def _print_summary(console: Any, records: Sequence[Mapping[str, Any]]) -> None:
    from rich.table import Table

    table = Table(title="Summary (means over the questions)")
    table.add_column("memory", no_wrap=True)
    table.add_column("questions", justify="right")
    table.add_column("evidence recall", justify="right")
    table.add_column("answer in context", justify="right")
    table.add_column("token ratio", justify="right")
    table.add_column("select time", justify="right")
    for name, row in summarise(records).items():
        table.add_row(
            name,
            f"{int(row['questions'])}",
            f"{row['evidence_recall']:.0%}",
            f"{row['answer_in_context']:.0%}",
            f"{row['token_ratio']:.1%}",
            f"{row['select_ms']:.1f} ms",
        )
    console.print(table)
