"""``ctxmgmt demo``: replay the shipped conversation and show what each memory would send.

The conversation goes through every memory; then, for a few questions (one of each kind by
default), each memory gets a short stanza: the turns it chose, how many tokens that is against
the full history, whether the gold evidence and answer made it in, the first lines of its own
account of its choice (``Context.explain()``) and how many messages it would send. A table of
means over every question ends the report. With a plot folder every memory also draws its
choice (KadaneDial its relevance signal, the others their blocks). The output is plain lines
that fit 80 columns. ``rich`` (and matplotlib for plots) come with the ``[cli]`` extra and are
imported inside the functions that use them.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from ctxmgmt.app.data import DemoConversation, DemoQuestion, load_demo
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import ComponentError
from ctxmgmt.messages.framing import MEMORY_LEAD_IN
from ctxmgmt.session.memory import ConversationMemory
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy

__all__ = ["DEFAULT_STRATEGIES", "default_questions", "run_demo", "summarise"]

DEFAULT_STRATEGIES: dict[str, Callable[[], Strategy]] = {"KadaneDialMemory": KadaneDialStrategy}
"""Fallback memories when the registry cannot be imported: display name -> strategy factory."""
WHY_LINES = 3
"""Block lines of ``Context.explain()`` shown per memory and question."""

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

    The whole conversation is added to a fresh :class:`~ctxmgmt.session.memory.ConversationMemory`
    per strategy; then each question is asked as the query for the next call (no budget), and
    the context is compared with the question's gold evidence turns.

    Args:
        strategies: Display name -> zero-argument factory of a strategy; default every
            memory of ``ctxmgmt.strategies.registry.MEMORIES`` (embedded defaults).
        console: A ``rich.console.Console`` to print to; default a new console on stdout.
        plot_dir: If given, one PNG per question and strategy is written there: the relevance
            signal with the chosen spans shaded for strategies that record ``z`` scores, the
            context's blocks over the turns (:func:`ctxmgmt.messages.plot.plot_context`) for the others.
        show: Print the first ``show`` questions (all are measured and returned; the
            closing table covers all); default one question of each kind
            (:func:`default_questions`).

    Returns:
        One dict per (strategy, question), in order, with keys ``strategy``, ``index``,
        ``question``, ``kind``, ``answer``, ``evidence``, ``evidence_dates``, ``selected``,
        ``spans``, ``evidence_included``, ``evidence_recall``, ``answer_in_context``,
        ``context_tokens``, ``history_tokens``, ``token_ratio``, ``select_seconds``,
        ``preview``, ``messages`` (how many would be sent), ``memory_messages`` (how many
        of them are framed memory: summaries, entities, outlines), ``explain`` and ``plot``
        (path or None).

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
    replay: dict[str, float] = {}
    console.print(f"Replaying {len(demo.turns)} turns into {len(factories)} memories:")
    for name, factory in factories.items():
        started = time.perf_counter()
        memory = ConversationMemory(factory())
        memory.add_messages(demo.messages)
        replay[name] = time.perf_counter() - started
        calls = getattr(memory.strategy, "llm_calls", None)
        console.print(
            f"  {name}: {replay[name]:.1f} s" + (f", {calls} LLM calls" if calls is not None else "")
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
    shown = (
        default_questions(demo.questions) if show is None else range(max(0, min(show, len(demo.questions))))
    )
    _print_shown(console, list(shown), len(demo.questions), default=show is None)
    for k in shown:
        _print_question(console, [r for r in records if r["index"] == k])
    _print_summary(console, records, replay)
    return records


def _registry_memories() -> dict[str, Callable[[], Strategy]]:
    try:
        from ctxmgmt.strategies.registry import MEMORIES
    except ImportError:  # pragma: no cover - registry always ships
        return dict(DEFAULT_STRATEGIES)
    return dict(MEMORIES)


def _draw(context: Context, path: Path, question: DemoQuestion, demo: DemoConversation) -> Path:
    """The picture a memory draws of its choice."""
    if "z" in context.details:
        from ctxmgmt.messages.plot import plot_relevance

        return plot_relevance(context, path, evidence=question.evidence)
    from ctxmgmt.messages.plot import plot_context

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
        "messages": len(context.messages()),
        "memory_messages": sum(m.text.startswith(MEMORY_LEAD_IN) for m in context.messages()),
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
        f"{date.split(' ', 1)[-1]} ({end - start} turns)"
        for date, start, end in zip(
            demo.session_dates, demo.session_starts, [*demo.session_starts[1:], len(demo.turns)], strict=True
        )
    )
    console.print(
        Panel(
            f"{demo.title}\n\n{len(demo.turns)} turns in {len(demo.session_dates)} sessions: {sessions}.\n"
            f"{len(demo.questions)} questions, each asked after the whole conversation. Per memory: "
            "the turns it chose, the tokens that is, whether the gold evidence and answer are in "
            "it, why (its own account, first lines) and what it would send.",
            title="ctxmgmt demo",
        )
    )


def default_questions(questions: Sequence[DemoQuestion]) -> list[int]:
    """Indices of the questions the demo shows by default: the first of each kind."""
    seen: dict[str, int] = {}
    for k, question in enumerate(questions):
        seen.setdefault(question.kind, k)
    return sorted(seen.values())


def _print_shown(console: Any, shown: Sequence[int], total: int, *, default: bool) -> None:
    """Which questions the stanzas below cover, and that the closing table covers every one."""
    labels = ", ".join(f"Q{k + 1}" for k in shown) or "none"
    why = "the first of each kind; --questions N shows the first N" if default else "--questions"
    console.print()
    console.print(
        f"In detail below: {labels} of {total} questions ({why}). The table at the end covers all {total}."
    )


def _line(console: Any, text: Any, indent: int = 0) -> None:
    """One line, cut with an ellipsis at the console's width (never wrapped)."""
    from rich.text import Text

    line = Text(" " * indent) + (text if isinstance(text, Text) else Text(str(text)))
    line.truncate(max(20, console.width), overflow="ellipsis")
    console.print(line, no_wrap=True, overflow="ellipsis", crop=True)


def _print_question(console: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """One question, then one short stanza per memory (fits 80 columns)."""
    from rich.text import Text

    if not records:
        return
    first = records[0]
    console.print()
    console.rule(Text(f"Q{int(first['index']) + 1} ({first['kind']})", style="bold"), align="left")
    console.print(Text(str(first["question"]), style="bold"))
    dates = ", ".join(f"{t} ({d})" for t, d in zip(first["evidence"], first["evidence_dates"], strict=True))
    console.print(Text(f"gold answer: {first['answer']!r}; evidence turn(s): {dates}"))
    console.print(Text(f"full history: {first['history_tokens']:,} tokens"))
    for record in records:
        head = Text()
        head.append(str(record["strategy"]), style="bold")
        head.append(f": {record['context_tokens']:,} tokens ({record['token_ratio']:.1%}), evidence ")
        head.append_text(_evidence_text(record))
        head.append(", answer ")
        head.append(*("sent", "green") if record["answer_in_context"] else ("not sent", "red"))
        _line(console, head)
        _line(console, f"turns {_span_text(record['spans'])}", indent=2)
        blocks = _block_lines(str(record["explain"]))
        for k, block in enumerate(blocks[:WHY_LINES]):
            _line(console, Text(("why: " if k == 0 else "     ") + block, style="cyan"), indent=2)
        if len(blocks) > WHY_LINES:
            _line(console, Text(f"     ... {len(blocks) - WHY_LINES} more blocks", style="cyan"), indent=2)
        _line(console, Text(_sends(record), style="dim"), indent=2)
        if record.get("plot"):
            _line(console, f"picture: {record['plot']}", indent=2)


def _block_lines(explain: str) -> list[str]:
    """The lines of ``Context.explain()`` that account for a block of the context."""
    lines = [line.strip() for line in explain.splitlines() if line.startswith("  [")]
    return [re.sub(r"^\[turns\] turns ", "turns ", line) for line in lines]


def _sends(record: Mapping[str, Any]) -> str:
    """How many messages a memory would send, and how many of them are framed memory."""
    count, framed = int(record.get("messages", 0)), int(record.get("memory_messages", 0))
    if not framed:
        return f"sends {count} messages, all verbatim from the history"
    return f"sends {count} messages: {framed} framed as memory, {count - framed} verbatim"


def _evidence_text(record: Mapping[str, Any]) -> Any:
    from rich.text import Text

    evidence = list(record["evidence"])
    included = len(record["evidence_included"])
    return Text(f"{included}/{len(evidence)}", style="green" if included == len(evidence) else "red")


def _print_summary(console: Any, records: Sequence[Mapping[str, Any]], replay: Mapping[str, float]) -> None:
    from rich import box
    from rich.table import Table

    questions = {int(r["index"]) for r in records}
    table = Table(
        title=f"All {len(questions)} questions: means per memory",
        box=box.SIMPLE_HEAD,
        caption="evidence: gold turns sent verbatim; answer: gold answer in what is sent",
    )
    table.add_column("memory", no_wrap=True)
    for header in ("evidence", "answer", "of history", "select ms", "replay s"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, row in summarise(records).items():
        table.add_row(
            name,
            f"{row['evidence_recall']:.0%}",
            f"{row['answer_in_context']:.0%}",
            f"{row['token_ratio']:.1%}",
            f"{row['select_ms']:.1f}",
            f"{replay.get(name, float('nan')):.1f}",
        )
    console.print()
    console.print(table)
