"""plan_query: topic decision, fork node, heuristic filter, branch decision, fallbacks."""

from __future__ import annotations

import numpy as np

from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_planner import MAX_PATH_VIEWS, plan_query
from ctxmgmt.strategies.forest_records import Plan

DIM = 4


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


class Stub:
    """Answers the topic and branch decisions it is given; records what it was shown."""

    def __init__(self, topic: TopicDecision, branch: BranchDecision | None = None):
        self.topic, self.branch = topic, branch or BranchDecision("continue", None, "stub")
        self.asked: list[tuple] = []

    def decide_topic(self, query, topics):
        self.asked.append(("topic", [t.id for t in topics]))
        return self.topic

    def decide_branch(self, query, path, fork, candidates):
        self.asked.append(("branch", [n.id for n in path], fork.id, [n.id for n in candidates]))
        return self.branch


def chain() -> Forest:
    """One topic: 0 -> 1 -> 2, node 0's turn like unit(0), the others unit(1)."""
    f = Forest(summary_items=8, follow_on_words=0, instruction_words=20)
    f.place(0, Plan(query="q0", topic=TopicDecision("create", None, "new")), unit(0), unit(0), "s0")
    for i in (1, 2):
        plan = Plan(query=f"q{i}", topic=TopicDecision("continue", 0, "same"), tree=0, parent=i - 1, branch=0)
        f.place(i, plan, unit(1), unit(1), f"s{i}")
    return f


def plan(forest, decider, q, theta_fork=0.5, candidates=2):
    calls: list[int] = []
    out = plan_query(
        forest, decider, "query", q, theta_fork=theta_fork, candidates=candidates, count_calls=calls.append
    )
    return out, calls


def test_a_new_topic_has_no_fork_and_scores_every_tree():
    p, calls = plan(chain(), Stub(TopicDecision("create", None, "new")), unit(2))
    assert (p.tree, p.parent, p.branch, p.fork, p.branch_decision) == (None, None, None, None, None)
    assert list(p.scores) == [0] and calls == [0]


def test_an_invalid_target_tree_creates_a_topic():
    p, _ = plan(chain(), Stub(TopicDecision("switch", 5, "bad")), unit(1))
    assert p.topic.action == "create" and p.topic.reason == "invalid target tree 5"


def test_the_filter_keeps_the_branch_when_the_fork_is_the_current_node():
    decider = Stub(TopicDecision("continue", 0, "same"))
    p, calls = plan(chain(), decider, unit(1))
    assert p.fork == 2 and not p.filter and p.fork_similarity == 1.0  # the newest of the tied nodes
    assert (p.parent, p.branch) == (2, 0)
    assert p.branch_decision == BranchDecision(
        "continue", None, "filter: fork 2 cosine 1.00 on the current node", "filter"
    )
    assert [a[0] for a in decider.asked] == ["topic"] and calls == [0]
    low, _ = plan(chain(), Stub(TopicDecision("continue", 0, "same")), unit(0), theta_fork=1.5)
    assert low.branch_decision.reason == "filter: fork 0 cosine 1.00 < theta_fork 1.5"


def test_an_ancestor_fork_asks_the_decider_and_may_open_a_branch():
    decider = Stub(
        TopicDecision("continue", 0, "same"), BranchDecision("create_branch", 0, "back to the start")
    )
    p, calls = plan(chain(), decider, unit(0))
    assert p.filter and p.fork == 0
    assert decider.asked[1] == ("branch", [0, 1, 2], 0, [0, 1])  # candidates: most similar first, ties oldest
    assert (p.parent, p.branch) == (0, None) and calls == [0, 0]


def test_a_node_outside_the_tree_falls_back_to_continue():
    decider = Stub(TopicDecision("continue", 0, "same"), BranchDecision("create_branch", 9, "bad"))
    p, _ = plan(chain(), decider, unit(0))
    assert p.branch_decision == BranchDecision("continue", None, "invalid node 9", "fallback")
    assert (p.parent, p.branch) == (2, 0)


def test_switching_to_the_branch_already_followed_continues():
    decider = Stub(TopicDecision("continue", 0, "same"), BranchDecision("switch_branch", 0, "switch"))
    p, _ = plan(chain(), decider, unit(0))
    assert p.branch_decision.action == "continue" and p.branch_decision.reason == "already on that branch"


def test_the_branch_decider_sees_only_the_newest_path_nodes():
    f = Forest(summary_items=8, follow_on_words=0, instruction_words=20)
    f.place(0, Plan(query="q", topic=TopicDecision("create", None, "new")), unit(0), unit(0), "s")
    for i in range(1, MAX_PATH_VIEWS + 5):
        step = Plan(query="q", topic=TopicDecision("continue", 0, "same"), tree=0, parent=i - 1, branch=0)
        f.place(i, step, unit(1), unit(1), "s")
    decider = Stub(TopicDecision("continue", 0, "same"))
    plan(f, decider, unit(0))
    assert len(decider.asked[1][1]) == MAX_PATH_VIEWS and decider.asked[1][1][-1] == MAX_PATH_VIEWS + 4
