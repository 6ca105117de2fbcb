"""Runs of consecutive turn indices and their labels (``ctxmgmt.messages.spans``)."""

from __future__ import annotations

import pytest

from ctxmgmt.messages import context
from ctxmgmt.messages.spans import runs, span_label


def test_runs_split_ascending_indices_where_they_jump():
    assert runs([0, 1, 2, 5, 7, 8]) == [[0, 1, 2], [5], [7, 8]]


def test_runs_of_nothing_and_of_one_index():
    assert runs([]) == []
    assert runs([4]) == [[4]]


def test_a_repeated_index_starts_a_new_run():
    assert runs([1, 1, 2]) == [[1], [1, 2]]


@pytest.mark.parametrize(
    ("turns", "label"),
    [([0, 1, 2, 5], "0-2,5"), ([5, 0, 2, 1], "0-2,5"), ([3], "3"), ([], "-"), ((9, 10), "9-10")],
)
def test_span_label_sorts_and_joins_runs(turns, label):
    assert span_label(turns) == label


def test_span_label_takes_a_separator():
    assert span_label([0, 1, 4, 6, 7], sep=" ") == "0-1 4 6-7"


def test_the_names_stay_importable_from_the_context_module():
    assert context.span_label is span_label
