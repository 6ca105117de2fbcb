"""The :class:`Forest` of a discourse tree: its nodes, topic trees and branches, and where it stands.

:class:`~ctxmgmt.strategies.discourse_tree.DiscourseTreeStrategy` decides where each turn goes
(:mod:`ctxmgmt.strategies.forest_planner`); the forest places it, links short follow-on topics
to the topic before them, walks paths, answers the cosines the decisions read, draws itself
(:mod:`ctxmgmt.strategies.forest_render`, :mod:`ctxmgmt.strategies.forest_plot`) and saves and
restores its state. The plain records it holds live in :mod:`ctxmgmt.strategies.forest_records`
and stay importable from here.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctxmgmt.components.decider import TopicView
from ctxmgmt.components.embedder import dot_rows
from ctxmgmt.components.static_turns import CosineMap, map_cosines
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.rows import RowStack
from ctxmgmt.strategies.forest_records import (
    Branch,
    Node,
    Placement,
    Plan,
    Section,
    TopicTree,
    TreeParts,
    check_forest,
)
from ctxmgmt.strategies.forest_render import forest_html, forest_text, plot_forest

__all__ = [
    "Branch",
    "Forest",
    "Node",
    "Placement",
    "Plan",
    "Section",
    "TopicTree",
    "TreeParts",
    "check_forest",
]

WINDOW_NODES = 3
"""Nodes in a tree's recent window, whose mean cosine the shift model reads (TopicView.window)."""
LINKED_TREES = 7
"""Most topic trees, a recalled one included, that come back together through follow-on links."""


class Forest:
    """The topic trees of one conversation (Context-Agent 3.2); node ``i`` is turn ``i``.

    Every node keeps two embeddings: of its whole turn (``vectors``) and of its user message
    (``query_vectors``, what the topic decisions read). The lists are the forest's own:
    callers read them and change the forest only through :meth:`place` and :meth:`load`.

    Args:
        summary_items: Most node summaries joined into a topic or branch summary (the first
            node and the newest ones; ``DiscourseTreeConfig.summary_items``, default 8).
        follow_on_words: Longest opening (words) of a topic that carries on the topic before
            it (``DiscourseTreeConfig.follow_on_words``, default 12; 0: never).
        instruction_words: Shortest opening (words) of a topic a short opening may carry on
            (``DiscourseTreeConfig.instruction_words``, default 20).

    Attributes:
        nodes: Every node, in turn order.
        trees: Every topic tree, in creation order.
        branches: Every branch, in creation order.
        placements: Per node, the decisions that placed it.
        active: Id of the active tree (None before the first turn).
        current: Id of the current node, the newest turn's (None before the first turn).
    """

    def __init__(self, *, summary_items: int, follow_on_words: int, instruction_words: int) -> None:
        self.summary_items = summary_items
        self.follow_on_words = follow_on_words
        self.instruction_words = instruction_words
        self.nodes: list[Node] = []
        self.vectors: list[np.ndarray] = []
        self.query_vectors: list[np.ndarray] = []
        self.trees: list[TopicTree] = []
        self.branches: list[Branch] = []
        self.placements: list[Placement] = []
        self.active: int | None = None
        self.current: int | None = None
        self._tree_sums: list[np.ndarray] = []  # per tree, the sum of its nodes' query vectors
        self._parts: dict[int, TreeParts] = {}  # tree id -> its view parts (:meth:`tree_parts`)
        self._paths: dict[int, tuple[list[int], set[int]]] = {}  # tree id -> :meth:`path_of`
        self._last_similarities: (
            tuple[np.ndarray, tuple[int, CosineMap | None], tuple[np.ndarray, np.ndarray]] | None
        ) = None
        self._query_rows = RowStack()  # query_vectors stacked (node order)
        self._content_rows = RowStack()  # vectors stacked (node order)
        self._links: dict[int, list[int]] = {}  # tree -> trees joined to it by a follow-on opening
        self._instructed: set[int] = set()  # trees opened by an instruction, or carrying one on

    # -- paths ----------------------------------------------------------------------------------
    def path(self, node: int | None) -> list[int]:
        """Node ids from the root of ``node``'s tree down to ``node`` (empty for None)."""
        out: list[int] = []
        while node is not None:
            out.append(node)
            node = self.nodes[node].parent
        return out[::-1]

    def path_of(self, tree: int, node: int) -> tuple[list[int], set[int]]:
        """:meth:`path` of ``node`` and its set, kept per tree and extended as the path grows.

        A topic that continues adds one node below its current one, so its path grows by one
        node instead of being walked from the root on every turn. The list and set are shared:
        callers only read them.
        """
        cached = self._paths.get(tree)
        if cached is not None and cached[0] and cached[0][-1] == node:
            return cached
        parent = self.nodes[node].parent
        if cached is not None and cached[0] and parent == cached[0][-1]:
            cached[0].append(node)
            cached[1].add(node)
            return cached
        path = self.path(node)
        self._paths[tree] = (path, set(path))
        return self._paths[tree]

    # -- what the decisions read ----------------------------------------------------------------
    def summary_of(self, nodes: Sequence[int]) -> tuple[str, list[int]]:
        """(summary text, the node ids it joins) of ``nodes``: the first and the newest summaries."""
        ids = list(nodes)
        if len(ids) > self.summary_items:
            ids = [ids[0], *ids[len(ids) - self.summary_items + 1 :]]
        return " | ".join(self.nodes[i].summary for i in ids), ids

    def tree_parts(self, tree: TopicTree) -> TreeParts:
        """The parts of a topic's view that change only when the topic grows, kept per topic."""
        parts = self._parts.get(tree.id)
        if parts is None or parts.size != len(tree.nodes):
            window = np.sum([self.query_vectors[i] for i in tree.nodes[-WINDOW_NODES:]], axis=0)
            parts = self._parts[tree.id] = TreeParts(
                size=len(tree.nodes),
                summary=self.summary_of(tree.nodes),
                ids=np.asarray(tree.nodes, dtype=np.intp),
                norm=float(np.linalg.norm(self._tree_sums[tree.id])),
                window=window,
                window_norm=float(np.linalg.norm(window)),
            )
        return parts

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(user-message vectors, whole-turn vectors) of every node, stacked as nodes are placed or loaded."""
        return self._query_rows.matrix(), self._content_rows.matrix()

    def node_similarities(
        self, q: np.ndarray, cosine_map: CosineMap | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of ``q`` with every node's user message and with its whole turn (node order).

        Through ``cosine_map`` when given (a fast twin's static vectors read on MiniLM's scale).
        """
        if not self.nodes:
            return np.zeros(0), np.zeros(0)
        last = self._last_similarities  # plan and select ask for the same query's in a row
        if last is not None and last[0] is q and last[1] == (len(self.nodes), cosine_map):
            return last[2]
        queries, contents = self.matrices()
        sims = map_cosines(dot_rows(queries, q), cosine_map), map_cosines(dot_rows(contents, q), cosine_map)
        self._last_similarities = (q, (len(self.nodes), cosine_map), sims)
        return sims

    def topic_views(
        self,
        q: np.ndarray,
        sims: tuple[np.ndarray, np.ndarray] | None = None,
        cosine_map: CosineMap | None = None,
    ) -> list[TopicView]:
        """Every tree as the topic decision sees it for the query vector ``q``.

        ``sims``: :meth:`node_similarities` of ``q`` and ``cosine_map``, when already computed.
        """
        query_sims, content_sims = self.node_similarities(q, cosine_map) if sims is None else sims
        scale, shift = (1.0, 0.0) if cosine_map is None else cosine_map
        views = []
        for tree in self.trees:
            parts = self.tree_parts(tree)
            norm, window_norm = parts.norm, parts.window_norm
            views.append(
                TopicView(
                    id=tree.id,
                    summary=parts.summary[0],
                    similarity=float(self._tree_sums[tree.id] @ q / norm) * scale + shift if norm else 0.0,
                    recent=float(query_sims[tree.current]),
                    best=float(query_sims[parts.ids].max()),
                    nodes=parts.size,
                    active=tree.id == self.active,
                    window=float(parts.window @ q / window_norm) * scale + shift if window_norm else 0.0,
                    last_query=self.nodes[tree.current].query,
                    content=float(content_sims[parts.ids].max()),
                )
            )
        return views

    # -- growing ----------------------------------------------------------------------------------
    def place(
        self, node: int, plan: Plan, vector: np.ndarray, query_vector: np.ndarray, summary: str
    ) -> None:
        """Add turn ``node`` where ``plan`` puts it, with its turn and user-message vectors and summary."""
        tree_id, parent, branch_id = plan.tree, plan.parent, plan.branch
        if tree_id is None:
            tree_id = len(self.trees)
            self.trees.append(TopicTree(id=tree_id, nodes=[], current=node))
            self._tree_sums.append(np.zeros_like(vector, dtype=np.float64))
            parent = None
            self._link(tree_id, plan.query, -1 if self.current is None else self.nodes[self.current].tree)
        if branch_id is None:
            branch_id = len(self.branches)
            self.branches.append(Branch(id=branch_id, tree=tree_id, fork=parent, nodes=[]))
        self.nodes.append(
            Node(id=node, tree=tree_id, branch=branch_id, parent=parent, summary=summary, query=plan.query)
        )
        self.vectors.append(np.asarray(vector, dtype=np.float32))
        self.query_vectors.append(np.asarray(query_vector, dtype=np.float32))
        self._query_rows.extend(self.query_vectors[-1:])
        self._content_rows.extend(self.vectors[-1:])
        tree = self.trees[tree_id]
        tree.nodes.append(node)
        tree.current = node
        self._tree_sums[tree_id] = self._tree_sums[tree_id] + query_vector
        self.branches[branch_id].nodes.append(node)
        self.active, self.current = tree_id, node
        branch = plan.branch_decision
        self.placements.append(
            Placement(
                node=node,
                topic=plan.topic.action,
                topic_reason=plan.topic.reason,
                topic_source=plan.topic.source,
                branch="-" if branch is None else branch.action,
                branch_reason="" if branch is None else branch.reason,
                branch_source="" if branch is None else branch.source,
                fork=plan.fork,
                tree=tree_id,
                branch_id=branch_id,
                parent=parent,
            )
        )

    def _link(self, tree: int, opening: str, before: int) -> None:
        """Join ``tree`` to ``before`` (the tree of the turn before its first) when it carries it on.

        It does when ``opening`` is short (at most ``follow_on_words`` words) and ``before`` was
        opened by an instruction (at least ``instruction_words`` words) or carries one on.
        """
        words = len(opening.split())
        if words <= self.follow_on_words and before in self._instructed:
            self._links.setdefault(tree, []).append(before)
            self._links.setdefault(before, []).append(tree)
            self._instructed.add(tree)
        elif words >= self.instruction_words:
            self._instructed.add(tree)

    def linked_trees(self, tree: int) -> list[int]:
        """``tree`` and the trees joined to it by follow-on openings, nearest first (at most LINKED_TREES)."""
        out, frontier = [tree], [tree]
        while frontier and len(out) < LINKED_TREES:
            frontier = [u for t in frontier for u in self._links.get(t, ()) if u not in out]
            frontier = list(dict.fromkeys(frontier))[: LINKED_TREES - len(out)]
            out.extend(frontier)
        return out

    # -- drawing --------------------------------------------------------------------------------
    def highlight(self, plan: Plan | Mapping[str, Any] | None) -> tuple[int | None, list[int]]:
        """(active tree, active path) of ``plan`` (a :class:`Plan` or its dict), else of the current node."""
        if plan is None:
            active, anchor = self.active, self.current
        elif isinstance(plan, Plan):
            active, anchor = plan.tree, plan.parent
        else:
            active, anchor = plan["tree"], plan["parent"]
        return active, (self.path(anchor) if active is not None else [])

    def text(
        self,
        plan: Plan | Mapping[str, Any] | None = None,
        *,
        trees: Sequence[int] | None = None,
        turns: Collection[int] | None = None,
    ) -> str:
        """The forest as a text tree, one ``[turn] (branch) node summary`` line per node.

        ``*`` marks the active path of ``plan`` (a :class:`Plan` or its dict), else the current
        one. ``trees``, tree ids, draws only those topics, and ``turns`` only those turns of
        them, with the active path and every turn above them (``select``'s explanation: the
        topics and turns in the context, so its cost does not grow with the forest or with a
        topic). Drawn by :func:`~ctxmgmt.strategies.forest_render.forest_text`.
        """
        active, path = self.highlight(plan)
        drawn = self.trees if trees is None else [self.trees[t] for t in trees]
        ids: Iterable[int]
        if turns is None:
            ids = range(len(self.nodes)) if trees is None else (i for t in drawn for i in t.nodes)
        else:
            kept, ids = {t.id for t in drawn}, set()
            for turn in {*turns, *path}:  # each turn with the turns above it, each walked once
                node: int | None = turn
                while node is not None and node not in ids and self.nodes[node].tree in kept:
                    ids.add(node)
                    node = self.nodes[node].parent
        nodes = [self.nodes[i] for i in sorted(ids)]
        return forest_text(nodes, drawn, active_tree=active, active_path=path)

    def html(
        self, plan: Plan | Mapping[str, Any] | None = None, path: str | os.PathLike[str] | None = None
    ) -> str:
        """The forest as a self-contained HTML page (inline CSS, no script, no network).

        Highlighted as :meth:`text` is: a header with the counts, a legend, then one section
        per topic with a box per turn (turn index, branch, node summary). A branch's turns stack
        in one column; a branch forking at a turn is an indented block below it. Active-path
        turns carry the CSS class ``on-path``
        (:func:`~ctxmgmt.strategies.forest_render.forest_html`).

        Args:
            plan: A :class:`Plan` or its dict (``context.details["plan"]``) whose path to highlight.
            path: Where to write the page (str or path-like; parent folders are created);
                None returns the HTML text.

        Returns:
            The path written, or the HTML text when ``path`` is None.
        """
        active, on_path = self.highlight(plan)
        query = plan.query if isinstance(plan, Plan) else None if plan is None else plan.get("query")
        page = forest_html(
            self.nodes,
            self.trees,
            branches=len(self.branches),
            active_tree=active,
            active_path=on_path,
            query=query,
        )
        if path is None:
            return page
        out_path = Path(path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(page, encoding="utf-8")
        return str(out_path)

    def plot(self, path: str | os.PathLike[str], plan: Plan | Mapping[str, Any] | None = None) -> Path:
        """Write the forest as a PNG (:func:`.forest_plot.plot_forest`); return the path."""
        active, on_path = self.highlight(plan)
        return plot_forest(self.nodes, path, trees=self.trees, active_tree=active, active_path=on_path)

    def explain(self, llm_calls: int) -> str:
        """The forest with the current path marked, and how each node was placed.

        ``llm_calls`` is the strategy's count, shown in the first line.
        """
        head = (
            f"Discourse forest: {len(self.trees)} topics, {len(self.branches)} branches, "
            f"{len(self.nodes)} turns; active topic "
            f"{'-' if self.active is None else self.active + 1}, current node {self.current}; "
            f"{llm_calls} LLM calls"
        )
        lines = [head, self.text()]
        for d in self.placements:
            lines.append(
                f"turn {d.node}: topic {d.topic} ({d.topic_source}), branch {d.branch}"
                f" -> topic {d.tree + 1}, branch {d.branch_id}, parent {d.parent}"
            )
        return "\n".join(lines)

    # -- state ----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The forest with its embeddings (records and arrays; :meth:`load` reads it back)."""
        return {
            "embeddings": list(self.vectors),
            "query_embeddings": list(self.query_vectors),
            "nodes": list(self.nodes),  # frozen: persisted by identity, see ctxmgmt.store.records
            "trees": [t.to_dict() for t in self.trees],
            "branches": [b.to_dict() for b in self.branches],
            "decisions": list(self.placements),
            "active": self.active,
            "current": self.current,
        }

    def load(
        self,
        state: Mapping[str, Any],
        vectors: list[np.ndarray],
        query_vectors: list[np.ndarray],
        turns: Sequence[Turn],
    ) -> None:
        """Restore an empty forest from :meth:`state` output, its vectors already checked.

        ``turns`` are the conversation's (a node saved without its query links by its turn's).

        Raises:
            CorruptStateError: the saved forest refers to nodes, trees or branches that do not exist.
        """
        nodes = [Node(**n) for n in state["nodes"]]
        trees = [TopicTree.from_dict(t) for t in state["trees"]]
        branches = [Branch.from_dict(b) for b in state["branches"]]
        check_forest(nodes, trees, branches, len(turns), state["active"], state["current"])
        self.vectors = vectors
        self.nodes, self.trees, self.branches = nodes, trees, branches
        self.placements = [Placement(**d) for d in state["decisions"]]
        self.query_vectors = query_vectors
        self._query_rows.extend(self.query_vectors)
        self._content_rows.extend(self.vectors)
        self._tree_sums = [
            np.asarray(np.sum([self.query_vectors[i] for i in t.nodes], axis=0, dtype=np.float64))
            for t in self.trees
        ]
        self.active = state["active"]
        self.current = state["current"]
        for tree in self.trees:
            root = tree.nodes[0]
            before = -1 if root == 0 else self.nodes[root - 1].tree
            self._link(tree.id, self.nodes[root].query or turns[root].query, before)
