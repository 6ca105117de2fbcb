"""The forest as text and as an HTML page, from plain mappings."""

from __future__ import annotations

from ctxmgmt.strategies.forest_render import forest_html, forest_text

NODES = [
    {"id": 0, "tree": 0, "branch": 0, "parent": None, "summary": "Rome in May"},
    {"id": 1, "tree": 0, "branch": 0, "parent": 0, "summary": "hotels near the <Colosseum>"},
    {"id": 2, "tree": 0, "branch": 1, "parent": 0, "summary": "Paris instead"},
    {"id": 3, "tree": 1, "branch": 2, "parent": None, "summary": "pandas " + "merge " * 20},
]
TREES = [{"id": 0, "nodes": [0, 1, 2]}, {"id": 1, "nodes": [3]}]


def test_text_indents_children_and_stars_the_active_path():
    text = forest_text(NODES, TREES, active_tree=0, active_path=[0, 2])
    assert text.splitlines()[:4] == [
        "Topic 1 (active): 3 turns",
        "  `-*[0] (b0) Rome in May",
        "    |- [1] (b0) hotels near the <Colosseum>",
        "    `-*[2] (b1) Paris instead",
    ]
    last = text.splitlines()[-1]
    assert last.startswith("  `- [3] (b2) pandas merge") and last.endswith("...") and len(last) < 80


def test_text_of_some_nodes_says_how_many_are_left_out():
    text = forest_text(NODES[:1], TREES[:1], active_tree=None, active_path=[])
    assert text.splitlines() == ["Topic 1: 3 turns (2 not drawn)", "  `- [0] (b0) Rome in May"]
    assert forest_text([], [], active_tree=None, active_path=[]) == "(empty forest)"


def test_html_escapes_marks_the_path_and_counts():
    page = forest_html(NODES, TREES, branches=3, active_tree=0, active_path=[0, 2], query="why <b>?")
    assert "&lt;Colosseum&gt;" in page and "<Colosseum>" not in page
    assert (
        'class="node on-path" data-turn="0"' in page and 'class="node on-path anchor" data-turn="2"' in page
    )
    assert 'class="node" data-turn="1"' in page and "Query: why &lt;b&gt;?" in page
    assert "2 topics &middot; 3 branches &middot; 4 turns" in page and page.count("<section") == 2
    assert "Empty forest" in forest_html([], [], branches=0, active_tree=None, active_path=[])
