"""The discourse forest drawn as text and as a self-contained HTML page.

- :func:`forest_text`: the forest as an indented text tree (``DiscourseTreeStrategy.render``,
  part of every discourse-tree context's ``explain()``).
- :func:`forest_html`: a self-contained HTML page, inline CSS, no script, no network
  (``DiscourseTreeStrategy.render_html``).
- :func:`plot_forest`: the PNG, kept importable here; it lives in
  :mod:`ctxmgmt.strategies.forest_plot`.

Each takes plain forest data, so it knows nothing of the strategy: nodes and trees as the
strategy holds them (:class:`~ctxmgmt.strategies.forest_records.Node`,
:class:`~ctxmgmt.strategies.forest_records.TopicTree`) or as mappings with the same keys
(their ``to_dict()`` form, e.g. from ``to_state()``), plus what to highlight.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from ctxmgmt.messages.context import span_label
from ctxmgmt.strategies.forest_plot import FOREST_LABEL_ALL, plot_forest
from ctxmgmt.strategies.forest_records import as_mappings

__all__ = ["FOREST_LABEL_ALL", "forest_html", "forest_text", "plot_forest"]


def _label(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def forest_text(
    nodes: Sequence[Any],
    trees: Sequence[Any],
    *,
    active_tree: int | None,
    active_path: Sequence[int],
) -> str:
    """The forest as a text tree; ``*`` marks the nodes of ``active_path``.

    One header line per topic (``Topic k (active): n turns``), then one line per node,
    ``[turn] (branch) node summary``, children indented under their parent in id order.
    A topic only some of whose nodes are given (each with its parent) is drawn with those,
    and its header says how many are left out.

    Args:
        nodes: Nodes (``id``, ``branch``, ``parent``, ``summary``), in id order.
        trees: Trees (``id``, ``nodes``: node ids, root first).
        active_tree: Id of the tree marked ``(active)``, or None.
        active_path: Node ids to star (root first).

    Returns:
        The text (``"(empty forest)"`` without trees).
    """
    nodes, trees = as_mappings(nodes), as_mappings(trees)
    if not trees:
        return "(empty forest)"
    by_id = {n["id"]: n for n in nodes}
    on_path = set(active_path)
    children: dict[int | None, list[int]] = {}
    for item in nodes:
        children.setdefault(item["parent"], []).append(item["id"])
    lines: list[str] = []
    for tree in trees:
        mark = " (active)" if tree["id"] == active_tree else ""
        ids = tree["nodes"]
        left_out = sum(i not in by_id for i in ids)
        note = f" ({left_out} not drawn)" if left_out else ""
        lines.append(f"Topic {tree['id'] + 1}{mark}: {len(ids)} turns{note}")
        if ids[0] not in by_id:
            continue
        stack: list[tuple[int, str, bool]] = [(ids[0], "", True)]
        while stack:
            node, prefix, last = stack.pop()
            n = by_id[node]
            star = "*" if node in on_path else " "
            elbow = "`-" if last else "|-"
            lines.append(f"  {prefix}{elbow}{star}[{node}] (b{n['branch']}) {_label(n['summary'])}")
            kids = children.get(node, [])
            deeper = prefix + ("  " if last else "| ")
            for k, kid in reversed(list(enumerate(kids))):
                stack.append((kid, deeper, k == len(kids) - 1))
    return "\n".join(lines)


def forest_html(
    nodes: Sequence[Any],
    trees: Sequence[Any],
    *,
    branches: int,
    active_tree: int | None,
    active_path: Sequence[int],
    query: str | None = None,
) -> str:
    """The page: counts, the query (if any), a legend, then one section per topic tree.

    Each turn is a box (turn index, branch id, HTML-escaped node summary); a branch's turns
    stack in one column and a branch forking at a turn is an indented block below it.
    Active-path turns carry the CSS class ``on-path``, the last of them also ``anchor``.

    Args:
        nodes: Nodes with ``id``, ``tree``, ``branch``, ``parent`` and ``summary``.
        trees: Trees with ``id`` and ``nodes`` (node ids, root first).
        branches: Number of branches in the forest (for the counts).
        active_tree: Id of the active tree, or None.
        active_path: Node ids from the root to the highlighted node.
        query: The query whose placement is shown (None: the current state).

    Returns:
        The HTML text.
    """
    nodes, trees = as_mappings(nodes), as_mappings(trees)
    by_id = {n["id"]: n for n in nodes}

    esc = html.escape
    on_path = list(active_path)
    path_set = set(on_path)
    anchor = on_path[-1] if on_path else None
    children: dict[int, list[int]] = {}
    for node in nodes:
        if node["parent"] is not None:
            children.setdefault(node["parent"], []).append(node["id"])

    def colour(branch: int) -> str:
        return f"hsl({branch * 137.508 % 360:.0f} 60% 42%)"

    follows = "current" if query is None else "the query follows"

    def item(i: int) -> str:
        n = by_id[i]
        cls = "node" + (" on-path" if i in path_set else "") + (" anchor" if i == anchor else "")
        tag = f'<span class="next">&#9664; {follows}</span>' if i == anchor else ""
        return (
            f'<li class="{cls}" data-turn="{i}" style="--b:{colour(n["branch"])}"><span class="box">'
            f'<span class="turn">{i}</span><span class="bid">b{n["branch"]}</span>'
            f"{esc(n['summary'])}{tag}</span>"
        )

    sections: list[str] = []
    for tree in trees:
        root = tree["nodes"][0]
        out = [f'<ul class="branch" style="--b:{colour(by_id[root]["branch"])}">']
        stack: list[int | str] = [root]
        while stack:  # iterative: a long branch must not hit the recursion limit
            top = stack.pop()
            if isinstance(top, str):
                out.append(top)
                continue
            out.append(item(top))
            kids = children.get(top, [])
            same = next((k for k in kids if by_id[k]["branch"] == by_id[top]["branch"]), None)
            if same is not None:
                stack.append(same)
            stack.append("</li>")
            for kid in reversed([k for k in kids if k != same]):
                fork = f'<ul class="branch fork" style="--b:{colour(by_id[kid]["branch"])}">'
                stack.extend(["</ul>", kid, fork])
        out.append("</ul>")
        is_active = tree["id"] == active_tree
        n_branches = len({by_id[i]["branch"] for i in tree["nodes"]})
        badge = ' <span class="badge">active topic</span>' if is_active else ""
        sections.append(
            f'<section class="topic{" active-topic" if is_active else ""}" id="topic-{tree["id"] + 1}">'
            f"<h2>Topic {tree['id'] + 1}{badge}</h2>"
            f'<p class="meta">{len(tree["nodes"])} turns ({span_label(tree["nodes"], ", ")}), '
            f"{n_branches} branch{'es' if n_branches != 1 else ''}</p>" + "".join(out) + "</section>"
        )
    where = "-" if active_tree is None else f'<a href="#topic-{active_tree + 1}">{active_tree + 1}</a>'
    counts = (
        f"{len(trees)} topics &middot; {branches} branches &middot; "
        f"{len(by_id)} turns &middot; active topic {where} &middot; active path "
        f"{' &rarr; '.join(map(str, on_path)) or '-'} ({len(on_path)} turns)"
    )
    css = (
        'body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;'
        "color:#1f2328;background:#f6f8fa}h1{font-size:20px;margin:0 0 4px}"
        ".counts,.query{margin:0 0 8px;color:#57606a}a{color:#0969da}"
        ".legend{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:12px;margin:0 0 16px;"
        "padding:8px 12px;background:#fff;border:1px solid #d0d7de;border-radius:6px}"
        ".key{display:inline-block;width:14px;height:12px;margin-right:5px;vertical-align:-2px;"
        "border:1px solid #8c959f;border-radius:3px;background:#f6f8fa}"
        ".key.on{background:#ffebe9;border:2px solid #cf222e}"
        ".key.anchor{background:#ffebe9;border:2px solid #cf222e;outline:2px solid #1f2328}"
        ".key.off{border-left:5px solid hsl(200 60% 42%)}"
        ".key.fork{border:0;border-left:3px solid hsl(200 60% 42%);border-radius:0;background:none}"
        ".key.act{background:#fffbe6;border:2px solid #d4a72c}"
        "section.topic{background:#fff;border:1px solid #d0d7de;border-radius:8px;"
        "padding:10px 14px;margin:0 0 14px}"
        "section.active-topic{background:#fffbe6;border:2px solid #d4a72c}"
        "h2{font-size:15px;margin:0}.meta{margin:2px 0 6px;color:#57606a;font-size:12px}"
        ".badge{font-size:11px;font-weight:600;color:#7d4e00;background:#fff8c5;"
        "border:1px solid #d4a72c;border-radius:10px;padding:1px 8px;margin-left:6px}"
        "ul.branch{list-style:none;margin:2px 0;padding:0 0 0 10px;border-left:3px solid var(--b)}"
        "ul.fork{margin-left:22px}li.node{margin:3px 0}"
        ".box{display:inline-block;max-width:70em;padding:2px 8px;background:#f6f8fa;"
        "border:1px solid #d0d7de;border-left:5px solid var(--b);border-radius:4px}"
        ".turn{font-weight:600;font-variant-numeric:tabular-nums}"
        ".bid{margin:0 8px 0 6px;font-size:11px;color:var(--b)}"
        "li.on-path>.box{background:#ffebe9;border:2px solid #cf222e;border-left-width:5px}"
        "li.anchor>.box{outline:2px solid #1f2328;outline-offset:1px}"
        ".next{margin-left:8px;font-size:11px;font-weight:600;color:#cf222e}"
        "section.topic:not(.active-topic) .box{color:#57606a}"
        ".empty{font-style:italic;color:#57606a}"
    )
    body = [
        "<h1>Discourse forest</h1>",
        f'<p class="counts">{counts}</p>',
        f'<p class="query">Query: {esc(str(query))}</p>' if query else "",
        '<div class="legend"><span><i class="key on"></i>active path</span>'
        '<span><i class="key anchor"></i>the turn the next one follows</span>'
        '<span><i class="key off"></i>other turns (stripe colour = branch)</span>'
        '<span><i class="key fork"></i>indented block: a branch forking at the turn above</span>'
        '<span><i class="key act"></i>active topic</span></div>',
        *(sections or ['<p class="empty">Empty forest: no turns yet.</p>']),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Discourse forest</title><style>{css}</style></head>\n<body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body></html>\n"
    )
