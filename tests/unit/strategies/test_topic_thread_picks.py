"""Picks: the newest turns, summaries and thread turns a TopicThread selection takes within a budget."""

from __future__ import annotations

import numpy as np
import pytest

from ctxmgmt.messages.context import Block
from ctxmgmt.strategies.topic_thread_picks import FILL, RETRIEVED, Picks
from ctxmgmt.strategies.topic_thread_slot import Slot


def summary(slot_id: int, tokens: int) -> tuple[Slot, Block]:
    return Slot(id=slot_id, turns=[slot_id]), Block("summary", turns=(slot_id,), text="s", tokens=tokens)


def test_fits_and_spend_count_down_the_budget():
    picks = Picks(10)
    assert picks.fits(10) and not picks.fits(11)
    picks.spend(4)
    assert picks.remaining == 6 and picks.fits(6) and not picks.fits(7)
    unbounded = Picks(None)
    unbounded.spend(10**9)
    assert unbounded.remaining is None and unbounded.fits(10**12)


def test_recent_turns_go_in_newest_first():
    picks = Picks(7)
    picks.take_recent([1, 2], costs=[5, 5, 5])
    assert picks.turns == {2} and picks.remaining == 2
    assert picks.dropped == ["recent turn 1"]
    assert picks.reasons == {}  # recent turns carry no relevance reason


def test_summaries_fit_the_budget_and_their_share_in_order():
    picks = Picks(100)
    taken = picks.take_summaries([summary(0, 30), summary(1, 25), summary(2, 10)], room=40)
    assert [s.id for s, _ in taken] == [0, 2]  # 30 + 25 is over the 40-token share
    assert picks.remaining == 60
    assert picks.dropped == ["summary of thread 1 (25 tokens)"]


def test_summaries_without_a_budget_or_a_share_are_all_taken():
    picks = Picks(None)
    candidates = [summary(0, 30), summary(1, 25)]
    assert picks.take_summaries(candidates, room=None) == candidates
    assert picks.dropped == []


def test_summaries_left_out_by_the_budget_itself():
    picks = Picks(20)
    assert picks.take_summaries([summary(0, 30), summary(1, 20)], room=None) == [summary(1, 20)]
    assert picks.remaining == 0


def test_thread_turns_most_relevant_first_at_most_per_thread():
    threads = [Slot(id=4, turns=[0, 1, 2]), Slot(id=9, turns=[3, 4])]
    relevance = np.array([0.9, 0.1, 0.5, 0.7, 0.2])
    picks = Picks(None)
    picks.take_thread_turns(threads, relevance, [1] * 5, per_thread=2)
    assert picks.turns == {0, 2, 3, 4}  # turn 1 is the third of thread 4
    assert picks.reasons[0] == "thread 4 (relevance 0.90)"
    assert picks.reasons[3] == "thread 9 (relevance 0.70)"
    assert picks.filled == [] and picks.dropped == []


def test_thread_turns_over_the_budget_are_dropped_by_name():
    threads = [Slot(id=4, turns=[0, 1, 2])]
    relevance = np.array([0.9, 0.8, 0.7])
    picks = Picks(5)
    picks.take_thread_turns(threads, relevance, [3, 4, 2], per_thread=3)
    # turn 0 (3 tokens) first, turn 1 (4) no longer fits, turn 2 (2) still does
    assert picks.turns == {0, 2} and picks.remaining == 0
    assert picks.dropped == ["turn 1 of thread 4"]


def test_turns_already_taken_are_not_candidates():
    threads = [Slot(id=0, turns=[0, 1, 2])]
    picks = Picks(None)
    picks.take_recent([2], costs=[1, 1, 1])
    picks.take_thread_turns(threads, np.array([0.1, 0.2, 0.9]), [1, 1, 1], per_thread=1)
    assert picks.turns == {1, 2}  # the best turn not yet shown
    assert picks.reasons == {1: "thread 0 (relevance 0.20)"}


def test_fill_turns_are_above_the_floor_marked_filled_and_never_reported_dropped():
    threads = [Slot(id=2, turns=[0, 1, 2])]
    relevance = np.array([0.9, 0.6, 0.1])
    picks = Picks(3)
    picks.take_thread_turns(threads, relevance, [2, 2, 1], per_thread=3, label=FILL, floor=0.5)
    assert picks.turns == {0}  # turn 1 does not fit, turn 2 is below the floor
    assert picks.filled == [0] and picks.dropped == []
    assert picks.reasons == {0: "fill, thread 2 (relevance 0.90)"}


@pytest.mark.parametrize("label", [RETRIEVED, FILL])
def test_ties_go_to_the_earlier_turn(label):
    picks = Picks(1)
    picks.take_thread_turns(
        [Slot(id=0, turns=[0, 1])], np.array([0.5, 0.5]), [1, 1], per_thread=2, label=label
    )
    assert picks.turns == {0}


def test_user_parts_first_then_replies_back_most_relevant_first():
    threads = [Slot(id=1, turns=[0, 1, 2])]
    relevance = np.array([0.9, 0.8, 0.1])
    parts = {0: 5, 1: 5}  # turns 0 and 1 are long: their user message alone costs 5
    picks = Picks(80, user_part=parts.get)
    picks.take_thread_turns(threads, relevance, [50, 50, 10], per_thread=3)
    assert picks.user_only == {0: 5, 1: 5} and picks.turns == {2}  # 5 + 5 + 10 spent
    picks.restore_replies(relevance, [50, 50, 10])
    assert picks.turns == {0, 2} and picks.user_only == {1: 5}  # turn 0's reply fits, then 1's does not
    assert picks.remaining == 80 - 50 - 5 - 10
