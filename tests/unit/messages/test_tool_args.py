"""Tool-call arguments bounded in depth and size (``ctxmgmt.messages.tool_args``).

End-to-end checks (deep and huge arguments through the strategies and adapters) are in
``tests/integration/test_tool_call_args.py``.
"""

from __future__ import annotations

import json
import time

from ctxmgmt.messages.tool_args import (
    CUT_CHARS,
    CUT_KEY,
    MAX_ARGS_CHARS,
    MAX_ARGS_DEPTH,
    SIZE_KEY,
    args_snapshot,
    bound_call,
    head_json,
    is_cut,
    measure,
)


def nested(depth: int) -> object:
    """A list nested ``depth`` levels deep, built without recursion."""
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_measure_estimates_json_length_and_depth() -> None:
    value = {"city": "Paris", "days": [1, 2, 3]}
    chars, depth = measure(value)
    assert depth == 2
    assert abs(chars - len(json.dumps(value))) <= 10
    assert measure("x") == (3, 0)


def test_measure_walks_any_depth_without_recursion() -> None:
    assert measure(nested(5_000))[1] == 5_000  # deeper than Python's recursion limit


def test_a_small_call_is_returned_as_the_same_dict() -> None:
    call = {"id": "c1", "name": "weather", "args": {"city": "Paris"}}
    assert bound_call(call) is call
    assert not is_cut(call)


def test_a_deep_call_is_cut_to_a_head_and_its_size() -> None:
    call = {"id": "c1", "name": "f", "args": nested(MAX_ARGS_DEPTH + 5)}
    cut = bound_call(call)
    assert is_cut(cut) and cut["id"] == "c1" and cut["name"] == "f"
    assert set(cut["args"]) == {CUT_KEY}
    assert "[...]" in cut["args"][CUT_KEY]
    assert cut[SIZE_KEY] == measure(call["args"])[0]
    assert call["args"] == nested(MAX_ARGS_DEPTH + 5)  # the caller's call is left alone


def test_a_large_call_keeps_at_most_the_cut_head() -> None:
    call = {"id": "c2", "name": "write_file", "args": {"text": "z" * (MAX_ARGS_CHARS * 2)}}
    cut = bound_call(call)
    head = cut["args"][CUT_KEY]
    assert is_cut(cut) and head.endswith(" ...") and len(head) <= CUT_CHARS + 4
    assert cut[SIZE_KEY] > MAX_ARGS_CHARS


def test_bounding_is_idempotent() -> None:
    cut = bound_call({"id": "c3", "name": "f", "args": {"text": "z" * (MAX_ARGS_CHARS + 1)}})
    assert bound_call(cut) is cut


def test_head_json_writes_json_and_names_what_json_cannot_write() -> None:
    assert head_json({"a": [1, 2.5, None, True]}) == json.dumps({"a": [1, 2.5, None, True]})
    assert head_json({"when": object()}) == '{"when": "<object>"}'
    assert head_json("x" * 100, chars=10).endswith(" ...")


def test_equal_structures_give_equal_snapshots_and_an_edit_changes_them() -> None:
    args = {"query": "flights", "filters": {"max_price": 300, "tags": ["direct"]}}
    same = json.loads(json.dumps(args))
    assert args_snapshot(args) == args_snapshot(same)
    same["filters"]["tags"].append("morning")
    assert args_snapshot(args) != args_snapshot(same)


def test_a_long_string_is_snapshotted_by_length_and_hash() -> None:
    text = "q" * 10_000
    (entry,) = args_snapshot(text)
    assert entry == (len(text), hash(text))


def test_bounded_call_keeps_small_arguments_and_cuts_deep_or_large_ones() -> None:
    small = {"id": "c", "name": "f", "args": {"city": "Lisbon"}}
    assert bound_call(small) is small
    deep = bound_call({"id": "c", "name": "f", "args": nested(100_000)})  # far past any stack
    assert deep[SIZE_KEY] > 0 and measure(deep["args"])[1] == 1
    assert deep["args"][CUT_KEY].startswith("[" * MAX_ARGS_DEPTH)
    blob = "x" * 20_000_000
    big = bound_call({"id": "c", "name": "f", "args": {"blob": blob}})
    assert big[SIZE_KEY] >= len(blob) and len(big["args"][CUT_KEY]) <= 4_100
    assert bound_call(big) is big  # idempotent: a saved message loads the same
    assert head_json({"a": [1, 2.5, None, True, "x"]}) == '{"a": [1, 2.5, null, true, "x"]}'


def test_snapshots_of_deep_and_huge_arguments_are_bounded_and_see_edits() -> None:
    def payload() -> object:  # nested 900 deep, as a model's JSON would be
        return json.loads("[" * 900 + "1" + "]" * 900)

    args = {"payload": payload(), "blob": "x" * 20_000_000, "city": "Lisbon"}
    first = args_snapshot(args)
    assert args_snapshot(json.loads(json.dumps({"payload": payload(), "city": "Lisbon"}))) != first
    copy = {"payload": payload(), "blob": "x" * 20_000_000, "city": "Lisbon"}
    assert args_snapshot(copy) == first and len(first) <= 2_100
    args["city"] = "Porto"
    assert args_snapshot(args) != first
    assert args_snapshot({"a": [1, "b"]}) == args_snapshot({"a": [1, "b"]})
    assert args_snapshot({"a": 1}) != args_snapshot({"a": True})
    start = time.perf_counter()
    for _ in range(100):
        args_snapshot(copy)
    assert time.perf_counter() - start < 2  # the 20 MB string's hash is cached, never re-read
