"""Pictures of one context: a KadaneDial selection's signal, and any memory's blocks.

- :func:`plot_relevance`: the relevance signal with the chosen spans shaded (KadaneDial).
- :func:`plot_context`: for any context, which past turns are sent verbatim and which are
  covered by summaries or entity lists, with the gold evidence marked.

The benchmark's charts are in :mod:`ctxmgmt.app.bench.plots`; the discourse forest's picture is
:func:`ctxmgmt.strategies.forest_plot.plot_forest`. Both draw with the helpers here.

matplotlib is optional (``pip install "ctxmgmt[cli]"``) and imported inside the function; the
figure is rendered with the Agg backend directly, so the caller's pyplot backend is untouched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError
from ctxmgmt.messages.spans import runs

__all__ = ["DrawnContext", "plot_context", "plot_relevance"]


class DrawnBlock(Protocol):
    """What the pictures read of a :class:`~ctxmgmt.messages.context.Block`."""

    @property
    def kind(self) -> str:
        """``"turns"``, ``"current"``, ``"summary"``, ``"entities"`` or ``"system"``."""
        ...

    @property
    def turns(self) -> Sequence[int]:
        """History turns the block covers."""
        ...


class DrawnContext(Protocol):
    """What the pictures read of a :class:`~ctxmgmt.messages.context.Context`.

    Named here rather than imported, since :meth:`~ctxmgmt.messages.context.Context.plot` draws with this
    module (one direction of import only).
    """

    @property
    def query(self) -> str:
        """The query the selection was made for."""
        ...

    @property
    def strategy(self) -> str:
        """Name of the strategy that built the context."""
        ...

    @property
    def tokens(self) -> int:
        """Total tokens of the context."""
        ...

    @property
    def details(self) -> Mapping[str, Any]:
        """Strategy-specific data (``z``, ``spans``, ``recent``, ``tau`` for KadaneDial)."""
        ...

    @property
    def blocks(self) -> Sequence[DrawnBlock]:
        """Blocks in the order they are sent."""
        ...

    @property
    def turn_indices(self) -> list[int]:
        """History turns present verbatim, ascending."""
        ...


def plot_relevance(
    context: DrawnContext,
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
    for k, (start, end) in enumerate((r[0], r[-1]) for r in runs(recent)):
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
    context: DrawnContext,
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
            for start, end in ((r[0], r[-1]) for r in runs(sorted(block.turns))):
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


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(max(n, 1))]
