"""What a decider sees and decides (``ctxmgmt.components.decider.decisions``)."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.components.decider.decisions import (
    BranchDecision,
    Decider,
    NodeView,
    TopicDecision,
    TopicView,
)
from ctxmgmt.components.decider.embedded import EmbeddedDecider
from ctxmgmt.components.decider.llm import LLMDecider


def topic(i: int, score: float, *, active: bool = False, summary: str = "") -> TopicView:
    """Topic ``i`` as a decider sees it, every similarity ``score`` (the deciders' tests share it)."""
    return TopicView(i, summary or f"summary of topic {i}", score, score, score, 3, active)


def node(i: int, sim: float, *, branch: int = 0, on_path: bool = True) -> NodeView:
    """Node ``i`` of ``branch`` as a decider sees it, similarity ``sim`` (the deciders' tests share it)."""
    return NodeView(i, branch, f"node {i}", sim, on_path)


def test_decisions_are_plain_data():
    assert TopicDecision("switch", 1, "why").to_dict() == {
        "action": "switch",
        "tree": 1,
        "reason": "why",
        "source": "embedded",
    }


def test_branch_decisions_are_plain_data_too() -> None:
    decision = BranchDecision("create_branch", 4, "an alternative", source="llm")
    assert json.loads(json.dumps(decision.to_dict())) == {
        "action": "create_branch",
        "node": 4,
        "reason": "an alternative",
        "source": "llm",
    }


def test_decisions_and_views_are_frozen() -> None:
    with pytest.raises(AttributeError):
        TopicDecision("create", None, "why").action = "continue"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        NodeView(0, 0, "s", 0.5, True).similarity = 0.9  # type: ignore[misc]


def test_a_topics_score_is_its_best_cosine() -> None:
    view = TopicView(0, "cats", similarity=0.2, recent=0.5, best=0.4, nodes=3, active=True)
    assert view.score == 0.5
    assert TopicView(0, "cats", 0.2, 0.1, 0.3, 3, True, content=0.8).score == 0.8
    assert TopicView(0, "cats", -0.9, -0.9, -0.9, 3, True).score == -0.9  # no content: not -1


def test_both_shipped_deciders_are_deciders_and_a_function_is_not() -> None:
    assert isinstance(EmbeddedDecider(), Decider)
    assert isinstance(LLMDecider(lambda prompt: "{}"), Decider)
    assert not isinstance(lambda prompt: "{}", Decider)
