"""What a decider sees and decides: the views of the forest, the two decisions, the protocol.

A decider places each new user query in the forest of topic trees that
:class:`~ctxmgmt.strategies.discourse_tree.DiscourseTreeStrategy` keeps (Context-Agent 3.3):

* **topic decision** (step 1): continue the active topic tree, switch to another tree, or
  create a new tree;
* **branch decision** (step 3, asked only when the strategy's heuristic filter fires):
  continue the current branch, create a branch at the fork node, or switch to the fork
  node's branch.

The strategy computes every similarity (one embedding per query) and hands the decider the
plain views defined here (:class:`TopicView`, :class:`NodeView`), so a decider never embeds
anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

TopicAction = Literal["continue", "switch", "create"]
BranchAction = Literal["continue", "create_branch", "switch_branch"]


@dataclass(frozen=True)
class TopicView:
    """One topic tree as a decider sees it.

    The cosines compare the query with the user messages of the tree's nodes (the queries
    that placed them), the way one query follows another in a conversation.

    Attributes:
        id: Tree id (0-based, creation order).
        summary: The tree's aggregated summary (its node summaries joined).
        similarity: Cosine of the query with the tree's centroid (mean node vector).
        recent: Cosine of the query with the tree's current (most recently active) node.
        best: Highest cosine of the query with any node of the tree.
        nodes: Number of nodes (turns) in the tree.
        active: True for the active tree.
        window: Cosine of the query with the mean of the tree's last 3 nodes (None: unknown).
        last_query: The user message of the tree's current node ("" when unknown).
        content: Highest cosine of the query with any node's whole turn (replies included;
            None: unknown).
    """

    id: int
    summary: str
    similarity: float
    recent: float
    best: float
    nodes: int
    active: bool
    window: float | None = None
    last_query: str = ""
    content: float | None = None

    @property
    def score(self) -> float:
        """The tree's relevance to the query: its best centroid, recent, node or whole-turn cosine."""
        return max(self.similarity, self.recent, self.best, -1.0 if self.content is None else self.content)


@dataclass(frozen=True)
class NodeView:
    """One node of the active tree as a decider sees it.

    Attributes:
        id: Node id (the turn index).
        branch: Branch id.
        summary: The node summary.
        similarity: Cosine of the query with the node's embedding.
        on_path: True when the node is on the path from the root to the current node.
    """

    id: int
    branch: int
    summary: str
    similarity: float
    on_path: bool


@dataclass(frozen=True)
class _Decision:
    """What both decisions share: a plain-data form."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass(frozen=True)
class TopicDecision(_Decision):
    """Outcome of the topic decision.

    Attributes:
        action: ``"continue"``, ``"switch"`` or ``"create"``.
        tree: Target tree (the active one for continue, the other one for switch; None for create).
        reason: One line saying why.
        source: ``"embedded"``, ``"llm"`` or ``"fallback"`` (the LLM answer was unusable).
    """

    action: TopicAction
    tree: int | None
    reason: str
    source: str = "embedded"


@dataclass(frozen=True)
class BranchDecision(_Decision):
    """Outcome of the branch decision.

    Attributes:
        action: ``"continue"``, ``"create_branch"`` or ``"switch_branch"``.
        node: The fork node the action refers to (None for continue).
        reason: One line saying why.
        source: ``"embedded"``, ``"llm"``, ``"fallback"`` or ``"filter"`` (no decision needed).
    """

    action: BranchAction
    node: int | None
    reason: str
    source: str = "embedded"


@runtime_checkable
class Decider(Protocol):
    """Places a query in the forest: topic decision, then (when asked) branch decision."""

    def decide_topic(self, query: str, topics: Sequence[TopicView]) -> TopicDecision:
        """Continue the active tree, switch to another one, or create a new one.

        ``topics`` is every tree (at least one; exactly one has ``active=True``).
        """
        ...

    def decide_branch(
        self, query: str, path: Sequence[NodeView], fork: NodeView, candidates: Sequence[NodeView]
    ) -> BranchDecision:
        """Continue, create a branch at ``fork``, or switch to ``fork``'s branch.

        ``path`` is the active path (root first, current node last); ``candidates`` are the
        nodes of the active tree most similar to the query (``fork`` first).
        """
        ...
