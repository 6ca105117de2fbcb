"""The forest's PNG: the tidy layout of its trees and the figure."""

from __future__ import annotations

import pytest

from ctxmgmt.strategies.forest_plot import FOREST_LABEL_ALL, _forest_layout, _gist, plot_forest

PNG = b"\x89PNG\r\n\x1a\n"


def test_forest_layout_is_a_tidy_tree_without_overlaps():
    nodes = [
        {"id": 0, "parent": None},
        {"id": 1, "parent": 0},
        {"id": 2, "parent": 0},
        {"id": 3, "parent": 1},
        {"id": 4, "parent": None},
        {"id": 5, "parent": 2},
        {"id": 6, "parent": 2},
        {"id": 7, "parent": 4},
    ]
    pos = _forest_layout(nodes)
    assert sorted(pos) == list(range(8))
    for n in nodes:
        if n["parent"] is not None:
            assert pos[n["id"]][1] > pos[n["parent"]][1]
    assert len(set(pos.values())) == len(pos)
    assert pos[0][1] == pos[4][1] == 0 and pos[4][0] > max(pos[i][0] for i in (0, 1, 2, 3, 5, 6))
    assert pos[2][0] == (pos[5][0] + pos[6][0]) / 2  # a parent sits over its children
    # wrapped into rows: the second tree goes below the first, still tidy
    rows = _forest_layout(nodes, width=3)
    assert rows[4][1] > max(rows[i][1] for i in (0, 1, 2, 3, 5, 6)) and rows[4][0] == 0
    assert len(set(rows.values())) == len(rows)


def test_forest_layout_handles_a_large_random_forest_and_a_long_chain():
    import random

    rng = random.Random(7)
    nodes = [{"id": 0, "parent": None}]
    for i in range(1, 150):
        nodes.append({"id": i, "parent": None if rng.random() < 0.1 else rng.randrange(i)})
    for width in (None, 40):
        pos = _forest_layout(nodes, width=width)
        assert len(pos) == 150 and len(set(pos.values())) == 150
        assert all(pos[n["id"]][1] > pos[n["parent"]][1] for n in nodes if n["parent"] is not None)
    chain = [
        {"id": i, "parent": i - 1 if i else None} for i in range(3000)
    ]  # deeper than the recursion limit
    assert _forest_layout(chain)[2999] == (0.0, 2999.0)


def test_gist_drops_the_timestamp_and_the_role():
    assert _gist("[2024-05-01 10:00]  user:  Plan a trip") == "Plan a trip"
    assert _gist("plain summary") == "plain summary"


def test_plot_forest_draws_records_given_as_mappings(tmp_path):
    pytest.importorskip("matplotlib")
    nodes = [
        {"id": 0, "tree": 0, "branch": 0, "parent": None, "summary": "user: Rome"},
        {"id": 1, "tree": 0, "branch": 1, "parent": 0, "summary": "Paris"},
        {"id": 2, "tree": 1, "branch": 2, "parent": None, "summary": "pandas"},
    ]
    trees = [{"id": 0, "nodes": [0, 1]}, {"id": 1, "nodes": [2]}]
    out = plot_forest(nodes, tmp_path / "deep" / "forest.png", trees=trees, active_tree=0, active_path=[0, 1])
    assert out == tmp_path / "deep" / "forest.png" and out.read_bytes().startswith(PNG)
    assert len(nodes) <= FOREST_LABEL_ALL  # small: every node labelled
    empty = plot_forest([], tmp_path / "empty.png", title="nothing yet")
    assert empty.read_bytes().startswith(PNG)
