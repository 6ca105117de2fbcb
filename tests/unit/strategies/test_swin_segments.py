"""SWin's summary messages (segments), item priorities, the fewest items dropped, Fitted."""

from __future__ import annotations

import pytest

from ctxmgmt.strategies.swin import SWinStrategy
from ctxmgmt.strategies.swin_memory import MemoryItem
from ctxmgmt.strategies.swin_segments import (
    HEADER,
    QUERY_WEIGHT,
    Fitted,
    fit_items,
    priorities,
    summary_segments,
)
from tests.helpers import words


def item(k: int, session: int = 0, text: str | None = None) -> MemoryItem:
    return MemoryItem(text or f"Item {k} about Paris.", session, 2 * k, 2 * k + 1, k, k)


def test_segments_hold_size_items_each_and_the_first_starts_with_the_header():
    strategy = SWinStrategy(token_counter=words)
    items = [item(k) for k in range(5)]
    blocks = summary_segments(strategy, items, 2, session=0)
    assert [b.text.count("- Item") for b in blocks] == [2, 2, 1]
    assert blocks[0].text.splitlines()[0] == HEADER
    assert not blocks[1].text.startswith(HEADER)
    assert blocks[1].text == "- Item 2 about Paris.\n- Item 3 about Paris."
    assert blocks[0].turns == (0, 1, 2, 3) and blocks[2].turns == (8, 9)
    assert all(b.kind == "summary" and b.role == strategy.memory_role for b in blocks)
    assert blocks[1].reason == "SWin memory: items 3-4 of 5, windows [2, 3]"
    assert all(b.tokens == strategy.memory_tokens(b.text) for b in blocks)


def test_a_new_item_changes_only_the_last_segment():
    strategy = SWinStrategy(token_counter=words)
    items = [item(k) for k in range(5)]
    before = summary_segments(strategy, items, 2, session=0)
    after = summary_segments(strategy, [*items, item(5)], 2, session=0)
    assert [(b.text, b.turns) for b in after[:2]] == [(b.text, b.turns) for b in before[:2]]
    assert after[2].text == before[2].text + "\n- Item 5 about Paris."


def test_segments_show_the_turns_of_the_current_session_only():
    strategy = SWinStrategy(token_counter=words)
    blocks = summary_segments(strategy, [item(0, session=0), item(1, session=1)], 12, session=1)
    assert blocks[0].turns == (2, 3)
    assert summary_segments(strategy, [], 12, session=0) == []


def test_priorities_add_the_weighted_query_overlap_to_the_score():
    items = [item(0, text="Alice sails to Oslo."), item(1, text="Bob bakes bread.")]
    scores = {id(items[0]): (0.2, 1.0, 0.0), id(items[1]): (0.3, 1.0, 0.1)}
    got = priorities("Where does Alice sail?", items, scores)
    assert got[id(items[1])] == pytest.approx(0.3)  # no word in common
    assert got[id(items[0])] > 0.2 and got[id(items[0])] <= 0.2 + QUERY_WEIGHT


def one_at_a_time(items, priority, room, tokens):
    """The rule stated directly: drop the lowest priority (ties: earlier window) until it fits."""
    kept, dropped = list(items), []
    while kept and tokens(kept) > room:
        victim = min(kept, key=lambda i: (priority[id(i)], i.window))
        kept.remove(victim)
        dropped.append(victim)
    return kept, dropped


@pytest.mark.parametrize("room", [-1, 0, 3, 7, 12, 20, 40, 100])
def test_fit_items_drops_what_dropping_one_at_a_time_drops(room):
    items = [item(k, text=" ".join(["word"] * (k % 4 + 1))) for k in range(10)]
    priority = {id(i): (i.window * 7 % 5) / 5 for i in items}  # ties included

    def tokens(kept):
        return sum(len(i.text.split()) + 1 for i in kept)

    kept, dropped = fit_items(items, priority, room, tokens)
    expected_kept, expected_dropped = one_at_a_time(items, priority, room, tokens)
    if room < 0:
        assert kept == [] and len(dropped) == len(items)
    else:
        assert kept == expected_kept and dropped == expected_dropped
    assert {id(i) for i in kept} | {id(i) for i in dropped} == {id(i) for i in items}


def test_fit_items_keeps_everything_that_fits_and_renders_few_times():
    items = [item(k) for k in range(64)]
    calls = []

    def tokens(kept):
        calls.append(len(kept))
        return len(kept)

    kept, dropped = fit_items(items, {id(i): 0.0 for i in items}, 40, tokens)
    assert len(kept) == 40 and [i.window for i in dropped] == list(range(24))
    assert len(calls) <= 8  # bisection: log2(64) + 1 renders, not one per dropped item


def test_fitted_explains_what_the_budget_left_out():
    items = [item(0, text="Alice sails to Oslo every single summer with Bob and Carol.")]
    fitted = Fitted(items, {}, {id(items[0]): 0.25}, [], [3, 4])
    assert fitted.recall is None and fitted.drop_lines() == []
    fitted.dropped_items = list(items)
    fitted.dropped_turns = [1, 2]
    assert fitted.drop_lines() == [
        "dropped for the budget: 'Alice sails to Oslo every single summ...' (priority 0.25)",
        "dropped for the budget: turns [1, 2]",
    ]
