"""Step 4: summary sections and text, the caps, the budget, the reasons and details of a context."""

from __future__ import annotations

import json

import numpy as np

from ctxmgmt import Message, Turn
from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_records import Plan, Section
from ctxmgmt.strategies.forest_selection import (
    HEADER,
    ForestSelection,
    decision_lines,
    first_query_details,
    summary_sections,
    summary_text,
)

USERS = [
    "Plan Rome in May",
    "Hotels in Rome?",
    "Paris instead?",
    "Paris museums?",
    "Alice owes 52000",
    "Pay by 2024?",
]


def plan_to(tree: int | None, parent: int | None, branch: int | None) -> Plan:
    if tree is None:
        return Plan(query="q", topic=TopicDecision("create", None, "new"))
    return Plan(
        query="q",
        topic=TopicDecision("continue", tree, "same"),
        tree=tree,
        parent=parent,
        branch=branch,
        fork=parent,
        branch_decision=BranchDecision("continue", None, "why", "filter"),
    )


def build() -> tuple[Forest, list[Turn]]:
    """Topic 0: 0 -> 1 (branch 0) and 0 -> 2 -> 3 (branch 1); topic 1: 4 -> 5 (branch 2)."""
    f = Forest(summary_items=8, follow_on_words=0, instruction_words=20)
    v = np.ones(2, dtype=np.float32)
    for i, (tree, parent, branch) in enumerate(
        [(None, None, None), (0, 0, 0), (0, 0, None), (0, 2, 1), (None, None, None), (1, 4, 2)]
    ):
        f.place(i, plan_to(tree, parent, branch), v, v, f"s{i}.")
    turns = [Turn(i, (Message("user", u), Message("assistant", "ok"))) for i, u in enumerate(USERS)]
    return f, turns


SIMS = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.5])


def test_sections_are_the_other_topics_then_the_side_branches():
    f, _ = build()
    plan = plan_to(0, 3, 1)
    topic, branch = summary_sections(f, plan, SIMS, {0, 2, 3})
    assert (topic.kind, topic.tree, topic.turns, topic.similarity, topic.members) == (
        "topic",
        1,
        [4, 5],
        0.9,
        (4, 5),
    )
    assert (branch.kind, branch.branch, branch.turns, branch.after) == ("branch", 0, [1], 0)
    assert summary_sections(f, plan, SIMS, {0, 1, 2, 3, 4, 5}) == []  # everything verbatim
    assert [s.tree for s in summary_sections(f, plan_to(None, None, None), SIMS, set())] == [0, 1]


def test_summary_text_lists_sections_with_their_key_terms():
    f, turns = build()
    sections = summary_sections(f, plan_to(0, 3, 1), SIMS, {0, 2, 3})
    cache: dict[int, list[str]] = {}
    text = summary_text(f, sections, turns, cache, 0)
    assert text.splitlines() == [
        HEADER,
        "- Topic 2 (turns 4-5): s4; s5",
        "- Side branch of this topic after turn 0 (turns 1): s1",
    ]
    with_terms = summary_text(f, sections, turns, cache, 4)
    assert "52000" in with_terms.splitlines()[1] and "[names, numbers, dates: " in with_terms
    assert set(cache) >= {4, 5}  # each turn's terms found once


def test_selection_keeps_the_most_similar_sections_in_layout_order():
    f, _ = build()
    selection = ForestSelection.of(f, plan_to(0, 3, 1), ({}, []), SIMS, np.zeros(6), turns=6, recent_turns=0)
    assert selection.path == [0, 2, 3] and selection.verbatim == [0, 2, 3] and len(selection.kept) == 2
    selection.keep_most_similar(1)
    assert [s.kind for s in selection.kept] == ["topic"] and len(selection.sections) == 2
    selection.keep_most_similar(None)
    assert len(selection.kept) == 1


def recalled_topic_two(relevance: np.ndarray) -> ForestSelection:
    f, _ = build()
    recalled = ({1: [4, 5]}, ["recalled topic 2"])
    return ForestSelection.of(f, plan_to(0, 3, 1), recalled, SIMS, relevance, turns=6, recent_turns=0)


def test_the_summaries_give_way_when_several_topics_are_verbatim():
    selection = recalled_topic_two(np.zeros(6))
    assert selection.verbatim == [0, 2, 3, 4, 5] and [s.kind for s in selection.kept] == ["branch"]
    assert selection.in_view == {0, 1} and selection.extra == {4, 5}
    selection.cap(None, 50, 60)
    assert selection.kept and not selection.capped
    selection.cap(0.9, 50, 60)
    assert selection.kept and not selection.capped  # 50 <= 0.9 * 60
    selection.cap(0.3, 50, 60)
    assert not selection.kept and [s.branch for s in selection.capped] == [0]
    assert selection.cut_lines(0.3) == [
        "summaries of 1 topics and branches left out: the verbatim turns span 2 topics and pass 0.3 of "
        "the history's tokens"
    ]


def test_the_budget_drops_sections_then_recalled_turns_then_the_oldest_path_turns():
    selection = recalled_topic_two(np.array([0, 0, 0, 0, 0.8, 0.2]))

    def summary_tokens(sections) -> int:
        return 5 * len(sections)

    def tokens_of(turns) -> int:
        return 10 * len(turns)

    selection.fit(25, summary_tokens, tokens_of)
    assert selection.kept == [] and [s.branch for s in selection.dropped_sections] == [0]
    assert selection.dropped_turns == [5, 4, 0] and selection.verbatim == [2, 3]
    lines = selection.cut_lines(None)
    assert lines == [
        "dropped for the budget: branch 0 (cosine 0.20)",
        "dropped for the budget: turns [0, 4, 5]",
    ]


def test_reasons_drawing_and_details():
    f, _ = build()
    selection = recalled_topic_two(np.zeros(6))
    assert selection.run_reason([0], f, 0) == "active path of topic 1, branch 0"
    assert (
        selection.run_reason([2, 3, 4, 5], f, 0) == "active path of topic 1, branch 2, with recalled turns"
    )  # the run's last turn's branch
    assert selection.run_reason([5], f, 0) == "recalled from topic 2"
    assert selection.run_reason([1], f, 2) == "one of the last 2 turns"
    assert selection.summary_reason() == "0 other topics and 1 side branches, summarised"
    assert selection.drawn() == ([0, 1], {0, 1, 2, 3, 4, 5})
    details = selection.details(f, 3, 0.3)
    assert list(details) == [
        "plan",
        "topic_scores",
        "path",
        "recalled",
        "sections",
        "dropped_sections",
        "capped_sections",
        "dropped_turns",
        "trees",
        "branches",
        "llm_calls",
        "explain",
    ]
    assert details["recalled"] == {"1": [4, 5]} and (details["trees"], details["branches"]) == (2, 3)
    assert "scores" not in details["plan"] and details["sections"] == [
        Section("branch", 0, 0, "s1.", [1], 0.2, 0).details()
    ]
    assert (
        details["explain"][:3] == decision_lines(selection.plan)
        and details["explain"][3] == "recalled topic 2"
    )
    assert details["explain"][4:] == f.text(selection.plan).splitlines()  # every turn is in this context
    json.dumps(details)


def test_decision_lines_and_the_first_query():
    plan = plan_to(0, 3, 1)
    assert decision_lines(plan) == [
        "topic decision (embedded): continue - same",
        "branch decision (filter): continue - why",
        "the query follows node 3 in topic 1",
    ]
    assert (
        decision_lines(plan_to(None, None, None))[-1]
        == "the query starts a new topic: no path, every topic summarised"
    )
    first = first_query_details("hello")
    assert first["plan"]["topic"]["action"] == "create" and first["path"] == [] and first["recalled"] == {}
