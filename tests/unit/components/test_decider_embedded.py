"""The embedded decider: similarity thresholds, cue phrases and the topic-shift model
(``ctxmgmt.components.decider.embedded``).
"""

from __future__ import annotations

import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components.decider import (
    EmbeddedDecider,
    TopicView,
    has_cue,
)
from tests.unit.components.test_decider_decisions import node, topic


# -- embedded topic decision ---------------------------------------------------------------
def test_first_query_creates_a_topic():
    d = EmbeddedDecider().decide_topic("hello there", [])
    assert (d.action, d.tree, d.source) == ("create", None, "embedded")


def test_similar_active_topic_continues():
    d = EmbeddedDecider().decide_topic("more about the sourdough loaf", [topic(0, 0.5, active=True)])
    assert (d.action, d.tree) == ("continue", 0)


def test_clearly_more_similar_other_topic_switches():
    d = EmbeddedDecider().decide_topic(
        "tell me about the oven temperature", [topic(0, 0.35, active=True), topic(1, 0.7)]
    )
    assert (d.action, d.tree) == ("switch", 1)


def test_return_cue_switches_with_a_lower_score():
    topics = [topic(0, 0.2, active=True), topic(1, 0.32)]
    assert EmbeddedDecider().decide_topic("back to the garden question", topics).action == "switch"
    assert (
        EmbeddedDecider()
        .decide_topic("Which fertiliser should I use for my garden plants this spring?", topics)
        .action
        == "create"
    )


def test_new_topic_cue_creates():
    d = EmbeddedDecider().decide_topic("By the way, what is a good novel?", [topic(0, 0.32, active=True)])
    assert d.action == "create" and "by the way" in d.reason


def test_short_follow_up_continues_despite_low_similarity():
    decider = EmbeddedDecider()
    assert decider.decide_topic("Why?", [topic(0, 0.05, active=True)]).action == "continue"
    long_pointer = "Please shorten your previous response to three bullet points for a slide"
    assert decider.decide_topic(long_pointer, [topic(0, 0.05, active=True)]).action == "continue"


def test_references_to_an_answer_or_a_list_item_are_follow_ups_but_chit_chat_your_is_not():
    decider = EmbeddedDecider()
    active = [topic(0, 0.05, active=True)]
    for query in (
        "When is the 2nd film released by the studio?",  # an item of the previous list
        "Assume you are the opponent of the first example. How would you counter it?",
        "What are the key disadvantages or flaws of your solution?",
        "What language did I ask you to translate into last time?",
    ):
        assert decider.is_follow_up(query), query
        assert decider.decide_topic(query, active).action == "continue", query
    # "your" alone asks about the other person in chit-chat (TIAGE): not a follow-up
    assert decider.is_follow_up("that is nice . what is your favorite movie to watch ?") is None
    assert decider.is_follow_up("i loved it the first time i went to the beach with my dad") is None


def test_follow_up_openings_are_whole_words():
    decider = EmbeddedDecider()
    assert decider.is_follow_up("No, the deadline is in May this year") == "no"
    assert decider.is_follow_up("Okay great then tell me about the deadline") is None  # not "ok"
    assert decider.is_follow_up("Now summarise the causes of the French revolution") is None  # not "no"
    assert decider.is_follow_up("sometimes you just wanna eat pepperoni pizza all day long") is None


def test_unrelated_query_creates():
    topics = [topic(0, 0.1, active=True), topic(1, 0.2)]
    d = EmbeddedDecider().decide_topic("How do volcanoes form under the ocean floor?", topics)
    assert d.action == "create"


def test_cues_match_whole_words_only():
    assert has_cue("Let's go back to Rome", ("back to",)) == "back to"
    assert has_cue("setback tomorrow", ("back to",)) is None
    assert has_cue("Use butter instead.", ("instead",)) == "instead"


@pytest.mark.parametrize(
    "bad",
    [{"theta_topic": 2.0}, {"theta_switch": float("nan")}, {"switch_margin": -0.1}, {"branch_margin": "x"}],
)
def test_bad_thresholds(bad):
    with pytest.raises(ConfigurationError):
        EmbeddedDecider(**bad)


# -- embedded branch decision ---------------------------------------------------------------
def test_fork_on_other_branch_with_a_lead_switches_branch():
    path = [node(0, 0.3), node(1, 0.2)]
    fork = node(2, 0.6, branch=1, on_path=False)
    d = EmbeddedDecider().decide_branch("hotels near the Colosseum", path, fork, [fork])
    assert (d.action, d.node) == ("switch_branch", 2)


def test_ancestor_fork_with_alternative_cue_creates_branch():
    path = [node(0, 0.45), node(1, 0.4)]
    d = EmbeddedDecider().decide_branch("Instead, what about Paris?", path, path[0], [path[0]])
    assert (d.action, d.node) == ("create_branch", 0)


def test_ancestor_fork_without_cue_or_lead_continues():
    path = [node(0, 0.45), node(1, 0.4)]
    d = EmbeddedDecider().decide_branch("and the budget?", path, path[0], [path[0]])
    assert (d.action, d.node) == ("continue", None)


def test_return_cue_prefers_a_side_branch_close_to_an_ancestor_fork():
    path = [node(0, 0.6), node(3, 0.1, branch=2)]
    side = node(1, 0.55, on_path=False)
    d = EmbeddedDecider().decide_branch("back to the hotels", path, path[0], [path[0], side])
    assert (d.action, d.node) == ("switch_branch", 1)


# -- shift model ---------------------------------------------------------------------------
def view(score: float, *, last_query: str = "", nodes: int = 4) -> TopicView:
    return TopicView(0, "summary", score, score, score, nodes, True, window=score, last_query=last_query)


def test_shift_probability_rises_for_an_unrelated_question():
    d = EmbeddedDecider()
    related = d.shift_probability("I love hiking there every summer with my dog.", view(0.7), [])
    unrelated = d.shift_probability("What kind of music do you listen to at work?", view(0.1), [])
    assert 0.0 <= related < d.theta_shift <= unrelated <= 1.0


def test_shift_model_decides_continue_or_create():
    d = EmbeddedDecider()
    stay = d.decide_topic("We hiked that trail with my dog last summer.", [view(0.7)])
    leave = d.decide_topic("What kind of music do you listen to at work?", [view(0.1)])
    assert stay.action == "continue" and "shift probability" in stay.reason
    assert leave.action == "create" and "shift probability" in leave.reason


def test_a_related_statement_with_an_unrelated_score_leaves_the_topic():
    """Below theta_unrelated the shift model is overruled (instructions after a maths question)."""
    d = EmbeddedDecider(theta_shift=0.9)
    query = "Write a function that finds the majority element of an integer array."
    assert d.shift_probability(query, view(0.05), []) < d.theta_shift
    assert d.decide_topic(query, [view(0.3)]).action == "continue"
    decision = d.decide_topic(query, [view(0.05)])
    assert decision.action == "create" and "theta_unrelated" not in decision.reason
    assert f"< {d.theta_unrelated:g}" in decision.reason


def test_previous_question_lowers_the_shift_probability():
    d = EmbeddedDecider()
    query = "I work at a bakery downtown, mostly early mornings."
    after_statement = d.shift_probability(query, view(0.3, last_query="I like bread."), [])
    after_question = d.shift_probability(query, view(0.3, last_query="Where do you work?"), [])
    assert after_question < after_statement


def test_without_a_shift_model_the_threshold_rules_decide():
    d = EmbeddedDecider(shift_model=None)
    assert d.decide_topic("What is the name of my cat?", [view(0.35)]).action == "continue"
    assert d.decide_topic("What is the name of my cat?", [view(0.2)]).action == "create"


@pytest.mark.parametrize(
    "model",
    [
        {"mean": [0.0], "scale": [1.0], "weights": [1.0], "bias": 0.0},
        {"mean": [0.0] * 10, "scale": [0.0] * 10, "weights": [1.0] * 10, "bias": 0.0},
        {"mean": [0.0] * 10, "scale": [1.0] * 10, "weights": [1.0] * 10},
        {"mean": [0.0] * 10, "scale": [1.0] * 10, "weights": [float("nan")] * 10, "bias": 0.0},
    ],
)
def test_invalid_shift_model(model):
    with pytest.raises(ConfigurationError):
        EmbeddedDecider(shift_model=model)


def test_invalid_shift_thresholds():
    with pytest.raises(ConfigurationError):
        EmbeddedDecider(theta_shift=1.5)
    with pytest.raises(ConfigurationError):
        EmbeddedDecider(theta_unrelated="x")
