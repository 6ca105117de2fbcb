"""The forest's records: plain-data forms, the check of a restored forest, the renderers' mappings."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.forest_records import (
    Branch,
    Node,
    Placement,
    Plan,
    Section,
    TopicTree,
    as_mappings,
    check_forest,
)


def small() -> tuple[list[Node], list[TopicTree], list[Branch]]:
    nodes = [Node(0, 0, 0, None, "a"), Node(1, 0, 0, 0, "b", query="b?"), Node(2, 0, 1, 0, "c")]
    return nodes, [TopicTree(0, [0, 1, 2], 2)], [Branch(0, 0, None, [0, 1]), Branch(1, 0, 0, [2])]


def test_records_round_trip_through_plain_dicts():
    nodes, trees, branches = small()
    assert nodes[1].to_dict() == {"id": 1, "tree": 0, "branch": 0, "parent": 0, "summary": "b", "query": "b?"}
    assert Node(**nodes[1].to_dict()) == nodes[1]
    tree = TopicTree.from_dict(trees[0].to_dict())
    assert tree == trees[0] and tree.nodes is not trees[0].nodes  # the node list is copied
    assert Branch.from_dict(branches[1].to_dict()) == branches[1]
    placement = Placement(2, "continue", "r", "embedded", "create_branch", "fork", "llm", 0, 0, 1, 0)
    assert Placement(**json.loads(json.dumps(placement.to_dict()))) == placement


def test_a_plan_as_context_details_show_it():
    new = Plan(query="q", topic=TopicDecision("create", None, "new"), scores={0: 0.25})
    assert new.to_dict() == {
        "query": "q",
        "topic": {"action": "create", "tree": None, "reason": "new", "source": "embedded"},
        "scores": {"0": 0.25},
        "tree": None,
        "parent": None,
        "branch": None,
        "fork": None,
        "filter": False,
        "branch_decision": None,
    }
    placed = Plan(
        query="q",
        topic=TopicDecision("continue", 0, "same"),
        tree=0,
        parent=2,
        branch=1,
        fork=2,
        branch_decision=BranchDecision("continue", None, "filter", "filter"),
        fork_similarity=0.5,
    )
    assert (
        placed.to_dict()["fork_similarity"] == 0.5
        and placed.to_dict()["branch_decision"]["source"] == "filter"
    )


def test_a_section_lists_after_for_branches_only():
    topic = Section("topic", 1, None, "x", [3, 4], 0.5)
    branch = Section("branch", 0, 2, "y", [5], 0.25, after=1, members=(5, 6))
    assert topic.details() == {"kind": "topic", "tree": 1, "branch": None, "turns": [3, 4], "similarity": 0.5}
    assert branch.details() == {
        "kind": "branch",
        "tree": 0,
        "branch": 2,
        "after": 1,
        "turns": [5],
        "similarity": 0.25,
    }


def test_check_forest_accepts_a_whole_forest_and_refuses_broken_ones():
    nodes, trees, branches = small()
    check_forest(nodes, trees, branches, 3, 0, 2)
    with pytest.raises(CorruptStateError, match="3 nodes for 4 turns"):
        check_forest(nodes, trees, branches, 4, 0, 2)
    with pytest.raises(CorruptStateError, match="node parent"):
        check_forest([nodes[0], Node(1, 0, 0, 1, "b"), nodes[2]], trees, branches, 3, 0, 2)  # its own parent
    with pytest.raises(CorruptStateError, match="branch tree"):
        check_forest(nodes, trees, [branches[0], Branch(1, 3, 0, [2])], 3, 0, 2)
    with pytest.raises(CorruptStateError, match="active tree"):
        check_forest(nodes, trees, branches, 3, True, 2)  # a bool is not an index
    with pytest.raises(CorruptStateError, match="tree 0 is malformed"):
        check_forest(nodes, [TopicTree(0, [], 0)], branches, 3, 0, 2)


def test_as_mappings_reads_records_without_copying():
    nodes, _, _ = small()
    plain = as_mappings(nodes)
    assert plain[1]["summary"] == "b" and plain[1] is vars(nodes[1])
    given = {"id": 0}
    assert as_mappings([given])[0] is given and as_mappings(None) == []
