"""Slot: one topic thread as plain data; check_slot rejects a malformed restored slot."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.topic_thread_slot import Slot, check_slot


def slot(**fields) -> Slot:
    values = {
        "id": 3,
        "items": [["user: my cat is Miso", 0], ["user: she is three", 2]],
        "turns": [0, 2],
        "vector_sum": [1.0, 0.5, 0.0],
        "last_retrieved": 2,
        "created": 0,
        "revisions": 1,
    }
    values.update(fields)
    return Slot(**values)


def test_state_is_the_item_texts_in_the_order_written():
    assert slot().state == ["user: my cat is Miso", "user: she is three"]
    assert Slot(id=0).state == []


def test_to_dict_is_json_data_and_a_copy():
    original = slot()
    data = original.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert Slot(**data) == original
    data["items"][0][0] = "changed"
    data["turns"].append(5)
    assert original.items[0][0] == "user: my cat is Miso" and original.turns == [0, 2]


def test_defaults_are_an_empty_thread_opened_at_turn_zero():
    empty = Slot(id=7)
    assert (empty.items, empty.turns, empty.vector_sum) == ([], [], [])
    assert (empty.last_retrieved, empty.created, empty.revisions) == (0, 0, 0)
    assert Slot(id=1).items is not Slot(id=2).items  # no shared default list


def test_a_well_formed_slot_passes():
    check_slot(slot(), dim=3, turns=3)
    check_slot(slot(), dim=None, turns=3)  # dimension not known yet


@pytest.mark.parametrize(
    ("fields", "dim", "turns", "message"),
    [
        ({"vector_sum": [1.0, 2.0]}, 3, 3, "vector sum"),
        ({"vector_sum": [1.0, float("nan"), 0.0]}, 3, 3, "not finite"),
        ({"vector_sum": [[1.0], [2.0]]}, None, 3, "vector sum"),
        ({"vector_sum": ["a", "b", "c"]}, 3, 3, "malformed"),
        ({"turns": ["x"]}, 3, 3, "malformed"),
        ({"turns": []}, 3, 3, "covers turns"),
        ({"turns": [0, 3]}, 3, 3, "covers turns outside 0..2"),
        ({"turns": [-1]}, 3, 3, "covers turns"),
        ({"items": [["text"]]}, 3, 3, "pairs"),
        ({"items": [[5, 0]]}, 3, 3, "pairs"),
        ({"items": [("text", 0)]}, 3, 3, "pairs"),
    ],
)
def test_a_malformed_slot_is_corrupt_state(fields, dim, turns, message):
    with pytest.raises(CorruptStateError, match=message):
        check_slot(slot(**fields), dim=dim, turns=turns)
