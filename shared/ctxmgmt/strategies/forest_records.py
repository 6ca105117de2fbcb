"""The plain data of a discourse forest: nodes, topic trees, branches, and one query's plan.

What :class:`~ctxmgmt.strategies.forest.Forest` keeps and
:class:`~ctxmgmt.strategies.discourse_tree.DiscourseTreeStrategy` decides, as frozen or small
dataclasses with ``to_dict``/``from_dict`` (persisted as records, never pickled), plus
:func:`check_forest` (a restored forest is whole) and :func:`as_mappings` (what the renderers read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.state import plain_fields


@dataclass(frozen=True)
class Node:
    """One turn of the forest (Context-Agent 3.2; its content and embedding are kept apart).

    Attributes:
        id: Node id: the turn's index.
        tree: Id of its topic tree.
        branch: Id of its branch.
        parent: Id of the node it follows (None for the root of a tree).
        summary: The node summary.
        query: The user message that placed it (empty in states saved before it was kept).
    """

    id: int
    tree: int
    branch: int
    parent: int | None
    summary: str
    query: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return plain_fields(self)


@dataclass(frozen=True)
class TreeParts:
    """What a topic's view needs that changes only when the topic grows (``size`` nodes)."""

    size: int
    summary: tuple[str, list[int]]
    ids: np.ndarray
    norm: float
    window: np.ndarray
    window_norm: float


@dataclass
class TopicTree:
    """One topic tree of the forest.

    Attributes:
        id: Tree id (0-based, creation order).
        nodes: Its node ids, in the order added (the root first).
        current: Its most recently added node (where the topic resumes).
    """

    id: int
    nodes: list[int]
    current: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return plain_fields(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicTree:
        """Inverse of :meth:`to_dict` (the node list is copied)."""
        return cls(id=data["id"], nodes=list(data["nodes"]), current=data["current"])


@dataclass
class Branch:
    """One branch: a chain of nodes inside a topic tree.

    Attributes:
        id: Branch id (0-based over the whole forest, creation order).
        tree: Id of its topic tree.
        fork: Parent of its first node (None for a tree's root branch).
        nodes: Its node ids, in the order added.
    """

    id: int
    tree: int
    fork: int | None
    nodes: list[int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return plain_fields(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Branch:
        """Inverse of :meth:`to_dict` (the node list is copied)."""
        return cls(id=data["id"], tree=data["tree"], fork=data["fork"], nodes=list(data["nodes"]))


@dataclass(frozen=True)
class Plan:
    """Where a query goes in the forest (steps 1-3), before its turn is added.

    ``select`` computes it without changing the forest; ``add`` places the turn by it.

    Attributes:
        query: The query (the turn's user message).
        topic: The topic decision.
        scores: Every tree's score for the query (``TopicView.score``, 4 decimals), by tree id.
        tree: Target tree (None: the turn starts a new tree).
        parent: The node the turn follows (None: the root of a new tree).
        branch: The branch the turn continues (None: a new branch).
        fork: The target tree's node most similar to the query (None for a new tree).
        filter: True when the heuristic filter fired and the decider chose the branch action.
        branch_decision: The branch decision (None for a new tree).
        fork_similarity: Cosine of the query with the fork node's turn (None for a new tree).
    """

    query: str
    topic: TopicDecision
    scores: dict[int, float] = field(default_factory=dict)
    tree: int | None = None
    parent: int | None = None
    branch: int | None = None
    fork: int | None = None
    filter: bool = False
    branch_decision: BranchDecision | None = None
    fork_similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (as in ``Context.details["plan"]``, plus ``scores`` keyed by str).

        ``fork_similarity`` is present only when the query goes to an existing tree.
        """
        out: dict[str, Any] = {
            "query": self.query,
            "topic": self.topic.to_dict(),
            "scores": {str(k): v for k, v in self.scores.items()},
            "tree": self.tree,
            "parent": self.parent,
            "branch": self.branch,
            "fork": self.fork,
            "filter": self.filter,
            "branch_decision": None if self.branch_decision is None else self.branch_decision.to_dict(),
        }
        if self.fork_similarity is not None:
            out["fork_similarity"] = self.fork_similarity
        return out


@dataclass(frozen=True)
class Placement:
    """How a node was placed: the decisions of its plan and where it went.

    Attributes:
        node: The node (turn index).
        topic: Topic action (``"continue"``, ``"switch"``, ``"create"``).
        topic_reason: Why, in one line.
        topic_source: Who decided (``"embedded"``, ``"llm"``, ``"fallback"``).
        branch: Branch action (``"continue"``, ``"create_branch"``, ``"switch_branch"``; ``"-"``
            for a new tree).
        branch_reason: Why ("" for a new tree).
        branch_source: Who decided (``"filter"`` when no decision was needed; "" for a new tree).
        fork: The plan's fork node (None for a new tree).
        tree: The tree it went to.
        branch_id: The branch it went to.
        parent: The node it follows (None for a root).
    """

    node: int
    topic: str
    topic_reason: str
    topic_source: str
    branch: str
    branch_reason: str
    branch_source: str
    fork: int | None
    tree: int
    branch_id: int
    parent: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return plain_fields(self)


@dataclass(frozen=True)
class Section:
    """One section of the summary block: another topic, or a side branch of the active topic.

    Attributes:
        kind: ``"topic"`` or ``"branch"``.
        tree: The topic tree summarised (for a branch: the active tree).
        branch: The branch summarised (None for a topic).
        text: Its node summaries joined with `` | ``.
        turns: The nodes whose summaries it shows (the first and the newest ones).
        similarity: Highest cosine of the query with those nodes' turns (4 decimals).
        after: For a branch, the node it forks after (None: at the start of the tree).
        members: Every turn of the topic or branch (its key terms are drawn from them; empty:
            ``turns``).
    """

    kind: Literal["topic", "branch"]
    tree: int
    branch: int | None
    text: str
    turns: list[int]
    similarity: float
    after: int | None = None
    members: tuple[int, ...] = ()

    def details(self) -> dict[str, Any]:
        """The section as ``Context.details`` lists it: no text, ``after`` for branches only."""
        out: dict[str, Any] = {"kind": self.kind, "tree": self.tree, "branch": self.branch}
        if self.kind == "branch":
            out["after"] = self.after
        out.update(turns=list(self.turns), similarity=self.similarity)
        return out


def check_forest(
    nodes: list[Node], trees: list[TopicTree], branches: list[Branch], turns: int, active: Any, current: Any
) -> None:
    """A restored forest refers only to nodes, trees and branches that exist, and parents come first.

    Raises:
        CorruptStateError: it does not (a stored record was altered).
    """

    def index(value: Any, limit: int, what: str, *, optional: bool = False) -> None:
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise CorruptStateError(f"saved forest: {what} {value!r:.40} is not an index below {limit}")

    if len(nodes) != turns:
        raise CorruptStateError(f"saved forest has {len(nodes)} nodes for {turns} turns")
    for i, node in enumerate(nodes):
        if node.id != i or not isinstance(node.summary, str) or not isinstance(node.query, str):
            raise CorruptStateError(f"saved forest: node {i} is malformed")
        index(node.tree, len(trees), "node tree")
        index(node.branch, len(branches), "node branch")
        index(node.parent, i, "node parent", optional=True)  # a parent comes first: no cycle
    for i, tree in enumerate(trees):
        if tree.id != i or not isinstance(tree.nodes, list) or not tree.nodes:
            raise CorruptStateError(f"saved forest: tree {i} is malformed")
        for node_id in tree.nodes:
            index(node_id, turns, "tree node")
        index(tree.current, turns, "tree current node")
    for i, branch in enumerate(branches):
        if branch.id != i or not isinstance(branch.nodes, list):
            raise CorruptStateError(f"saved forest: branch {i} is malformed")
        index(branch.tree, len(trees), "branch tree")
        index(branch.fork, turns, "branch fork", optional=True)
        for node_id in branch.nodes:
            index(node_id, turns, "branch node")
    index(active, len(trees), "active tree", optional=True)
    index(current, turns, "current node", optional=True)


def as_mappings(items: Sequence[Any] | None) -> list[Mapping[str, Any]]:
    """Forest records as mappings: a dataclass (``Node``, ``TopicTree``) by its fields, read-only.

    ``vars()`` rather than ``to_dict()``: no copy, so the text rendering in every
    discourse-tree ``select`` stays cheap however long the conversation. Mappings pass as they are.
    """
    return [item if isinstance(item, Mapping) else vars(item) for item in items or ()]
