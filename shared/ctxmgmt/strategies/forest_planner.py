"""Where a query goes in a discourse forest: Context-Agent 3.3 steps 1-3, as a :class:`Plan`.

1. **Topic decision** against every tree: continue the active tree, switch to another, or
   create a new one (the decider's, over :meth:`~ctxmgmt.strategies.forest.Forest.topic_views`).
2. **Fork point**: the node of the target tree whose turn is most similar to the query.
3. **Heuristic filter**: a branch decision is asked for only when the fork's cosine is
   >= ``theta_fork`` and it is on another branch or an ancestor of the current node; then the
   decider chooses continue / create a branch at the fork / switch to the fork's branch.

:func:`plan_query` reads the forest and changes nothing; the strategy places the turn by the plan.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ctxmgmt.components.decider import BranchDecision, Decider, NodeView, TopicDecision
from ctxmgmt.components.llm_call import meter_calls
from ctxmgmt.components.static_turns import CosineMap
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_records import Plan, TopicTree

__all__ = ["MAX_PATH_VIEWS", "plan_query"]

MAX_PATH_VIEWS = 32
"""Newest nodes of the active path shown to the branch decider (the embedded one reads the last;
the LLM one lists them): the work of one turn does not grow with the length of a topic."""


def plan_query(
    forest: Forest,
    decider: Decider,
    query: str,
    q: np.ndarray,
    *,
    theta_fork: float,
    candidates: int,
    count_calls: Callable[[int], None],
    cosine_map: CosineMap | None = None,
) -> Plan:
    """The plan of ``query`` (its vector ``q``) in ``forest``: steps 1-3.

    ``theta_fork`` and ``candidates`` are ``DiscourseTreeConfig``'s; ``count_calls`` receives
    the LLM calls of each decision as soon as it is made; ``cosine_map`` puts the cosines on
    the scale the decider and ``theta_fork`` were tuned on (None: as they are). A decision
    naming a tree or node that does not exist falls back to creating a topic or continuing the
    branch.
    """
    node_sims = forest.node_similarities(q, cosine_map)
    views = forest.topic_views(q, node_sims, cosine_map)
    with meter_calls() as meter:
        topic = decider.decide_topic(query, views)
    count_calls(meter.calls_of(decider, uses=1 if views else 0))
    if topic.action != "create" and (topic.tree is None or not 0 <= topic.tree < len(forest.trees)):
        topic = TopicDecision("create", None, f"invalid target tree {topic.tree!r}", topic.source)
    scores = {v.id: round(v.score, 4) for v in views}
    if topic.action == "create":
        return Plan(query=query, topic=topic, scores=scores)
    assert topic.tree is not None
    tree = forest.trees[topic.tree]
    content_sims = node_sims[1]
    fork, ids = _fork(forest, tree, content_sims)
    path, on_path = forest.path_of(tree.id, tree.current)
    similarity = float(content_sims[fork])
    fires = similarity >= theta_fork and fork != tree.current  # an ancestor, or on another branch
    parent: int | None = tree.current
    branch: int | None = forest.nodes[tree.current].branch
    if fires:
        ranked = _candidates(ids, content_sims, candidates)
        decision = _decide_branch(
            forest, decider, query, tree, path, on_path, fork, ranked, content_sims, count_calls
        )
        if decision.action == "create_branch" and decision.node is not None:
            parent, branch = decision.node, None
        elif decision.action == "switch_branch" and decision.node is not None:
            target = forest.branches[forest.nodes[decision.node].branch]
            if decision.node in on_path and target.nodes[-1] in on_path:
                decision = BranchDecision("continue", None, "already on that branch", decision.source)
            else:
                parent, branch = target.nodes[-1], target.id
    else:
        where = " on the current node" if fork == tree.current else f" < theta_fork {theta_fork:g}"
        decision = BranchDecision(
            "continue", None, f"filter: fork {fork} cosine {similarity:.2f}{where}", "filter"
        )
    return Plan(
        query=query,
        topic=topic,
        scores=scores,
        tree=topic.tree,
        parent=parent,
        branch=branch,
        fork=fork,
        filter=fires,
        branch_decision=decision,
        fork_similarity=round(similarity, 4),
    )


def _fork(forest: Forest, tree: TopicTree, content_sims: np.ndarray) -> tuple[int, np.ndarray]:
    """(the node of ``tree`` most similar to the query, the newest among ties; ``tree``'s node ids)."""
    ids = forest.tree_parts(tree).ids
    tree_sims = content_sims[ids]  # vectorised: linear in the tree, in C
    return int(ids[len(ids) - 1 - int(np.argmax(tree_sims[::-1]))]), ids


def _candidates(ids: np.ndarray, content_sims: np.ndarray, count: int) -> list[int]:
    """The ``count`` nodes of ``ids`` most similar to the query, most similar first (ties: oldest first)."""
    tree_sims = content_sims[ids]
    k = min(count, len(ids))
    kth = np.partition(tree_sims, len(ids) - k)[len(ids) - k]  # the k-th highest similarity
    above = sorted((int(i) for i in ids[tree_sims > kth]), key=lambda i: (-float(content_sims[i]), i))
    return (above + [int(i) for i in ids[tree_sims == kth]])[:k]


def _decide_branch(
    forest: Forest,
    decider: Decider,
    query: str,
    tree: TopicTree,
    path: list[int],
    on_path: set[int],
    fork: int,
    ranked: list[int],
    content_sims: np.ndarray,
    count_calls: Callable[[int], None],
) -> BranchDecision:
    """The decider's branch decision; one naming a node outside ``tree`` becomes a plain continue."""

    def view(i: int) -> NodeView:
        n = forest.nodes[i]
        return NodeView(i, n.branch, n.summary, float(content_sims[i]), i in on_path)

    shown = path[-MAX_PATH_VIEWS:]  # the newest part of the path: bounded work per turn
    with meter_calls() as meter:
        decision = decider.decide_branch(
            query, [view(i) for i in shown], view(fork), [view(i) for i in ranked]
        )
    count_calls(meter.calls_of(decider))
    node = decision.node
    if node is not None and not (
        isinstance(node, int) and 0 <= node < len(forest.nodes) and forest.nodes[node].tree == tree.id
    ):
        return BranchDecision("continue", None, f"invalid node {node!r}", "fallback")
    return decision
