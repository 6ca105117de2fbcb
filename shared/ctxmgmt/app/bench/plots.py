"""The benchmark's charts: quality against tokens sent, and overhead against conversation length.

- :func:`plot_tradeoff`: quality (evidence recall, answer containment) against the share of
  the history's tokens sent, one point per memory, like the papers' trade-off figures
  (``ctxmgmt bench --plot``).
- :func:`plot_scaling`: ``add``/``select`` time against conversation length, one line per
  memory (``benchmarks/scaling.py``).

matplotlib is optional (``pip install "ctxmgmt[cli]"``) and imported only when drawing; figures
are rendered with the Agg backend directly, so the caller's pyplot backend is untouched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxmgmt.messages.plot import _colours, _figure, _save, _shorten

__all__ = ["plot_scaling", "plot_tradeoff"]


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
