"""Forest: placement, branches, paths, follow-on links, the views the decider reads, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxmgmt import Message, Turn
from ctxmgmt.components.decider import BranchDecision, TopicDecision
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_records import Plan
from ctxmgmt.strategies.state import jsonable

DIM = 4


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def new_forest(**kwargs) -> Forest:
    return Forest(**{"summary_items": 8, "follow_on_words": 3, "instruction_words": 5, **kwargs})


def create(query: str) -> Plan:
    return Plan(query=query, topic=TopicDecision("create", None, "new"))


def follow(forest: Forest, query: str, parent: int, branch: int | None, action: str = "continue") -> Plan:
    tree = forest.nodes[parent].tree
    return Plan(
        query=query,
        topic=TopicDecision("continue", tree, "same"),
        tree=tree,
        parent=parent,
        branch=branch,
        fork=parent,
        branch_decision=BranchDecision(action, None if branch is not None else parent, "why"),
    )


def grown() -> Forest:
    """Topic 0: 0 -> 1 and a side branch 0 -> 2 -> 3; topic 1: 4."""
    f = new_forest()
    f.place(0, create("plan a trip to Rome in May"), unit(0), unit(0), "trip to Rome")
    f.place(1, follow(f, "hotels?", 0, 0), unit(0), unit(1), "hotels")
    f.place(2, follow(f, "Paris instead?", 0, None, "create_branch"), unit(2), unit(2), "Paris")
    f.place(3, follow(f, "museums?", 2, 1), unit(2), unit(2), "museums")
    f.place(4, create("pandas merge keys"), unit(3), unit(3), "pandas")
    return f


def test_place_builds_trees_branches_and_placements():
    f = grown()
    assert [(n.tree, n.branch, n.parent) for n in f.nodes] == [
        (0, 0, None),
        (0, 0, 0),
        (0, 1, 0),
        (0, 1, 2),
        (1, 2, None),
    ]
    assert [t.nodes for t in f.trees] == [[0, 1, 2, 3], [4]]
    assert [(b.tree, b.fork, b.nodes) for b in f.branches] == [
        (0, None, [0, 1]),
        (0, 0, [2, 3]),
        (1, None, [4]),
    ]
    assert (f.active, f.current, f.trees[0].current) == (1, 4, 3)
    assert [p.branch for p in f.placements] == ["-", "continue", "create_branch", "continue", "-"]
    assert f.placements[2].branch_id == 1 and f.placements[2].parent == 0
    assert f.nodes[1].query == "hotels?"


def test_paths_and_the_cached_path_that_grows_by_one_node():
    f = grown()
    assert f.path(3) == [0, 2, 3] and f.path(None) == []
    path, on_path = f.path_of(0, 2)
    assert path == [0, 2] and on_path == {0, 2}
    grown_path, _ = f.path_of(0, 3)
    assert grown_path is path and path == [0, 2, 3]  # extended in place, not walked again
    assert f.path_of(0, 1)[0] == [0, 1]  # another branch: walked from the root


def test_summaries_join_the_first_and_newest_nodes():
    f = grown()
    assert f.summary_of([0, 1, 2, 3]) == ("trip to Rome | hotels | Paris | museums", [0, 1, 2, 3])
    short = new_forest(summary_items=2)
    for i, text in enumerate(["a", "b", "c"]):
        plan = create(text) if i == 0 else follow(short, text, i - 1, 0)
        short.place(i, plan, unit(i), unit(i), text)
    assert short.summary_of([0, 1, 2]) == ("a | c", [0, 2])
    assert short.tree_parts(short.trees[0]).summary == ("a | c", [0, 2])


def test_topic_views_read_user_messages_and_whole_turns():
    f = grown()
    views = f.topic_views(unit(2))
    assert [v.id for v in views] == [0, 1] and [v.active for v in views] == [False, True]
    rome = views[0]
    assert rome.best == pytest.approx(1.0) and rome.content == pytest.approx(1.0)  # nodes 2 and 3
    assert rome.recent == pytest.approx(1.0)  # its current node is 3
    assert rome.last_query == "museums?" and rome.nodes == 4
    assert views[1].best == pytest.approx(0.0)
    queries, contents = f.matrices()
    assert queries.shape == contents.shape == (5, DIM)


def test_a_cosine_map_puts_every_cosine_a_decision_reads_on_another_scale():
    f, q, cosine_map = grown(), unit(2), (2.0, -0.5)
    plain_sims, plain = f.node_similarities(q), f.topic_views(q)
    mapped_sims = f.node_similarities(q, cosine_map)  # not the cached unmapped ones
    for before, after in zip(plain_sims, mapped_sims, strict=True):
        assert np.allclose(after, before * 2.0 - 0.5)
    assert np.allclose(f.node_similarities(q)[0], plain_sims[0])  # the map is part of the cache key
    for before, after in zip(plain, f.topic_views(q, cosine_map=cosine_map), strict=True):
        for field in ("similarity", "recent", "best", "window", "content"):
            assert getattr(after, field) == pytest.approx(getattr(before, field) * 2.0 - 0.5)


def test_short_openings_after_an_instruction_are_linked():
    f = new_forest()  # follow-on: <= 3 words; instruction: >= 5 words
    f.place(0, create("write a long blog post about Rome"), unit(0), unit(0), "blog")
    f.place(1, create("why?"), unit(1), unit(1), "why")  # carries topic 0 on
    f.place(2, create("and when?"), unit(2), unit(2), "when")  # carries topic 1 on (it carries one on)
    f.place(3, create("hello there my friend"), unit(3), unit(3), "hello")  # 4 words: neither
    f.place(4, create("ok"), unit(0), unit(0), "ok")  # follows topic 3, not an instruction
    assert f.linked_trees(0) == [0, 1, 2]
    assert f.linked_trees(2) == [2, 1, 0]
    assert f.linked_trees(3) == [3] and f.linked_trees(4) == [4]


def test_state_round_trip_restores_the_same_forest():
    f = grown()
    state = json.loads(json.dumps(jsonable(f.state())))
    assert list(state) == [
        "embeddings",
        "query_embeddings",
        "nodes",
        "trees",
        "branches",
        "decisions",
        "active",
        "current",
    ]
    turns = [Turn(i, (Message("user", n.query), Message("assistant", "ok"))) for i, n in enumerate(f.nodes)]
    restored = new_forest()
    vectors = [np.asarray(v, dtype=np.float32) for v in state["embeddings"]]
    queries = [np.asarray(v, dtype=np.float32) for v in state["query_embeddings"]]
    restored.load(state, vectors, queries, turns)
    assert restored.nodes == f.nodes and restored.trees == f.trees and restored.branches == f.branches
    assert restored.placements == f.placements and (restored.active, restored.current) == (1, 4)
    assert restored.topic_views(unit(2)) == f.topic_views(unit(2))
    assert restored.explain(0) == f.explain(0) and restored.html() == f.html()


def test_load_refuses_a_forest_that_points_nowhere():
    f = grown()
    state = jsonable(f.state())
    state["nodes"][1]["parent"] = 7
    with pytest.raises(CorruptStateError):
        new_forest().load(state, [], [], [Turn(i, (Message("user", "x"),)) for i in range(5)])


def test_text_draws_the_active_path_and_only_the_turns_asked_for():
    f = grown()
    text = f.text()
    assert text.splitlines()[0] == "Topic 1: 4 turns" and "*[4]" in text and " [3]" in text
    plan = follow(f, "more museums", 3, 1)
    assert "*[3]" in f.text(plan) and "*[2]" in f.text(plan) and " [1]" in f.text(plan)
    assert f.text(plan, trees=[0], turns=set()).splitlines()[0] == "Topic 1 (active): 4 turns (1 not drawn)"
    assert f.highlight({"tree": 0, "parent": 1}) == (0, [0, 1])
    assert f.highlight(None) == (1, [4])


def test_html_is_written_where_asked(tmp_path):
    f = grown()
    page = f.html({"tree": 0, "parent": 3, "query": "more museums"})
    assert "Query: more museums" in page and 'data-turn="3"' in page
    out = f.html(None, tmp_path / "a" / "forest.html")
    assert out == str(tmp_path / "a" / "forest.html")
    assert (tmp_path / "a" / "forest.html").read_text(encoding="utf-8") == f.html()
    assert f.explain(2).startswith("Discourse forest: 2 topics, 3 branches, 5 turns; active topic 2")
