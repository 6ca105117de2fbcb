"""ForestRecall: KadaneDial's scores of every turn, the topics that come back and why."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt import Message, Turn, kadane_dial
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_recall import ForestRecall
from ctxmgmt.strategies.forest_records import Plan

BAKING = ["sourdough starter Bubbles rye flour", "Bubbles doubled overnight", "proof the sourdough dough"]
TAXES = ["file my tax return 52000 dollars", "deduct the home office", "tax deadline April 15"]


def build(texts_by_topic: list[list[str]]) -> tuple[Forest, list[Turn]]:
    """One topic per list, each a chain; vectors from the hashing embedder."""
    embedder = HashingEmbedder()
    forest = Forest(summary_items=8, follow_on_words=0, instruction_words=20)
    turns: list[Turn] = []
    for texts in texts_by_topic:
        for k, text in enumerate(texts):
            i = len(turns)
            turn = Turn(i, (Message("user", text), Message("assistant", "ok")))
            if k == 0:
                plan = Plan(query=text, topic=TopicDecision("create", None, "new"))
            else:
                tree = forest.nodes[i - 1].tree
                plan = Plan(
                    query=text,
                    topic=TopicDecision("continue", tree, "same"),
                    tree=tree,
                    parent=i - 1,
                    branch=forest.nodes[i - 1].branch,
                )
            forest.place(i, plan, embedder.embed([turn.text])[0], embedder.embed([text])[0], text)
            turns.append(turn)
    return forest, turns


def ahead(tree: int, parent: int) -> Plan:
    """A plan that continues ``tree`` after ``parent``."""
    return Plan(query="q", topic=TopicDecision("continue", tree, "same"), tree=tree, parent=parent, branch=0)


def test_no_recall_without_topics():
    forest, _ = build([BAKING, TAXES])
    recall = ForestRecall(topics=0, ratio=0.65, window=3)
    assert recall.recalled(forest, ahead(1, 5), "Bubbles", np.ones(6), [0]) == ({}, [])


def test_the_best_topic_comes_back_within_its_window():
    forest, _ = build([[*BAKING, "feed twice a day", "bake at 250 degrees"], TAXES])
    relevance = np.array([0.1, 0.2, 0.3, 0.9, 0.2, 0.0, 0.4, 0.0])
    recalled, lines = ForestRecall(topics=3, ratio=0.65, window=1).recalled(
        forest, ahead(1, 7), "q", relevance, [3, 6]
    )
    assert recalled == {0: [2, 3, 4]}  # topic 1's score 0.4 is under 0.65 of 0.9
    assert lines == ["recalled topic 1: best turn 3 (relevance 0.90)"]
    both, lines = ForestRecall(topics=3, ratio=0.4, window=1).recalled(
        forest, ahead(1, 7), "q", relevance, [3, 6]
    )
    assert both == {0: [2, 3, 4], 1: [5, 6, 7]} and len(lines) == 2
    one, _ = ForestRecall(topics=1, ratio=0.4, window=1).recalled(forest, ahead(1, 7), "q", relevance, [3, 6])
    assert one == {0: [2, 3, 4]}


def test_returning_to_a_topic_and_pointing_at_the_last_answer_bring_paths_back():
    forest, _ = build([BAKING, TAXES])
    back = Plan(query="q", topic=TopicDecision("switch", 0, "back"), tree=0, parent=2, branch=0)
    recalled, lines = ForestRecall(topics=3, ratio=0.65, window=1).recalled(
        forest, back, "q", np.zeros(6), []
    )
    assert recalled == {0: [0, 1, 2]} and lines == [
        "the query returns to topic 1: its newest path comes back"
    ]
    branching = Plan(
        query="q",
        topic=TopicDecision("continue", 1, "same"),
        tree=1,
        parent=3,
        branch_decision=BranchDecision("create_branch", 3, "fork"),
    )
    assert ForestRecall(topics=3, ratio=0.65, window=1).recalled(forest, branching, "q", np.zeros(6), [])[
        0
    ] == {1: [3, 4, 5]}
    pointer, lines = ForestRecall(topics=3, ratio=0.65, window=1).recalled(
        forest, ahead(0, 2), "what was your last response?", np.zeros(6), []
    )
    assert pointer == {1: [3, 4, 5]} and "pointer at the latest answer ('your last')" in lines[0]


def test_scores_are_kept_for_the_same_query_until_a_turn_is_placed(monkeypatch):
    import ctxmgmt.strategies.forest_recall as module

    passes: list[int] = []

    def counting(signal, **kwargs):
        passes.append(len(signal))
        return kadane_dial(signal, **kwargs)

    monkeypatch.setattr(module, "kadane_dial", counting)
    forest, turns = build([BAKING, TAXES])
    recall = ForestRecall(topics=3, ratio=0.65, window=3)
    q = HashingEmbedder().embed(["Bubbles rye flour"])[0]
    relevance, found = recall.scored(forest, turns, "Bubbles rye flour", q)
    assert relevance.shape == (6,) and relevance[0] == pytest.approx(relevance.max())
    assert 0 in found and not {3, 4, 5} & set(found)
    assert recall.scored(forest, turns, "Bubbles rye flour", q)[1] == found and passes == [6]
    recall.scored(forest, turns, "tax deadline", q)
    assert passes == [6, 6]
