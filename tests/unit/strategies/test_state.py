"""Plain-data state of a strategy and its JSON form (``ctxmgmt.strategies.state``)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ctxmgmt.strategies.state import CappedLog, jsonable, plain_fields


def test_a_capped_log_keeps_its_newest_entries_and_counts_what_fell_off() -> None:
    log = CappedLog(3, ["a", "b"])
    for entry in "cde":
        log.append(entry)
    assert list(log) == ["c", "d", "e"] and log.start == 2 and len(log) == 3
    assert log[0] == "c" and log[-1] == "e" and log[1:] == ["d", "e"]


def test_initial_entries_beyond_the_cap_are_trimmed() -> None:
    log = CappedLog(2, range(5), start=10)
    assert list(log) == [3, 4] and log.start == 13


def test_a_capped_log_keeps_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        CappedLog(0)


def test_restored_keeps_a_logs_numbering_and_numbers_a_list_from_zero() -> None:
    log = CappedLog(2, "abc")
    assert CappedLog.restored(2, log) == log
    assert CappedLog.restored(2, ["x", "y", "z"]).start == 1


def test_map_converts_entries_and_keeps_cap_and_numbering() -> None:
    log = CappedLog(2, [1, 2, 3])
    doubled = log.map(lambda n: n * 2)
    assert list(doubled) == [4, 6] and doubled.start == log.start and doubled.cap == 2


def test_equality_compares_numbering_and_entries_and_logs_are_unhashable() -> None:
    assert CappedLog(3, [1, 2]) == CappedLog(5, [1, 2])
    assert CappedLog(3, [1, 2]) != CappedLog(3, [1, 2], start=1)
    assert CappedLog(3, [1]) != [1]
    with pytest.raises(TypeError):
        hash(CappedLog(1))


@dataclasses.dataclass(frozen=True)
class Inner:
    name: str
    scores: tuple[float, ...]


@dataclasses.dataclass
class Outer:
    turns: list[int]
    inner: Inner
    extra: dict[str, list[Inner]]


def sample() -> Outer:
    return Outer([1, 2], Inner("a", (0.5,)), {"k": [Inner("b", ())]})


def test_plain_fields_is_asdict() -> None:
    value = sample()
    assert plain_fields(value) == dataclasses.asdict(value)


def test_plain_fields_copies_lists_and_dicts() -> None:
    value = sample()
    plain = plain_fields(value)
    plain["turns"].append(3)
    plain["extra"]["k"].clear()
    assert value.turns == [1, 2] and len(value.extra["k"]) == 1


def test_jsonable_turns_arrays_dataclasses_and_logs_into_json_data() -> None:
    state = {
        "vectors": np.array([[1.0, 2.0]], dtype=np.float32),
        "count": np.int64(3),
        "log": CappedLog(2, [Inner("x", (1.0,)), Inner("y", ())]),
        "pair": (1, "a"),
    }
    data = jsonable(state)
    assert data == {
        "vectors": [[1.0, 2.0]],
        "count": 3,
        "log": [{"name": "x", "scores": [1.0]}, {"name": "y", "scores": []}],
        "pair": [1, "a"],
    }
    assert json.loads(json.dumps(data)) == data
