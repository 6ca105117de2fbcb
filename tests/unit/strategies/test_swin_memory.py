"""SWinMemory: merging windows (dedup, reinforcement), forgetting, explanations, restoring."""

from __future__ import annotations

import json

import pytest

from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.swin import SWinConfig
from ctxmgmt.strategies.swin_memory import MemoryItem, SWinMemory, check_restored, item_features, shorten


def memory(**params) -> SWinMemory:
    return SWinMemory(SWinConfig(**params), forgotten_cap=200)


def merge(m: SWinMemory, texts: list[str], start: int = 0, end: int = 5, session: int = 0) -> int:
    """Merge ``texts`` as the next window; its serial."""
    serial = m.new_serial()
    m.merge(texts, session, serial, start, end, fallback=False)
    return serial


def test_serials_count_up_and_items_keep_their_provenance():
    m = memory()
    assert [m.new_serial(), m.new_serial()] == [0, 1]
    m.merge(["Alice moved to Oslo."], 0, 1, 4, 9, fallback=False)
    assert m.items == [MemoryItem("Alice moved to Oslo.", 0, 4, 9, 1, 1)]
    assert m.last_serial == 1 and m.serial == 2
    assert m.log == [
        {
            "window": 1,
            "session": 0,
            "turns": [4, 9],
            "added": ["Alice moved to Oslo."],
            "merged": [],
            "forgotten": [],
            "fallback": False,
        }
    ]


def test_whitespace_is_collapsed_and_blank_items_are_skipped():
    m = memory()
    merge(m, ["  Bob   sails\n to Rome. ", "", "   "])
    assert [i.text for i in m.items] == ["Bob sails to Rome."]


def test_a_near_duplicate_reinforces_the_stored_item():
    m = memory()
    merge(m, ["Alice lives in Paris with her cat Miso."])
    serial = merge(m, ["Alice lives in Paris with her cat Miso!"], start=4, end=9)
    assert len(m.items) == 1
    item = m.items[0]
    assert item.hits == 2 and item.last_window == serial and item.window == 0
    merged = m.log[-1]["merged"][0]
    assert merged["into"] == item.text and merged["similarity"] == 1.0
    assert m.log[-1]["added"] == []


def test_items_with_different_numbers_both_stay():
    m = memory()
    merge(m, ["Bob is 40 years old."])
    merge(m, ["Bob is 41 years old."])
    assert [i.text for i in m.items] == ["Bob is 40 years old.", "Bob is 41 years old."]


def test_below_the_threshold_an_item_is_new():
    m = memory(dedup_threshold=1.0)
    merge(m, ["Alice lives in Paris with her cat Miso."])
    merge(m, ["Alice lives in Paris with her dog Rex."])
    assert len(m.items) == 2


def test_score_mixes_recency_and_salience():
    m = memory(half_life=2.0, recency_weight=0.25)
    merge(m, ["a remark about clouds"])
    for _ in range(4):
        merge(m, [f"remark {m.serial}"])
    score, recency, salience = m.score(m.items[0])
    assert recency == pytest.approx(0.5 ** (4 / 2.0))  # four windows since it was seen
    assert score == pytest.approx(0.25 * recency + 0.75 * salience)


def test_over_gamma_the_lowest_score_goes_down_to_gamma_minus_the_batch():
    m = memory(gamma=4, forget_batch=2, recency_weight=1.0)
    for k in range(5):
        merge(m, [f"remark number {k}"], start=k, end=k)
    # the fifth window went over gamma=4: down to 4 - 2 = 2 items, the oldest gone first
    assert [i.text for i in m.items] == ["remark number 3", "remark number 4"]
    assert [f["text"] for f in m.forgotten] == ["remark number 0", "remark number 1", "remark number 2"]
    record = m.forgotten[0]
    assert record["window"] == 4 and record["turns"] == [0, 0] and "gamma=4" in record["reason"]
    assert m.log[-1]["forgotten"] == [f["text"] for f in m.forgotten]


def test_at_most_half_of_gamma_goes_at_once():
    m = memory(gamma=3, forget_batch=8, recency_weight=1.0)
    for k in range(4):
        merge(m, [f"remark number {k}"])
    assert len(m.items) == 2  # 3 - min(8, 3 // 2)


def test_salient_items_outlive_plain_ones():
    m = memory(gamma=2, forget_batch=0)
    merge(m, ["On 3 May 2023 Alice met Bob and Carol in Paris at 10 am."])
    merge(m, ["a remark about boats"])
    merge(m, ["a remark about clouds"])
    assert [i.text for i in m.items][0].startswith("On 3 May 2023")
    assert [f["text"] for f in m.forgotten] == ["a remark about boats"]


def test_the_forgotten_log_keeps_its_cap():
    m = SWinMemory(SWinConfig(gamma=1, forget_batch=0), forgotten_cap=2)
    for k in range(5):
        merge(m, [f"remark number {k}"])
    assert len(m.forgotten) == 2 and m.forgotten.start == 2


def test_chronological_orders_by_session_then_turn_then_window():
    m = memory()
    m.items = [
        MemoryItem("c", 1, 0, 5, 7, 7),
        MemoryItem("b", 0, 4, 9, 2, 2),
        MemoryItem("a", 0, 4, 9, 1, 1),
        MemoryItem("z", 0, 0, 5, 3, 3),
    ]
    assert [i.text for i in m.chronological()] == ["z", "a", "b", "c"]


def test_explain_lines_name_windows_merges_and_forgetting():
    m = memory(gamma=1, forget_batch=0, recency_weight=0.5)
    merge(m, ["Alice lives in Paris."])
    merge(m, ["Alice lives in Paris!", "Bob owns a boat."], start=4, end=9)
    lines = m.explain_lines()
    assert lines[0] == "window 0 (session 0, turns 0-5): +1 items"
    assert lines[2] == "window 1 (session 0, turns 4-9): +1 items, 1 duplicates reinforced"
    assert any(line.startswith("    = 'Alice lives in Paris!' ~ ") for line in lines)
    assert lines[-1].startswith("forgot ") and "0.5 * recency" in lines[-1] and "gamma=1" in lines[-1]
    assert m.explain_lines(last=1)[0].startswith("window 1 ")


def test_scored_rounds_to_four_places_and_is_json():
    item = MemoryItem("Bob sails.", 0, 0, 5, 0, 0, hits=2)
    row = item.scored((0.123456, 1.0, 0.333333))
    assert row == {**item.to_dict(), "score": 0.1235, "recency": 1.0, "salience": 0.3333}
    json.dumps(row)


def test_item_features_and_shorten():
    words, digits = item_features("Bob turned 41 on 3 May.")
    assert digits == frozenset({"41", "3"}) and {"bob", "41", "may"} <= words
    assert shorten("x" * 10, 10) == "x" * 10
    assert shorten("x" * 11, 10) == "xxxxxxx..."


def test_restore_round_trips_the_stored_shape():
    m = memory(gamma=2, forget_batch=0)
    for k in range(3):
        merge(m, [f"remark number {k}"], start=k, end=k + 1)
    state = json.loads(
        json.dumps(
            {
                "items": [i.to_dict() for i in m.items],
                "windows": m.log,
                "forgotten": list(m.forgotten),
                "serial": m.serial,
                "last_serial": m.last_serial,
                "session": 0,
            }
        )
    )
    other = memory(gamma=2, forget_batch=0)
    other.restore(state, turns=4)
    assert other.items == m.items and other.log == m.log and list(other.forgotten) == list(m.forgotten)
    assert (other.serial, other.last_serial) == (m.serial, m.last_serial)


@pytest.mark.parametrize(
    ("items", "windows"),
    [
        ([MemoryItem("x", 0, 0, 9, 0, 0)], []),  # past the session's 4 turns
        ([MemoryItem("x", 0, 3, 2, 0, 0)], []),  # start after end
        ([], [{"session": 0, "turns": [0, 7]}]),
        ([], [{"session": 0, "turns": [True, 1]}]),
        ([], [{"session": 0, "turns": "0-1"}]),
    ],
)
def test_check_restored_refuses_turns_that_do_not_exist(items, windows):
    with pytest.raises(CorruptStateError):
        check_restored(items, windows, turns=4, session=0)


def test_check_restored_lets_earlier_sessions_cover_any_turns():
    check_restored(
        [MemoryItem("x", 0, 10, 20, 0, 0)], [{"session": 0, "turns": [10, 20]}], turns=2, session=1
    )


def test_restore_refuses_a_field_of_the_wrong_type():
    state = {
        "items": [{**MemoryItem("x", 0, 0, 1, 0, 0).to_dict(), "hits": "many"}],
        "windows": [],
        "forgotten": [],
        "serial": 1,
        "last_serial": 0,
        "session": 0,
    }
    with pytest.raises(CorruptStateError):
        memory().restore(state, turns=4)
