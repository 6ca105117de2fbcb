"""DiscourseTreeStrategy: state transitions, paths, context layout, budget, persistence."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from ctxmgmt import ConfigurationError, Message, Turn, kadane_dial
from ctxmgmt.components.decider import BranchDecision, EmbeddedDecider, LLMDecider, TopicDecision
from ctxmgmt.components.summarizer import BriefSummarizer
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
from tests.helpers import words


def turn(i: int, user: str, answer: str = "Noted.") -> Turn:
    return Turn(i, (Message("user", user), Message("assistant", answer)))


class ScriptedDecider:
    """Topic/branch decisions by query text; records every call."""

    def __init__(self, topics=None, branches=None):
        self.topics = topics or {}
        self.branches = branches or {}
        self.calls: list[tuple[str, str]] = []

    def decide_topic(self, query, topics):
        self.calls.append(("topic", query))
        action, tree = self.topics.get(query, ("continue", None))
        if not topics:
            return TopicDecision("create", None, "first")
        if action == "continue":
            tree = next(t.id for t in topics if t.active)
        return TopicDecision(action, tree, "scripted")

    def decide_branch(self, query, path, fork, candidates):
        self.calls.append(("branch", query))
        action, node = self.branches.get(query, ("continue", None))
        return BranchDecision(action, node, "scripted")


def make(decider=None, embedder=None, **kwargs) -> DiscourseTreeStrategy:
    return DiscourseTreeStrategy(embedder=embedder, token_counter=words, decider=decider, **kwargs)


def feed(strategy, queries):
    for q in queries:
        strategy.select(q)
        strategy.add(turn(len(strategy), q))


FAITHFUL = {"recall_topics": 0, "summary_sections": None, "summary_share": None, "key_terms": 0}
"""Context-Agent's layout (``DiscourseTreeConfig.paper()``): the path only, every section."""

ROME = ["Plan a trip to Rome in May.", "Which hotels near the Colosseum?", "How many days for the Vatican?"]


# -- state transitions ---------------------------------------------------------------------
def test_create_then_continue_builds_one_chain(hashing_embedder):
    s = make(ScriptedDecider(), hashing_embedder, theta_fork=1.0)
    feed(s, ROME)
    assert [n.parent for n in s.nodes] == [None, 0, 1]
    assert {n.tree for n in s.nodes} == {0} and {n.branch for n in s.nodes} == {0}
    assert s.path(2) == [0, 1, 2] and (s.active_tree, s.current_node) == (0, 2)
    assert [d.topic for d in s.decisions] == ["create", "continue", "continue"]


def test_create_and_switch_topic(hashing_embedder):
    decider = ScriptedDecider(topics={"pandas merge": ("create", None), "back to Rome": ("switch", 0)})
    s = make(decider, hashing_embedder, theta_fork=1.0)
    feed(s, [*ROME[:2], "pandas merge", "pandas groupby", "back to Rome"])
    assert [n.tree for n in s.nodes] == [0, 0, 1, 1, 0]
    assert s.nodes[2].parent is None and s.nodes[3].parent == 2
    assert s.nodes[4].parent == 1  # under topic 0's current node
    assert s.trees[0].current == 4 and s.trees[1].current == 3
    assert [d.topic for d in s.decisions] == ["create", "continue", "create", "continue", "switch"]


def test_create_branch_at_the_fork_and_switch_back(hashing_embedder):
    decider = ScriptedDecider(
        branches={
            "Instead, a trip to Paris in May?": ("create_branch", 0),
            "Rome hotels again": ("switch_branch", 1),
        }
    )
    s = make(decider, hashing_embedder, theta_fork=-1.0)  # the filter always fires off the current node
    feed(s, [*ROME[:2], "Instead, a trip to Paris in May?", "Paris museums", "Rome hotels again"])
    nodes = s.nodes
    assert nodes[2].parent == 0 and nodes[2].branch == 1
    assert s.branches[1].fork == 0 and s.branches[1].nodes == [2, 3]
    assert nodes[3].branch == 1 and nodes[3].parent == 2
    assert nodes[4].branch == 0 and nodes[4].parent == 1  # under the leaf of branch 0
    assert s.path(4) == [0, 1, 4]
    assert [d.branch for d in s.decisions][2:] == ["create_branch", "continue", "switch_branch"]


def test_filter_skips_the_branch_decision_on_the_current_node(hashing_embedder):
    decider = ScriptedDecider()
    s = make(decider, hashing_embedder, theta_fork=1.0)  # nothing is similar enough
    feed(s, ROME)
    assert not [c for c in decider.calls if c[0] == "branch"]
    assert s.decisions[1].branch_source == "filter"


def test_select_plans_without_changing_the_forest_and_add_reuses_the_plan(hashing_embedder):
    decider = ScriptedDecider(topics={"pandas merge": ("create", None)})
    s = make(decider, hashing_embedder)
    feed(s, ROME[:2])
    before = json.dumps(s.to_state())
    s.select("pandas merge")
    s.select("pandas merge")
    assert json.dumps(s.to_state()) == before
    s.add(turn(2, "pandas merge"))
    assert decider.calls.count(("topic", "pandas merge")) == 1
    assert s.nodes[2].tree == 1


# -- context layout ------------------------------------------------------------------------------
def forest(hashing_embedder) -> DiscourseTreeStrategy:
    decider = ScriptedDecider(
        topics={"pandas merge keys": ("create", None), "Rome museums": ("switch", 0)},
        branches={"Instead, a trip to Paris in May?": ("create_branch", 0)},
    )
    s = make(decider, hashing_embedder, theta_fork=-1.0, **FAITHFUL)
    feed(
        s,
        [
            *ROME[:2],
            "Instead, a trip to Paris in May?",
            "pandas merge keys",
            "pandas groupby sums",
            "Rome museums",
        ],
    )
    return s


def test_context_is_summaries_then_the_active_path(hashing_embedder):
    s = forest(hashing_embedder)
    context = s.select("and the Louvre?")  # continues topic 0 after node 5 (branch 1)
    kinds = [b.kind for b in context.blocks]
    assert kinds[0] == "summary" and set(kinds[1:]) == {"turns"}
    assert context.details["path"] == s.path(5) == [0, 2, 5]
    assert context.turn_indices == [0, 2, 5]
    summary = context.blocks[0]
    assert set(summary.turns) == {1, 3, 4}
    lines = summary.text.splitlines()
    assert lines[1].startswith("- Topic 2 (turns 3-4):")
    assert lines[2].startswith("- Side branch of this topic after turn 0 (turns 1):")
    assert "pandas merge keys" in summary.text
    # stable: the same query gives the same text
    assert s.select("and the Louvre?").blocks[0].text == summary.text
    json.dumps(context.details)


def test_a_new_topic_gets_every_topic_summarised(hashing_embedder):
    decider = ScriptedDecider(topics={"volcanoes?": ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0, **FAITHFUL)
    feed(s, ROME[:2])
    context = s.select("volcanoes?")
    assert [b.kind for b in context.blocks] == ["summary"]
    assert context.blocks[0].turns == (0, 1) and context.details["path"] == []


def test_recent_turns_are_kept_off_the_path(hashing_embedder):
    decider = ScriptedDecider(topics={"volcanoes?": ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0, recent_turns=1, **FAITHFUL)
    feed(s, ROME[:2])
    assert s.select("volcanoes?").turn_indices == [1]


def test_budget_drops_summaries_first_then_oldest_path_turns(hashing_embedder):
    s = forest(hashing_embedder)
    full = s.select("and the Louvre?")
    path_tokens = s.tokens_of([0, 2, 5])
    tight = s.select("and the Louvre?", budget=path_tokens)
    assert tight.tokens <= path_tokens and tight.turn_indices == [0, 2, 5]
    assert tight.details["dropped_sections"]
    tighter = s.select("and the Louvre?", budget=s.tokens_of([2, 5]))
    assert tighter.turn_indices == [2, 5] and tighter.details["dropped_turns"] == [0]
    assert full.tokens > tight.tokens


def test_the_explanation_draws_only_the_turns_in_the_context_and_those_above_them(hashing_embedder):
    s = forest(hashing_embedder)  # topic 1: 0 -> 1 (side branch) and 0 -> 2 -> 5; topic 2: 3 -> 4
    assert s.render(trees=[0], turns={5}).splitlines() == [
        "Topic 1 (active): 4 turns (1 not drawn)",
        *[line for line in s.render(trees=[0]).splitlines()[1:] if "[1]" not in line],
    ]
    assert s.render(trees=[1], turns=set()) == "Topic 2: 2 turns (2 not drawn)"
    assert s.render(trees=[0, 1], turns={1, 4}).count("not drawn") == 0  # 4 brings 3, 1 brings 0
    full = s.select("and the Louvre?")  # the side branch is summarised: every turn is drawn
    assert "[1]" in full.explain() and "not drawn" not in full.explain()
    tight = s.select("and the Louvre?", budget=s.tokens_of([0, 2, 5]))  # summaries dropped
    assert "Topic 1 (active): 4 turns (1 not drawn)" in tight.details["explain"]
    assert "[1]" not in tight.explain() and "*[5]" in tight.explain()


# -- explanation and persistence ---------------------------------------------------------------------
def test_explain_draws_the_forest_with_the_active_path(hashing_embedder):
    s = forest(hashing_embedder)
    text = s.explain()
    assert "Discourse forest: 2 topics" in text
    assert "Topic 1 (active)" in text
    assert "*[5]" in text and "*[0]" in text and " [1]" in text
    assert "turn 2: topic continue (embedded), branch create_branch" in text
    context = s.select("and the Louvre?")
    assert "topic decision" in context.explain() and "*[5]" in context.explain()


def test_state_round_trip_without_recomputing(hashing_embedder):
    s = forest(hashing_embedder)
    state = json.loads(json.dumps(s.to_state()))
    calls = len(hashing_embedder.calls)
    clone = make(ScriptedDecider(), hashing_embedder, theta_fork=-1.0)
    clone.load_state(state)
    assert len(hashing_embedder.calls) == calls
    assert clone.nodes == s.nodes and clone.trees == s.trees and clone.branches == s.branches
    assert clone.explain() == s.explain()
    np.testing.assert_allclose(np.vstack(clone._forest.query_vectors), np.vstack(s._forest.query_vectors))
    q = hashing_embedder.embed(["the Louvre museum"])[0]
    assert clone._topic_views(q) == s._topic_views(q)
    legacy = {k: v for k, v in state.items() if k != "query_embeddings"}  # saved before they existed
    clone.load_state(legacy)
    assert len(clone._forest.query_vectors) == len(s.nodes)
    with pytest.raises(ConfigurationError):
        clone.load_state({"strategy": "kadanedial"})


def test_reset_forgets_the_forest(hashing_embedder):
    s = forest(hashing_embedder)
    s.reset()
    assert len(s) == 0 and s.nodes == [] and s.active_tree is None
    assert s.select("anything").blocks == []
    assert s.render() == "(empty forest)"


# -- embedded defaults ---------------------------------------------------------------------------------
def test_embedded_decider_follows_topics_with_word_overlap(hashing_embedder):
    s = make(None, hashing_embedder)
    feed(
        s,
        [
            "sourdough starter feeding schedule for sourdough bread",
            "sourdough bread dough proofing time for sourdough",
            "python pandas dataframe merge keyerror in pandas",
            "python pandas dataframe groupby sum in pandas",
            "back to the sourdough bread: sourdough oven temperature",
        ],
    )
    assert [n.tree for n in s.nodes] == [0, 0, 1, 1, 0]
    assert s.llm_calls == 0


def test_llm_decider_garbage_falls_back_and_is_counted(hashing_embedder, caplog):
    s = make(LLMDecider(lambda prompt: "I think you should continue."), hashing_embedder)
    with caplog.at_level(logging.WARNING):
        feed(s, ROME)
    assert s.llm_calls >= 2 and {d.topic_source for d in s.decisions[1:]} == {"fallback"}
    assert "unusable topic decision" in caplog.text


def test_failing_summarizer_keeps_the_node(hashing_embedder, caplog):
    class Broken:
        def summarize(self, previous, window_text):
            raise RuntimeError("boom")

    s = make(None, hashing_embedder, summarizer=Broken())
    with caplog.at_level(logging.WARNING):
        s.add(turn(0, "Plan a trip to Rome in May."))
    assert s.nodes[0].summary == "Plan a trip to Rome in May."


def test_brief_summarizer():
    assert BriefSummarizer().summarize([], "user: Can you tell me the numerical value of x, y and z?") == [
        "tell numerical value x, y z?"
    ]
    assert BriefSummarizer(max_words=2).summarize([], "user: Feed the sourdough starter daily.") == [
        "Feed sourdough ..."
    ]
    assert BriefSummarizer().summarize([], "user: hi") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"theta_fork": 2},
        {"theta_fork": float("nan")},
        {"candidates": 0},
        {"summary_items": True},
        {"summary_words": 0},
        {"recent_turns": -1},
        {"decider": 3},
    ],
)
def test_bad_parameters(bad, hashing_embedder):
    with pytest.raises(ConfigurationError):
        make(embedder=hashing_embedder, **bad)


def test_config_declares_every_parameter_once(hashing_embedder):
    from ctxmgmt.strategies.discourse_tree import DiscourseTreeConfig

    assert [p.name for p in DiscourseTreeConfig.params()] == [
        "memory_role",
        "cache_friendly",
        "theta_fork",
        "candidates",
        "summary_items",
        "recent_turns",
        "summary_words",
        "recall_topics",
        "recall_ratio",
        "recall_window",
        "summary_sections",
        "summary_share",
        "key_terms",
        "follow_on_words",
        "instruction_words",
    ]
    assert DiscourseTreeConfig().to_dict() == {
        "memory_role": "user",
        "cache_friendly": False,
        "theta_fork": 0.35,
        "candidates": 3,
        "summary_items": 8,
        "recent_turns": 0,
        "summary_words": 8,
        "recall_topics": 3,
        "recall_ratio": 0.65,
        "recall_window": 3,
        "summary_sections": 1,
        "summary_share": 0.3,
        "key_terms": 4,
        "follow_on_words": 12,
        "instruction_words": 20,
    }
    assert DiscourseTreeConfig.paper() == DiscourseTreeConfig(**FAITHFUL)
    assert DiscourseTreeStrategy.from_paper(embedder=hashing_embedder).config == DiscourseTreeConfig(
        **FAITHFUL
    )
    assert DiscourseTreeStrategy.config_class is DiscourseTreeConfig
    assert DiscourseTreeStrategy.components == ("embedder", "decider", "summarizer")
    config = DiscourseTreeConfig(theta_fork=0.5, summary_words=4)
    s = DiscourseTreeStrategy(config, embedder=hashing_embedder, candidates=2)
    assert s.config == DiscourseTreeConfig(theta_fork=0.5, summary_words=4, candidates=2)
    assert (s.theta_fork, s.candidates, s.summary_words) == (0.5, 2, 4)
    assert s.summarizer.max_words == 4  # the default summariser reads summary_words
    assert isinstance(DiscourseTreeStrategy(embedder=hashing_embedder, theta_fork=1).theta_fork, float)
    with pytest.raises(ConfigurationError):
        DiscourseTreeStrategy(embedder=hashing_embedder, tau=0.5)  # another strategy's parameter


def test_llm_calls_count_the_decider_and_the_summarizer(hashing_embedder):
    prompts: list[str] = []

    def summarize(prompt):
        prompts.append(prompt)
        return "- a summary"

    decider = LLMDecider(lambda prompt: '{"action": "continue"}')
    s = make(decider, hashing_embedder, summarizer=summarize)
    feed(s, ROME)
    assert len(prompts) == 3 and decider.calls >= 2
    assert s.llm_calls == decider.calls + 3
    assert s.select("and the Vatican?").details["llm_calls"] == s.llm_calls
    assert make(None, hashing_embedder).llm_calls == 0


def test_forest_records_are_dataclasses_and_the_state_is_plain_json(hashing_embedder):
    from ctxmgmt.strategies.discourse_tree import Branch, Node, Placement, Plan, TopicTree

    s = forest(hashing_embedder)
    assert all(isinstance(n, Node) for n in s.nodes)
    assert all(isinstance(t, TopicTree) for t in s.trees)
    assert all(isinstance(b, Branch) for b in s.branches)
    assert all(isinstance(d, Placement) for d in s.decisions)
    assert s.nodes[5] == Node(
        id=5, tree=0, branch=1, parent=2, summary=s.nodes[5].summary, query="Rome museums"
    )
    s.trees[0].nodes.append(99)  # copies: the forest is not changed through them
    s.branches[0].nodes.append(99)
    assert 99 not in s.trees[0].nodes and 99 not in s.branches[0].nodes
    state = s.to_state()
    assert json.loads(json.dumps(state)) == state  # plain JSON: no dataclass, no tuple
    assert state["nodes"][5] == {
        "id": 5,
        "tree": 0,
        "branch": 1,
        "parent": 2,
        "summary": s.nodes[5].summary,
        "query": "Rome museums",
    }
    assert state["trees"][1] == {"id": 1, "nodes": [3, 4], "current": 4}
    assert state["branches"][1] == {"id": 1, "tree": 0, "fork": 0, "nodes": [2, 5]}
    assert state["decisions"][2]["branch"] == "create_branch"
    assert set(state["decisions"][0]) == {
        "node",
        "topic",
        "topic_reason",
        "topic_source",
        "branch",
        "branch_reason",
        "branch_source",
        "fork",
        "tree",
        "branch_id",
        "parent",
    }
    plan = s._plan("and the Louvre?")
    assert isinstance(plan, Plan) and (plan.tree, plan.parent, plan.branch) == (0, 5, 1)
    details = s.select("and the Louvre?").details
    assert details["plan"] == {k: v for k, v in plan.to_dict().items() if k != "scores"}
    assert details["topic_scores"] == plan.to_dict()["scores"] == {str(k): v for k, v in plan.scores.items()}
    assert [sec["kind"] for sec in details["sections"]] == ["topic", "branch"]
    assert "after" in details["sections"][1] and "after" not in details["sections"][0]
    json.dumps(details)


def test_the_renderings_take_records_or_their_plain_dicts(hashing_embedder):
    from ctxmgmt.strategies.forest_render import forest_html, forest_text

    s = forest(hashing_embedder)
    state = json.loads(json.dumps(s.to_state()))
    path = s.path(s.current_node)
    text = forest_text(state["nodes"], state["trees"], active_tree=s.active_tree, active_path=path)
    assert text == s.render() == forest_text(s.nodes, s.trees, active_tree=s.active_tree, active_path=path)
    assert forest_text([], [], active_tree=None, active_path=[]) == "(empty forest)"
    page = forest_html(
        state["nodes"], state["trees"], branches=3, active_tree=s.active_tree, active_path=path
    )
    assert page == s.render_html()
    plan = s._plan("and the Louvre?")
    as_dict = s.select("and the Louvre?").details["plan"]
    assert s.render(plan) == s.render(as_dict) and s.render_html(plan=plan) == s.render_html(plan=as_dict)
    assert "Query: and the Louvre?" in s.render_html(plan=plan)


# -- pictures: HTML page and PNG ------------------------------------------------------------------
PNG = b"\x89PNG\r\n\x1a\n"


def html_nodes(page: str) -> dict[int, set[str]]:
    """Turn index -> CSS classes of every node element of a render_html page."""
    from html.parser import HTMLParser

    found: dict[int, set[str]] = {}

    class Nodes(HTMLParser):
        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if "data-turn" in a:
                found[int(a["data-turn"])] = set((a.get("class") or "").split())

    Nodes().feed(page)
    return found


def test_render_html_shows_every_turn_and_marks_the_active_path(hashing_embedder):
    s = forest(hashing_embedder)
    page = s.render_html()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "http://" not in page and "https://" not in page  # self-contained
    nodes = html_nodes(page)
    assert sorted(nodes) == [n.id for n in s.nodes]
    assert {i for i, cls in nodes.items() if "on-path" in cls} == set(s.path(s.current_node)) == {0, 2, 5}
    assert {i for i, cls in nodes.items() if "anchor" in cls} == {5}
    assert "2 topics" in page and "6 turns" in page and "active topic" in page
    assert page.count('class="topic active-topic"') == 1
    # a plan highlights its own path: a new topic has none
    plan = s.select("pandas merge keys").details["plan"]
    assert plan["tree"] is None
    assert not [i for i, cls in html_nodes(s.render_html(plan=plan)).items() if "on-path" in cls]


def test_render_html_escapes_summaries_and_writes_a_file(hashing_embedder, tmp_path):
    s = make(ScriptedDecider(), hashing_embedder, theta_fork=1.0)
    feed(s, ["Plan a trip to Rome in May.", "What does <script>alert('x')</script> do in a page?"])
    page = s.render_html()
    assert "<script>" not in page and "&lt;script&gt;" in page
    out = s.render_html(tmp_path / "deep" / "forest.html")
    assert out == str(tmp_path / "deep" / "forest.html")
    assert (tmp_path / "deep" / "forest.html").read_text(encoding="utf-8") == page


def test_render_html_of_an_empty_forest(hashing_embedder):
    page = make(embedder=hashing_embedder).render_html()
    assert "Empty forest" in page and html_nodes(page) == {}


def test_plot_writes_a_png_of_the_forest(hashing_embedder, tmp_path):
    pytest.importorskip("matplotlib")
    s = forest(hashing_embedder)
    out = s.plot(str(tmp_path / "pics" / "forest.png"))
    assert out == str(tmp_path / "pics" / "forest.png")
    assert (tmp_path / "pics" / "forest.png").read_bytes().startswith(PNG)
    plan = s.select("and the Louvre?").details["plan"]
    assert s.plot(tmp_path / "plan.png", plan).endswith("plan.png")


def test_plot_of_a_large_forest_and_of_an_empty_one(hashing_embedder, tmp_path):
    pytest.importorskip("matplotlib")
    from ctxmgmt.strategies.forest_plot import plot_forest

    nodes = [
        {
            "id": i,
            "parent": None if i % 20 == 0 else i - 1 - (i % 3 == 0),
            "branch": i // 7,
            "summary": f"s{i}",
        }
        for i in range(100)
    ]
    big = plot_forest(nodes, tmp_path / "big.png", active_tree=None, active_path=[0, 1, 2, 3])
    assert big.read_bytes().startswith(PNG)
    # an empty forest draws a figure saying so (no error: a fresh memory can always be plotted)
    empty = make(embedder=hashing_embedder).plot(str(tmp_path / "empty.png"))
    assert open(empty, "rb").read().startswith(PNG)


def test_topic_views_carry_the_recent_window_and_the_last_query(hashing_embedder) -> None:
    from ctxmgmt.components.embedder import embed_query

    s = DiscourseTreeStrategy(embedder=hashing_embedder, decider=EmbeddedDecider(shift_model=None))
    for i, text in enumerate(
        ["my cat Miso sleeps", "my cat Miso eats fish", "Miso the cat purrs", "cat toys"]
    ):
        s.add(Turn(i, (Message("user", text), Message("assistant", "nice"))))
    q = embed_query(hashing_embedder, "cat Miso")[0]
    (view,) = [v for v in s._topic_views(q) if v.active]
    tree = s.trees[view.id]
    assert view.last_query == s.nodes[tree.current].query == "cat toys"
    window = np.sum([s._forest.query_vectors[i] for i in tree.nodes[-3:]], axis=0)  # user messages only
    assert view.window == pytest.approx(float(window @ q / np.linalg.norm(window)))
    whole_turns = max(float(s._forest.vectors[i] @ q) for i in tree.nodes)  # replies included
    assert view.content == pytest.approx(whole_turns)
    assert view.score == max(view.similarity, view.recent, view.best, view.content)


# -- returning to earlier topics ---------------------------------------------------------------------
BAKING = [
    "My sourdough starter named Bubbles needs feeding with rye flour.",
    "Bubbles doubled in 6 hours at 24 degrees.",
    "How long should the sourdough dough proof overnight?",
]
TAXES = [
    "Help me file my tax return: I earned 52000 dollars in 2023.",
    "Can I deduct my home office on the tax return?",
    "What is the tax deadline, April 15?",
]


def test_returning_to_an_earlier_topic_brings_its_turns_back_verbatim_within_budget(hashing_embedder):
    decider = ScriptedDecider(topics={TAXES[0]: ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0)
    feed(s, [*BAKING, *TAXES])
    assert [n.tree for n in s.nodes] == [0, 0, 0, 1, 1, 1]
    query = "Back to the sourdough starter Bubbles: how often should I feed the sourdough?"
    context = s.select(query)  # the scripted decider continues the tax topic
    assert context.details["plan"]["tree"] == 1
    assert {0, 1, 2} <= set(context.turn_indices)  # the baking topic's turns, verbatim
    assert context.details["recalled"]["0"] == [0, 1, 2]
    assert any("recalled" in b.reason for b in context.blocks)
    faithful = make(
        ScriptedDecider(topics={TAXES[0]: ("create", None)}), hashing_embedder, theta_fork=1.0, **FAITHFUL
    )
    feed(faithful, [*BAKING, *TAXES])
    assert not {0, 1, 2} & set(faithful.select(query).turn_indices)  # Context-Agent: only a summary
    # within a budget: the recalled turns go (least relevant first) before the path does
    budget = s.tokens_of([3, 4, 5]) + s.tokens_of([0])
    tight = s.select(query, budget=budget)
    assert tight.tokens <= budget and {3, 4, 5} <= set(tight.turn_indices)
    assert set(tight.details["dropped_turns"]) <= {0, 1, 2} and tight.details["dropped_turns"]


def test_the_same_query_is_scored_once_until_a_turn_is_placed(hashing_embedder, monkeypatch):
    # Memory truncating a block selects the same query again: the second selection only trims.
    import ctxmgmt.strategies.forest_recall as module

    passes: list[int] = []

    def counting(signal, **kwargs):
        passes.append(len(signal))
        return kadane_dial(signal, **kwargs)

    monkeypatch.setattr(module, "kadane_dial", counting)
    s = make(ScriptedDecider(topics={TAXES[0]: ("create", None)}), hashing_embedder, theta_fork=1.0)
    feed(s, [*BAKING, *TAXES])
    passes.clear()
    query = "Back to the sourdough starter Bubbles: how often should I feed the sourdough?"
    full = s.select(query)
    budget = s.tokens_of([3, 4, 5]) + s.tokens_of([0])
    tight = s.select(query, budget=budget)
    assert passes == [6] and tight.tokens <= budget < full.tokens
    s.add(turn(6, "Which flour for the starter?"))
    assert s.select(query).details["recalled"]["0"] == full.details["recalled"]["0"]
    assert passes == [6, 7]
    clone = make(ScriptedDecider(), hashing_embedder, theta_fork=1.0)  # same length, other turns
    feed(clone, [*TAXES, *BAKING, "Which flour for the starter?"])
    passes.clear()
    s.load_state(clone.to_state())  # scored again on the restored turns, not taken from before
    assert s.select(query).details["recalled"] == clone.select(query).details["recalled"]
    assert passes == [7, 7]


def test_a_short_follow_up_split_off_its_topic_comes_back_with_it_within_budget(hashing_embedder):
    follow_up = "Is that normal?"  # the decider wrongly opens a new topic with it
    decider = ScriptedDecider(topics={follow_up: ("create", None), TAXES[0]: ("create", None)})
    # the baking topic opens with an instruction of 10 words (instruction_words=10; default 20)
    s = make(decider, hashing_embedder, theta_fork=1.0, instruction_words=10)
    feed(s, [*BAKING, follow_up, *TAXES])
    assert [n.tree for n in s.nodes] == [0, 0, 0, 1, 2, 2, 2]
    query = "Back to the sourdough starter Bubbles: how often should I feed the sourdough?"
    context = s.select(query)
    assert {0, 1, 2, 3} <= set(context.turn_indices)  # the follow-up comes back verbatim with its topic
    assert context.details["recalled"]["1"] == [3]
    assert any("follow-on topics 2" in line for line in context.details["explain"])
    # restored from its state, the forest links the follow-up again (nothing persisted twice)
    clone = make(ScriptedDecider(), hashing_embedder, theta_fork=1.0, instruction_words=10)
    clone.load_state(json.loads(json.dumps(s.to_state())))
    assert clone.select(query).turn_indices == context.turn_indices
    # within a budget the recalled turns give way before the active path
    budget = s.tokens_of([4, 5, 6]) + s.tokens_of([0, 3])
    tight = s.select(query, budget=budget)
    assert tight.tokens <= budget and {4, 5, 6} <= set(tight.turn_indices)
    # the default instruction_words=20 reads the 10-word opening as a chat message: no link
    chat = make(
        ScriptedDecider(topics={follow_up: ("create", None), TAXES[0]: ("create", None)}),
        hashing_embedder,
        theta_fork=1.0,
    )
    feed(chat, [*BAKING, follow_up, *TAXES])
    assert 3 not in chat.select(query).turn_indices
    # follow_on_words=0 turns the links off
    unlinked = make(
        ScriptedDecider(topics={follow_up: ("create", None), TAXES[0]: ("create", None)}),
        hashing_embedder,
        theta_fork=1.0,
        instruction_words=10,
        follow_on_words=0,
    )
    feed(unlinked, [*BAKING, follow_up, *TAXES])
    assert 3 not in unlinked.select(query).turn_indices


def test_a_topic_switch_brings_back_the_topics_newest_path(hashing_embedder):
    decider = ScriptedDecider(
        topics={TAXES[0]: ("create", None), "Bubbles the starter: rye flour feeding again?": ("switch", 0)},
        branches={"Bubbles the starter: rye flour feeding again?": ("create_branch", 0)},
    )
    s = make(decider, hashing_embedder, theta_fork=-1.0, recall_ratio=1.0)
    feed(s, [*BAKING, *TAXES])
    context = s.select("Bubbles the starter: rye flour feeding again?")
    plan = context.details["plan"]
    assert plan["tree"] == 0 and plan["parent"] == 0  # Context-Agent: a new branch at the root
    assert {0, 1, 2} <= set(context.turn_indices)  # the topic's newest path comes back too
    assert any("returns to topic 1" in line for line in context.details["explain"])


def test_summaries_keep_names_numbers_and_dates(hashing_embedder):
    decider = ScriptedDecider(topics={TAXES[0]: ("create", None), "volcanoes in Iceland?": ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0, recall_topics=0, summary_sections=None, key_terms=8)
    s.summarizer = BriefSummarizer(max_words=2)  # node summaries too short to hold the specifics
    feed(s, [*BAKING, *TAXES])
    summary = s.select("volcanoes in Iceland?").blocks[0]
    assert summary.kind == "summary"
    for term in ("Bubbles", "6", "24", "52000", "2023", "April", "15"):
        assert term in summary.text, term
    plain = make(decider, hashing_embedder, theta_fork=1.0, **FAITHFUL)
    plain.summarizer = BriefSummarizer(max_words=2)
    feed(plain, [*BAKING, *TAXES])
    assert "52000" not in plain.select("volcanoes in Iceland?").blocks[0].text


def test_summary_sections_keep_the_most_similar_topics(hashing_embedder):
    decider = ScriptedDecider(topics={TAXES[0]: ("create", None), "sourdough rye flour": ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0, recall_topics=0, summary_sections=1)
    feed(s, [*BAKING, *TAXES])
    context = s.select("sourdough rye flour")
    assert [sec["tree"] for sec in context.details["sections"]] == [0, 1]
    assert "Topic 1" in context.blocks[0].text and "Topic 2" not in context.blocks[0].text


def test_summaries_give_way_when_the_query_brings_several_topics_back(hashing_embedder):
    garden = ["Which tomatoes grow well on a balcony?", "Water the basil every morning."]
    query = "Bubbles sourdough rye flour feeding and the tax return 52000 dollars deduction"
    topics = {TAXES[0]: ("create", None), garden[0]: ("create", None), query: ("create", None)}
    s = make(ScriptedDecider(topics=topics), hashing_embedder, theta_fork=1.0)
    feed(s, [*BAKING, *TAXES, *garden])
    context = s.select(query)
    assert set(context.details["recalled"]) == {"0", "1"}  # two topics back verbatim
    assert s.tokens_of(context.turn_indices) > 0.3 * s.total_tokens
    assert [b.kind for b in context.blocks] == ["turns"]  # turns 0-5, no summary of the garden topic
    assert [sec["tree"] for sec in context.details["capped_sections"]] == [2]
    assert any("left out" in line for line in context.details["explain"])
    # without the cap (Context-Agent) the garden topic is summarised
    uncapped = make(ScriptedDecider(topics=topics), hashing_embedder, theta_fork=1.0, summary_share=None)
    feed(uncapped, [*BAKING, *TAXES, *garden])
    summary = uncapped.select(query).blocks[0]
    assert summary.kind == "summary" and "Topic 3" in summary.text


def test_select_explains_only_the_topics_in_the_context(hashing_embedder):
    decider = ScriptedDecider(topics={TAXES[0]: ("create", None)})
    s = make(decider, hashing_embedder, theta_fork=1.0, summary_sections=0)
    feed(s, [*BAKING, *TAXES])
    text = s.select("Can I deduct my home office on the tax return?").explain()
    assert "Topic 2 (active)" in text


# -- the fast twin (the backlog's index, ctxmgmt.session.backlog) ----------------------------------


def test_the_fast_twin_keeps_the_config_and_counter_with_offline_components(hashing_embedder):
    from ctxmgmt.app.testing import FakeLLM, HashingEmbedder, plausible_answer
    from ctxmgmt.components.static_embedder import MAX_TOKENS, StaticEmbedder
    from ctxmgmt.components.static_turns import TWIN_TURN_TOKENS, StaticTurns

    llm = FakeLLM(plausible_answer)
    params = {"theta_fork": 0.5, "summary_words": 5, "recall_topics": 1}
    strategy = make(decider=llm, embedder=hashing_embedder, summarizer=llm, **params)
    feed(strategy, ROME[:2])
    asked = len(llm.prompts)
    twin = strategy.fast_twin()
    assert isinstance(twin, DiscourseTreeStrategy) and twin is not strategy
    assert twin.config == strategy.config and twin.theta_fork == 0.5
    assert twin.token_counter.count("one two three") == 3  # the strategy's counter (words)
    assert isinstance(twin.decider, EmbeddedDecider)  # never the user's LLM
    assert isinstance(twin.summarizer, BriefSummarizer) and twin.summarizer.max_words == 5
    assert isinstance(twin.embedder, StaticEmbedder)  # no questions: the static encoder for all
    assert len(twin) == 0 and twin.llm_calls == 0
    questions = HashingEmbedder(dim=384)  # the static encoder's dimension, as MiniLM's
    with_questions = strategy.fast_twin(questions)
    assert isinstance(with_questions.embedder, StaticTurns) and with_questions.embedder.questions is questions
    assert with_questions.embedder.turns.max_tokens == TWIN_TURN_TOKENS  # a long reply's start only
    assert twin.embedder.max_tokens == MAX_TOKENS  # the static memory's own encoder: the same forest
    with_questions.add_many(strategy.turns)
    context = with_questions.select(ROME[2])
    assert "explain" not in context.details and not with_questions.explains  # its contexts are not shown
    assert len(llm.prompts) == asked  # the twin asked the LLM nothing
    assert "explain" in strategy.select(ROME[2]).details and strategy.explains
    assert with_questions.llm_calls == 0


def test_a_twin_reads_each_cosine_on_the_scale_of_the_deciders_thresholds(hashing_embedder, monkeypatch):
    from ctxmgmt.app.testing import HashingEmbedder
    from ctxmgmt.components.static_turns import STATIC_COSINE_MAP, STATIC_PAIR_COSINE_MAP
    from ctxmgmt.strategies import discourse_tree as module

    maps: list[tuple[str, object]] = []
    real = module.plan_query

    def spy(forest, decider, query, q, **kwargs):
        maps.append((query, kwargs["cosine_map"]))
        return real(forest, decider, query, q, **kwargs)

    monkeypatch.setattr(module, "plan_query", spy)
    strategy = make(embedder=hashing_embedder)
    feed(strategy, ROME[:2])
    assert (strategy.turn_map, strategy.question_map) == (None, None)  # MiniLM's own scale
    assert {m for _, m in maps} == {None}
    assert strategy.fast_twin().turn_map is None  # the static memory's twin: the same forest
    twin = strategy.fast_twin(HashingEmbedder(dim=384))
    assert (twin.turn_map, twin.question_map) == (STATIC_PAIR_COSINE_MAP, STATIC_COSINE_MAP)
    maps.clear()
    twin.add_many(strategy.turns)  # turns placed by their static vectors
    assert [m for _, m in maps] == [STATIC_PAIR_COSINE_MAP] * len(strategy.turns)
    maps.clear()
    twin.select(ROME[2])  # a question embedded by the question embedder
    assert maps == [(ROME[2], STATIC_COSINE_MAP)]
    assert twin._cosine_map(ROME[2]) == STATIC_COSINE_MAP


def test_a_strategy_names_no_twin_by_default():
    from ctxmgmt import SWinStrategy
    from ctxmgmt.app.testing import HashingEmbedder

    assert SWinStrategy().fast_twin(HashingEmbedder(dim=384)) is None


def test_with_budget_left_the_most_relevant_long_turns_send_their_user_message(hashing_embedder):
    """Assistant chats: what the budget leaves goes to user messages of relevant turns not shown."""
    reply = " ".join(["Here is a long and careful answer with many details."] * 25)  # > 1,000 characters
    s = make(ScriptedDecider(topics={TAXES[0]: ("create", None)}), hashing_embedder, theta_fork=1.0)
    for q in [*BAKING, *TAXES]:
        s.select(q)
        s.add(turn(len(s), q, reply))
    query = "Back to the sourdough starter Bubbles: how often should I feed the sourdough?"
    assert not s.select(query).user_only_turns  # no budget: nothing is cut
    budget = s.tokens_of([3, 4, 5]) + 60  # the tax path, and room for a few user messages
    tight = s.select(query, budget=budget)
    assert tight.tokens <= budget and {3, 4, 5} <= set(tight.turn_indices)
    parts = tight.user_only_turns
    assert parts and set(parts) <= {0, 1, 2}  # the baking turns' user messages, their replies left out
    assert "reply left out" in tight.explain()
    for block in tight.blocks:
        if block.reply_left_out:
            assert block.messages == s.turns[block.turns[0]].messages[:1]
    assert [b.turns[0] for b in tight.blocks if b.kind == "turns"] == sorted(
        b.turns[0] for b in tight.blocks if b.kind == "turns"
    )
