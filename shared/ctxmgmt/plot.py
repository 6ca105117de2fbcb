"""Pictures: a KadaneDial selection, any memory's context, and the benchmark's trade-off.

- :func:`plot_relevance`: the relevance signal with the chosen spans shaded (KadaneDial).
- :func:`plot_context`: for any context, which past turns are sent verbatim and which are
  covered by summaries or entity lists, with the gold evidence marked.
- :func:`plot_tradeoff`: quality (evidence recall, answer containment) against the share of
  the history's tokens sent, one point per memory, like the papers' trade-off figures.

matplotlib is optional (``pip install "ctxmgmt[cli]"``) and imported inside the function; the
figure is rendered with the Agg backend directly, so the caller's pyplot backend is untouched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxmgmt.context import Context
from ctxmgmt.exceptions import ComponentError, ConfigurationError

__all__ = ["plot_context", "plot_relevance", "plot_scaling", "plot_tradeoff"]


def plot_relevance(
    context: Context,
    path: str | os.PathLike[str],
    *,
    evidence: Iterable[int] | None = None,
) -> Path:
    """Write a PNG of the per-turn relevance behind ``context``.

    Draws the z-normalised relevance of every past turn (``context.details["z"]``), the gain
    threshold ``tau`` (turns above it add to a span), the spans KadaneDial chose
    (``details["spans"]``) shaded, the always-kept recent turns (``details["recent"]``) hatched,
    the turns actually sent as dots, and ``evidence`` turns (e.g. gold evidence) as red markers.

    Args:
        context: A context built by a strategy that records ``z`` scores (KadaneDialStrategy).
        path: Where to write the PNG; parent folders are created.
        evidence: Turn indices to mark, e.g. the gold evidence of a question.

    Returns:
        The path written.

    Raises:
        ConfigurationError: ``context.details`` has no per-turn ``z`` scores.
        ComponentError: matplotlib is not installed.

    Example:
        >>> plot_relevance(memory.select("where did we book?"), "relevance.png")  # doctest: +SKIP
        PosixPath('relevance.png')
    """
    z = context.details.get("z")
    if not isinstance(z, Sequence) or isinstance(z, str):
        raise ConfigurationError(
            f"context from strategy {context.strategy or '?'!r} has no per-turn z scores to plot; "
            "plot_relevance needs a KadaneDialStrategy context"
        )
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ComponentError('plot_relevance needs matplotlib: pip install "ctxmgmt[cli]"') from exc

    n = len(z)
    spans = [(int(s), int(e)) for s, e in context.details.get("spans", ())]
    recent = sorted(int(i) for i in context.details.get("recent", ()))
    tau = context.details.get("tau")
    sent = [i for i in context.turn_indices if i < n]
    marked = sorted({int(i) for i in (evidence or ()) if 0 <= int(i) < n})

    fig = Figure(figsize=(max(8.0, min(20.0, n / 8)), 3.6), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(n))
    for k, (start, end) in enumerate(spans):
        ax.axvspan(
            start - 0.5, end + 0.5, color="tab:green", alpha=0.22, lw=0, label="span" if k == 0 else None
        )
    for k, (start, end) in enumerate(_runs(recent)):
        ax.axvspan(
            start - 0.5,
            end + 0.5,
            facecolor="none",
            edgecolor="tab:gray",
            hatch="//",
            lw=0,
            label="recent" if k == 0 else None,
        )
    ax.plot(xs, z, color="tab:blue", lw=1.1, label="relevance (z)")
    if sent:
        ax.scatter(sent, [z[i] for i in sent], s=14, color="tab:green", zorder=3, label="sent")
    if isinstance(tau, int | float):
        ax.axhline(float(tau), color="tab:orange", ls="--", lw=0.9, label=f"tau = {float(tau):g}")
    ax.axhline(0.0, color="black", lw=0.5)
    if marked:
        ax.scatter(
            marked, [z[i] for i in marked], marker="v", s=60, color="tab:red", zorder=4, label="evidence"
        )
        for i in marked:
            ax.axvline(i, color="tab:red", lw=0.6, alpha=0.5)
    ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    if n:
        low, high = min(z), max(z)
        pad = max(high - low, 1.0)
        ax.set_ylim(low - 0.08 * pad, high + 0.3 * pad)
    ax.set_xlabel("past turn")
    ax.set_ylabel("relevance (z-score)")
    ax.set_title(_shorten(context.query or "(no query)", 100), fontsize=10)
    ax.legend(loc="upper left", fontsize=7, ncol=6, frameon=False)
    fig.tight_layout()

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [(s, e) for s, e in runs]


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _figure(width: float, height: float) -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ComponentError('plotting needs matplotlib: pip install "ctxmgmt[cli]"') from exc
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, FigureCanvasAgg


def _save(
    fig: Any, path: str | os.PathLike[str], rect: tuple[float, float, float, float] | None = None
) -> Path:
    fig.tight_layout(rect=rect)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


_KIND_COLOURS = {
    "turns": "tab:green",
    "current": "tab:green",
    "summary": "tab:purple",
    "entities": "tab:orange",
}


def plot_context(
    context: Context,
    path: str | os.PathLike[str],
    *,
    n_turns: int | None = None,
    evidence: Iterable[int] | None = None,
) -> Path:
    """Write a PNG of what any memory sends: one row per block over the turn axis.

    Verbatim turns are green bars, summaries purple and entity lists orange (spanning the
    turns they cover, or drawn at the left edge when their provenance is unknown); ``evidence``
    turns are red lines.

    Args:
        context: Any strategy's context.
        path: Where to write the PNG; parent folders are created.
        n_turns: Length of the conversation (default: inferred from the blocks and evidence).
        evidence: Turn indices to mark.

    Returns:
        The path written.

    Raises:
        ComponentError: matplotlib is not installed.
    """
    marked = sorted({int(i) for i in (evidence or ())})
    covered = [i for b in context.blocks for i in b.turns]
    n = n_turns if n_turns is not None else max([*covered, *marked, 0]) + 1
    rows = [b for b in context.blocks if b.kind != "system"]
    fig, _ = _figure(max(8.0, min(20.0, n / 8)), 1.2 + 0.28 * max(len(rows), 1))
    ax = fig.add_subplot(1, 1, 1)
    seen: set[str] = set()
    for y, block in enumerate(rows):
        colour = _KIND_COLOURS.get(block.kind, "tab:gray")
        label = None if block.kind in seen else block.kind
        seen.add(block.kind)
        if block.turns:
            for start, end in _runs(sorted(block.turns)):
                ax.barh(y, end - start + 1, left=start - 0.5, height=0.7, color=colour, label=label)
                label = None
        else:
            ax.barh(y, max(n * 0.02, 1), left=-0.5, height=0.7, color=colour, hatch="//", label=label)
    for i in marked:
        ax.axvline(i, color="tab:red", lw=0.8, alpha=0.7)
    if marked:
        ax.plot([], [], color="tab:red", lw=0.8, label="evidence")
    ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax.invert_yaxis()
    ax.set_yticks([])
    ax.set_xlabel("past turn")
    ax.set_title(
        _shorten(f"{context.strategy or 'context'}: {context.tokens} tokens — {context.query}", 110),
        fontsize=10,
    )
    ax.legend(loc="upper right", fontsize=7, ncol=4, frameon=False)
    return _save(fig, path)


_KIND_MARKERS = {"memory": "o", "reference": "D", "baseline": "s", "full": "*"}


def plot_tradeoff(
    summaries: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "quality vs tokens sent",
) -> Path:
    """Write a PNG of quality against token ratio, one point per memory.

    Two panels: evidence recall and answer containment (y) against the mean share of the full
    history's tokens sent (x). Memories are circles, reference variants diamonds, baselines
    squares and the full history a star; metrics that are undefined on the data are skipped.

    Args:
        summaries: ``MemoryResult.summary()`` dicts (keys ``memory``, ``kind``,
            ``token_ratio``, ``evidence_recall``, ``answer_containment``).
        path: Where to write the PNG; parent folders are created.
        title: Figure title.

    Returns:
        The path written.

    Raises:
        ComponentError: matplotlib is not installed.
    """
    metrics = [("evidence_recall", "evidence recall"), ("answer_containment", "answer containment")]
    fig, _ = _figure(12.0, 6.0)
    cmap = _colours(len(summaries))
    handles: dict[str, Any] = {}
    for k, (key, label) in enumerate(metrics):
        ax = fig.add_subplot(1, 2, k + 1)
        for j, s in enumerate(summaries):
            x, y = _num(s.get("token_ratio")), _num(s.get(key))
            if x is None or y is None:
                continue
            marker = _KIND_MARKERS.get(str(s.get("kind", "memory")), "o")
            handles[str(s["memory"])] = ax.scatter(
                [x], [y], s=90 if marker == "*" else 55, marker=marker, color=cmap[j], alpha=0.85
            )
            if s.get("kind") != "baseline":  # baselines cluster; the legend names them
                ax.annotate(
                    _shorten(str(s["memory"]), 28),
                    (x, y),
                    fontsize=7,
                    xytext=(4, 3),
                    textcoords="offset points",
                )
        ax.set_xscale("log")
        ax.set_xlabel("token ratio (context / full history, log)")
        ax.set_ylabel(label)
        ax.set_ylim(-0.03, 1.05)
        ax.grid(True, which="both", alpha=0.3)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    rows = (len(handles) + 3) // 4
    return _save(fig, path, rect=(0.0, min(0.35, 0.045 * rows + 0.02), 1.0, 1.0))


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value) and value > 0:
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return 0.0
    return None


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(max(n, 1))]


def plot_scaling(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "overhead vs conversation length",
) -> Path:
    """Write a PNG of per-call overhead against conversation length, one line per memory.

    Two log-log panels: ``add`` and ``select`` time (p50 as a line, p95 as a shaded band).

    Args:
        rows: Dicts with keys ``memory``, ``turns``, ``add_ms_p50``, ``add_ms_p95``,
            ``select_ms_p50`` and ``select_ms_p95`` (``benchmarks/scaling.py`` output).
        path: Where to write the PNG; parent folders are created.
        title: Figure title.

    Returns:
        The path written.

    Raises:
        ComponentError: matplotlib is not installed.
    """
    names = list(dict.fromkeys(str(r["memory"]) for r in rows))
    colours = _colours(len(names))
    fig, _ = _figure(12.0, 4.8)
    for k, op in enumerate(("add", "select")):
        ax = fig.add_subplot(1, 2, k + 1)
        for j, name in enumerate(names):
            mine = sorted((r for r in rows if r["memory"] == name), key=lambda r: r["turns"])
            xs = [float(r["turns"]) for r in mine]
            p50 = [max(float(r[f"{op}_ms_p50"]), 1e-4) for r in mine]
            p95 = [max(float(r[f"{op}_ms_p95"]), 1e-4) for r in mine]
            ax.plot(xs, p50, marker="o", color=colours[j], label=name)
            ax.fill_between(xs, p50, p95, color=colours[j], alpha=0.15)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("turns in the conversation")
        ax.set_ylabel(f"{op} time per call (ms, p50 line, p95 band)")
        ax.grid(True, which="both", alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)
