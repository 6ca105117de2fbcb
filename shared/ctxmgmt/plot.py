"""Pictures: a KadaneDial selection, any memory's context, and the benchmark's trade-off.

- :func:`plot_relevance`: the relevance signal with the chosen spans shaded (KadaneDial).
- :func:`plot_context`: for any context, which past turns are sent verbatim and which are
  covered by summaries or entity lists, with the gold evidence marked.
- :func:`plot_tradeoff`: quality (evidence recall, answer containment) against the share of
  the history's tokens sent, one point per memory, like the papers' trade-off figures.
- :func:`plot_forest`: a discourse tree's forest of topic trees with the active path
  highlighted (``DiscourseTreeStrategy.plot``).

matplotlib is optional (``pip install "ctxmgmt[cli]"``) and imported inside the function; the
figure is rendered with the Agg backend directly, so the caller's pyplot backend is untouched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxmgmt.context import Context, runs
from ctxmgmt.exceptions import ComponentError, ConfigurationError

__all__ = ["plot_context", "plot_forest", "plot_relevance", "plot_scaling", "plot_tradeoff"]


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


def _forest_layout(
    nodes: Sequence[Mapping[str, Any]], *, width: float | None = None, gap: float = 1.0
) -> dict[int, tuple[float, float]]:
    """Tidy positions ``{id: (x, y)}`` of a forest's nodes; y grows with depth.

    Each tree is laid out on its own: its leaves take consecutive x slots (children in id
    order), a parent sits midway between its first and last child, and y is the depth (root
    0). Trees go side by side in the order of their roots, ``gap`` slots apart; with ``width``,
    a tree that would end past it starts a new row below the deepest tree of the row before.
    Every child is below its parent and no two nodes share a position.

    Args:
        nodes: Dicts with ``id`` and ``parent`` (None, or an id not in ``nodes``, for a root).
        width: Widest row, in x slots; None puts every tree in one row.
        gap: Empty slots between trees and between rows.

    Returns:
        The position of every node.
    """
    ids = sorted(int(n["id"]) for n in nodes)
    known = set(ids)
    parent = {int(n["id"]): None if n.get("parent") is None else int(n["parent"]) for n in nodes}
    children: dict[int, list[int]] = {i: [] for i in ids}
    for i in ids:
        p = parent[i]
        if p is not None and p in known and p != i:
            children[p].append(i)
    roots = [i for i in ids if parent[i] not in known]
    placed: dict[int, tuple[float, float]] = {}
    seen: set[int] = set()
    left = top = row_depth = 0.0
    for root in roots + ids:  # ids after the roots: nodes only reachable through a cycle
        if root in seen:
            continue
        order: list[int] = []
        depth: dict[int, int] = {}
        kids: dict[int, list[int]] = {}
        stack: list[tuple[int, int, int | None]] = [(root, 0, None)]
        while stack:  # pre-order, iterative: a long chain must not hit the recursion limit
            node, d, up = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            order.append(node)
            depth[node] = d
            kids[node] = []
            if up is not None:
                kids[up].append(node)
            stack.extend((kid, d + 1, node) for kid in reversed(children[node]) if kid not in seen)
        x: dict[int, float] = {}
        slot = 0
        for node in order:
            if not kids[node]:
                x[node] = float(slot)
                slot += 1
        for node in reversed(order):  # children before parents
            if kids[node]:
                x[node] = (x[kids[node][0]] + x[kids[node][-1]]) / 2
        deepest = float(max(depth.values()))
        if width is not None and left > 0 and left + slot > width:
            left, top, row_depth = 0.0, top + row_depth + 1 + gap, 0.0
        for node in order:
            placed[node] = (left + x[node], top + depth[node])
        left += slot + gap
        row_depth = max(row_depth, deepest)
    return placed


FOREST_LABEL_ALL = 40
"""Largest forest whose every node gets a summary label in :func:`plot_forest`."""


def plot_forest(
    nodes: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    trees: Sequence[Mapping[str, Any]] | None = None,
    active_tree: int | None = None,
    active_path: Sequence[int] = (),
    title: str | None = None,
) -> Path:
    """Write a PNG of a forest of topic trees with the active path highlighted.

    One tree per topic, laid out by :func:`_forest_layout` (depth down, leaves spread across,
    trees side by side and wrapped into rows when many). Each node is a box with its turn
    index, tinted by branch; edges run parent to child. The active path's nodes and edges are
    red, its last node (the one the next turn follows) outlined in black, and the active
    topic shaded. Up to ``FOREST_LABEL_ALL`` nodes every node shows a shortened summary;
    larger forests show only turn indices and list the active path's summaries in a side
    panel. An empty forest gives a figure saying so (no error).

    Args:
        nodes: Dicts with ``id``, ``parent``, ``branch``, ``summary`` and optionally ``tree``
            (``DiscourseTreeStrategy.nodes``).
        path: Where to write the PNG; parent folders are created.
        trees: Dicts with ``id`` and ``nodes`` (``DiscourseTreeStrategy.trees``); they name
            the topics (default: each node's ``tree``, else its root's position).
        active_tree: Id of the topic to shade.
        active_path: Node ids of the active path, root first.
        title: Figure title (default: the counts).

    Returns:
        The path written.

    Raises:
        ComponentError: matplotlib is not installed.

    Example:
        With ``s`` a DiscourseTreeStrategy (``s.plot("forest.png")`` does the same):

        >>> plot_forest(
        ...     s.nodes, "forest.png", trees=s.trees, active_tree=s.active_tree,
        ...     active_path=s.path(s.current_node),
        ... )  # doctest: +SKIP
        PosixPath('forest.png')
    """
    if not nodes:
        fig, _ = _figure(6.0, 2.0)
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "(empty forest: no turns yet)", ha="center", va="center", fontsize=11)
        ax.set_axis_off()
        if title:
            ax.set_title(_shorten(title, 110), fontsize=10)
        return _save(fig, path)

    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    by_id = {int(n["id"]): n for n in nodes}
    tree_of: dict[int, int] = {}
    for t in trees or ():
        for i in t["nodes"]:
            tree_of[int(i)] = int(t["id"])
    on_path = [int(i) for i in active_path if int(i) in by_id]
    path_set = set(on_path)
    many = len(by_id) > FOREST_LABEL_ALL
    unit_x, unit_y = (0.36, 0.5) if many else (1.25, 1.0)  # inches per x slot and per depth level
    panel = 3.6 if many and on_path else 0.0  # large forests list the path's summaries beside the trees
    pos = _wrapped_layout(nodes, unit_x, unit_y, panel)

    def root_of(i: int) -> int:
        for _ in range(len(by_id)):  # bounded: a cycle in foreign data must not hang
            up = by_id[i].get("parent")
            if up is None or int(up) not in by_id:
                break
            i = int(up)
        return i

    for i, n in by_id.items():
        if i not in tree_of:  # no ``trees``: the node's own ``tree``, else its root (named by position)
            tree_of[i] = int(n["tree"]) if n.get("tree") is not None else -1 - root_of(i)

    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span_x, span_y = max(xs) - min(xs) + 1, max(ys) - min(ys) + 1
    tree_width = min(30.0, max(7.0, span_x * unit_x + 1.5))
    fig, _ = _figure(tree_width + panel, min(36.0, max(3.0, span_y * unit_y + 1.8)))
    if panel:
        grid = fig.add_gridspec(1, 2, width_ratios=[tree_width, panel])
        ax = fig.add_subplot(grid[0, 0])
        side = fig.add_subplot(grid[0, 1])
        side.set_axis_off()
        lines = [f"{i:>4}  {_shorten(_gist(str(by_id[i].get('summary', ''))), 46)}" for i in on_path]
        if len(lines) > 60:
            lines = [*lines[:5], f"      ... {len(lines) - 59} more", *lines[-54:]]
        side.text(0.0, 1.0, "Active path, root first:", va="top", fontsize=8, fontweight="bold")
        side.text(0.0, 0.975, "\n".join(lines), va="top", fontsize=7, family="monospace", color="#8b0000")
    else:
        ax = fig.add_subplot(1, 1, 1)
    font = 6.5 if many else 8.0

    members: dict[int, list[int]] = {}
    for i in pos:
        members.setdefault(tree_of[i], []).append(i)
    for k, (tid, ids) in enumerate(sorted(members.items(), key=lambda kv: min(kv[1]))):
        tx = [pos[i][0] for i in ids]
        ty = [pos[i][1] for i in ids]
        if tid == active_tree:
            ax.add_patch(
                Rectangle(
                    (min(tx) - 0.45, min(ty) - 0.85),
                    max(tx) - min(tx) + 0.9,
                    max(ty) - min(ty) + 1.3,
                    facecolor="#fff3c4",
                    edgecolor="#e0b000",
                    lw=1.0,
                    zorder=0,
                )
            )
        root = min(ids, key=lambda i: (pos[i][1], i))
        name = f"T{tid + 1 if tid >= 0 else k + 1}"
        ax.text(
            pos[root][0],
            pos[root][1] - 0.55,
            name if many else f"Topic {name[1:]} ({len(ids)} turns)",
            ha="center",
            va="bottom",
            fontsize=font,
            fontweight="bold" if tid == active_tree else "normal",
            color="#7a5c00" if tid == active_tree else "#444444",
            zorder=4,
        )

    plain: list[list[tuple[float, float]]] = []
    strong: list[list[tuple[float, float]]] = []
    for i, n in by_id.items():
        up = n.get("parent")
        if up is None or int(up) not in pos or i not in pos:
            continue
        segment = [pos[int(up)], pos[i]]
        (strong if i in path_set and int(up) in path_set else plain).append(segment)
    ax.add_collection(LineCollection(plain, colors="#9a9a9a", linewidths=0.8, zorder=1))
    ax.add_collection(LineCollection(strong, colors="#d62728", linewidths=2.6, zorder=2))

    branch_ids = sorted({int(n.get("branch") or 0) for n in by_id.values()})
    palette = _colours(20)
    tint = {b: palette[(2 * k + 1) % 20] for k, b in enumerate(branch_ids)}  # tab20's light shades
    anchor = on_path[-1] if on_path else None
    for i, (x, y) in pos.items():
        n = by_id[i]
        hot = i in path_set
        ax.text(
            x,
            y,
            str(i),
            ha="center",
            va="center",
            fontsize=font,
            color="white" if hot else "#222222",
            fontweight="bold" if hot else "normal",
            zorder=6 if hot else 3,
            bbox={
                "boxstyle": "round,pad=0.25",
                "facecolor": "#d62728" if hot else tint[int(n.get("branch") or 0)],
                "edgecolor": "black" if i == anchor else ("#8b0000" if hot else "#8a8a8a"),
                "linewidth": 1.8 if i == anchor else 0.7,
            },
        )
        if not many:
            ax.annotate(
                _wrap(_shorten(_gist(str(n.get("summary", ""))), 40), 20),
                (x, y),
                xytext=(0, -9),
                textcoords="offset points",
                ha="center",
                va="top",
                fontsize=font - 1,
                color="#8b0000" if hot else "#333333",
                zorder=4,
                bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            )

    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(max(ys) + (0.6 if many else 1.0), min(ys) - 1.0)
    ax.set_axis_off()
    handles = [
        Patch(facecolor="#d62728", edgecolor="#8b0000", label="active path"),
        Patch(facecolor="#d62728", edgecolor="black", lw=1.8, label="node the next turn follows"),
        Patch(facecolor=palette[1], edgecolor="#8a8a8a", label="other turns (tint = branch)"),
        Patch(facecolor="#fff3c4", edgecolor="#e0b000", label="active topic"),
        Line2D([], [], color="#9a9a9a", lw=0.8, label="parent -> child"),
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=5 if tree_width >= 10 else 3,
        fontsize=7,
        frameon=False,
    )
    n_trees = len(members)
    n_branches = len(branch_ids)
    head = title or (
        f"Discourse forest: {n_trees} topics, {n_branches} branches, {len(by_id)} turns; active topic "
        f"{'-' if active_tree is None else active_tree + 1}, path {' > '.join(map(str, on_path)) or '-'}"
    )
    ax.set_title(_shorten(head, 160), fontsize=10)
    return _save(fig, path)


def _wrapped_layout(
    nodes: Sequence[Mapping[str, Any]], unit_x: float, unit_y: float, panel: float
) -> dict[int, tuple[float, float]]:
    """The :func:`_forest_layout` whose rows of trees give a figure closest to 2:1 and under 30 in wide."""
    one_row = _forest_layout(nodes)
    total = max(x for x, _ in one_row.values()) + 1
    best: tuple[float, dict[int, tuple[float, float]]] | None = None
    for share in (1.0, 0.75, 0.6, 0.5, 0.4, 0.33, 0.25, 0.2, 0.15):
        pos = one_row if share == 1.0 else _forest_layout(nodes, width=total * share)
        wide = (max(x for x, _ in pos.values()) + 1) * unit_x + panel + 1.5
        tall = (max(y for _, y in pos.values()) + 1) * unit_y + 1.8
        score = abs(math.log(wide / tall / 2.0)) + (10.0 if wide > 30.0 + panel else 0.0)
        if best is None or score < best[0]:
            best = (score, pos)
    assert best is not None
    return best[1]


def _gist(summary: str) -> str:
    """A node summary without its leading ``[timestamp]`` and ``user:`` (they crowd short labels)."""
    summary = " ".join(summary.split())
    if summary.startswith("[") and "]" in summary:
        summary = summary[summary.index("]") + 1 :].lstrip()
    return summary[len("user: ") :] if summary.startswith("user: ") else summary


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, max_lines=2, placeholder="…")) or text
