"""SlotTable: scores, retrieval, insert vs revise, re-compression, split, merge, evict, state."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ctxmgmt import Message, Turn
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.state import jsonable
from ctxmgmt.strategies.topic_thread import TopicThreadConfig
from ctxmgmt.strategies.topic_thread_slot_table import EVENTS, SlotTable, two_means, unit

DIM = 6


def axis(*weights: float) -> np.ndarray:
    """A unit vector with ``weights`` on the first axes (a turn's embedding)."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(weights)] = weights
    return (vector / np.linalg.norm(vector)).astype(np.float32)


CAT, CAR, TAX = axis(1), axis(0, 1), axis(0, 0, 1)


class Lines:
    """A compressor that keeps every line, newest first, and records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, previous, text):
        self.calls.append((list(previous), text))
        return [line for line in reversed(text.splitlines()) if line]


class Conversation:
    """A SlotTable fed turns the way TopicThreadStrategy feeds it."""

    def __init__(self, **rules) -> None:
        rules.setdefault("centre", False)
        rules.setdefault("alpha", 0.0)
        self.table = SlotTable(TopicThreadConfig(**rules), log_entries=50)
        self.vectors: list[np.ndarray] = []
        self.compress = Lines()

    def add(self, *turns: tuple[str, np.ndarray]) -> None:
        for text, vector in turns:
            turn = Turn(len(self.vectors), (Message("user", text),))
            self.vectors.append(vector)
            self.table.add(turn, vector, turn_vectors=self.vectors, compress=self.compress)


def test_insert_on_a_topic_shift_and_revise_on_a_continuation():
    talk = Conversation(tau=0.5)
    talk.add(("my cat Miso", CAT), ("the cat sleeps", CAT), ("my car", CAR))
    table = talk.table
    assert [s.turns for s in table.slots] == [[0, 1], [2]]
    assert [s.id for s in table.slots] == [0, 1] and table.next_id == 2
    assert table.slots[0].items == [["user: my cat Miso", 0], ["user: the cat sleeps", 1]]
    assert table.slots[0].revisions == 1
    assert np.allclose(table.slots[0].vector_sum, CAT * 2)
    assert [e["event"] for e in table.log] == ["insert", "revise", "insert"]
    assert table.log[1] == {"event": "revise", "turn": 1, "slot": 0, "peak": 1.0, "added": 1}
    assert table.log[0]["peak"] is None  # the first slot had nothing to be compared with
    assert table.counts == {"insert": 2, "revise": 1, "split": 0, "merge": 0, "evict": 0, "recompress": 0}
    assert table.growth == [1, 1, 2] and len(table) == 2
    # the revision is conditioned on the state
    assert talk.compress.calls[1] == (["user: my cat Miso"], "user: the cat sleeps")


def test_score_is_cosine_times_decay_since_the_last_retrieval():
    talk = Conversation(tau=0.5, alpha=0.1)
    talk.add(("cat", CAT), ("car", CAR))
    # turn 1 matched nothing: the top-1 fallback retrieved the cat slot at turn 1
    assert [s.last_retrieved for s in talk.table.slots] == [1, 1]
    (score, cosine, decay), (other, _, _) = talk.table.scores(axis(1, 1), now=4)
    assert cosine == pytest.approx(math.sqrt(0.5))
    assert decay == pytest.approx(math.exp(-0.1 * 3))
    assert score == pytest.approx(cosine * decay) == pytest.approx(other)
    assert SlotTable(TopicThreadConfig(), log_entries=1).scores(CAT, now=0) == []


def test_retrieve_above_tau_best_first_at_most_top_k_else_the_best_one():
    table = SlotTable(TopicThreadConfig(tau=0.5, top_k=2), log_entries=1)
    scores = [(0.9, 0.9, 1.0), (0.6, 0.6, 1.0), (0.7, 0.7, 1.0), (0.1, 0.1, 1.0)]
    assert table.retrieve(scores) == [0, 2]
    assert table.retrieve([(0.2, 0.2, 1.0), (0.4, 0.4, 1.0), (0.4, 0.4, 1.0)]) == [1]  # ties: first
    assert table.retrieve([]) == []


def test_centre_subtracts_the_mean_turn_embedding():
    talk = Conversation(centre=True)
    talk.add(("cat", CAT), ("car", CAR))
    assert np.allclose(talk.table.mean(), (CAT + CAR) / 2)
    assert np.array_equal(Conversation(centre=False).table.mean(), np.zeros(1))
    plain = Conversation(centre=False, tau=0.5)
    shared = [("cat", axis(1, 0, 0, 3)), ("car", axis(0, 1, 0, 3))]
    plain.add(*shared)
    centred = Conversation(centre=True, tau=0.5)
    centred.add(*shared)
    assert len(plain.table) == 1  # the common direction makes every turn "continue" the first
    assert len(centred.table) == 2


def test_a_long_state_is_recompressed_keeping_source_turns():
    talk = Conversation(tau=0.5, state_items=2)
    talk.add(("apples", CAT), ("bananas", CAT), ("cherries", CAT))
    (slot,) = talk.table.slots
    # re-compression keeps the first state_items new items, each with its closest old item's turn
    assert slot.items == [["user: bananas", 1], ["user: cherries", 2]]
    assert talk.compress.calls[-1] == ([], "user: apples\nuser: bananas\nuser: cherries")
    assert talk.table.log[-1] == {"event": "recompress", "turn": 2, "slot": 0, "before": 3, "after": 2}


def test_an_empty_recompression_keeps_the_state():
    talk = Conversation(tau=0.5, state_items=1)
    talk.compress = lambda previous, text: [] if "\n" in text else [text]
    talk.add(("apples", CAT), ("bananas", CAT))
    assert talk.table.slots[0].state == ["user: apples", "user: bananas"]
    assert talk.table.counts["recompress"] == 0


def test_a_thread_over_max_slot_turns_is_split_by_two_means():
    talk = Conversation(tau=0.3, max_slot_turns=4)
    food, vet = axis(1, 0, 1), axis(1, 0, 0, 1)
    talk.add(("cat food", food), ("cat food", food), ("cat vet", vet), ("cat vet", vet), ("cat vet", vet))
    table = talk.table
    assert [(s.id, s.turns) for s in table.slots] == [(0, [0, 1]), (1, [2, 3, 4])]
    assert table.log[-1] == {
        "event": "split",
        "turn": 4,
        "slot": 0,
        "into": [0, 1],
        "sizes": [2, 3],
        "rule": "2-means",
    }
    first, second = table.slots
    assert {t for _, t in first.items} == {0, 1} and {t for _, t in second.items} == {2, 3, 4}
    assert np.allclose(second.vector_sum, vet * 3)
    assert (first.revisions, second.revisions) == (4, 0)
    assert first.last_retrieved == second.last_retrieved == 4
    assert (first.created, second.created) == (0, 2) and table.next_id == 2


def test_a_thread_of_identical_turns_is_split_in_chronological_halves():
    talk = Conversation(tau=0.3, max_slot_turns=4)
    talk.add(*[("cat", CAT)] * 5)
    assert [s.turns for s in talk.table.slots] == [[0, 1], [2, 3, 4]]
    assert talk.table.log[-1]["rule"] == "chronological halves"


def test_above_max_slots_the_most_similar_pair_merges():
    talk = Conversation(tau=0.9, max_slots=2)
    talk.add(("cat", CAT), ("car", CAR), ("cat kitten", axis(1, 0, 0, 0, 1)))
    table = talk.table
    assert [(s.id, s.turns) for s in table.slots] == [(0, [0, 2]), (1, [1])]
    merge = table.log[-1]
    assert (merge["event"], merge["slot"], merge["merged"]) == ("merge", 0, 2)
    assert merge["similarity"] == pytest.approx(math.sqrt(0.5), abs=1e-4)
    assert table.slots[0].revisions == 1 and table.counts["merge"] == 1


def test_when_no_pair_fits_the_stalest_slot_is_evicted():
    talk = Conversation(tau=0.5, max_slots=2, max_slot_turns=2)
    talk.add(("cat a", CAT), ("cat b", CAT), ("car a", CAR), ("car b", CAR), ("tax", axis(0, 0.1, 1)))
    table = talk.table
    assert [s.turns for s in table.slots] == [[2, 3], [4]]
    assert table.log[-1] == {"event": "evict", "turn": 4, "slot": 0, "turns": "0-1", "last_retrieved": 2}
    assert table.counts["evict"] == 1 and table.counts["merge"] == 0
    assert table.growth == [1, 1, 2, 2, 2]


def test_describe_and_explain_every_slot():
    talk = Conversation(tau=0.5, alpha=0.5)
    talk.add(("cat", CAT), ("car", CAR), ("tax", TAX))
    scores = talk.table.scores(CAR, now=3)
    retrieved = talk.table.retrieve(scores)
    rows = talk.table.describe(scores, retrieved, now=3)
    assert [r["slot"] for r in rows] == [0, 1, 2] and [r["retrieved"] for r in rows] == [False, True, False]
    assert rows[1] == {
        "slot": 1,
        "turns": "1",
        "size": 1,
        "items": 1,
        "score": round(math.exp(-1.0), 4),
        "cosine": 1.0,
        "decay": round(math.exp(-1.0), 4),
        "since_retrieved": 2,
        "retrieved": True,
    }
    json.dumps(rows)
    lines = talk.table.explain(rows, fallback=True)
    counts = "3 insert, 0 revise, 0 split, 0 merge, 0 evict, 0 recompress"
    assert lines[0] == f"3 threads (tau=0.5, alpha=0.5); write-back: {counts}"
    assert lines[1].endswith("(top-1 fallback)")
    assert lines[2].startswith(
        "* thread 1 turns 1 (1 turns, 1 items): score 0.368 = cos 1.000 x exp(-0.5 x 2) = decay 0.368"
    )
    assert len(lines) == 5 and not talk.table.explain(rows, fallback=False)[1].endswith("fallback)")


def test_state_round_trip_then_the_same_write_back():
    talk = Conversation(tau=0.5, max_slots=2, state_items=2)
    talk.add(("cat a", CAT), ("car a", CAR), ("cat b", CAT), ("tax a", TAX), ("cat c", CAT))
    state = jsonable(talk.table.to_state())
    assert list(state) == ["slots", "next_id", "log", "counts", "growth"]
    restored = SlotTable(
        TopicThreadConfig(tau=0.5, max_slots=2, state_items=2, centre=False, alpha=0.0), log_entries=50
    )
    restored.load(state, talk.vectors, dim=DIM)
    assert jsonable(restored.to_state()) == state
    turn = Turn(5, (Message("user", "car b"),))
    talk.vectors.append(CAR)
    for table in (talk.table, restored):
        table.add(turn, CAR, turn_vectors=talk.vectors, compress=Lines())
    assert jsonable(restored.to_state()) == jsonable(talk.table.to_state())


def test_a_state_without_log_counts_or_growth_loads():
    table = SlotTable(TopicThreadConfig(), log_entries=5)
    table.load(
        {"slots": [{"id": 0, "items": [["x", 0]], "turns": [0], "vector_sum": CAT.tolist()}], "next_id": 1},
        [CAT],
        dim=DIM,
    )
    assert [s.turns for s in table.slots] == [[0]] and table.next_id == 1
    assert table.counts == dict.fromkeys(EVENTS, 0) and table.growth == [] and list(table.log) == []


def test_the_log_keeps_its_newest_entries():
    talk = Conversation(tau=0.5)
    talk.table = SlotTable(TopicThreadConfig(tau=0.5, centre=False), log_entries=2)
    talk.add(("cat", CAT), ("car", CAR), ("tax", TAX))
    assert [e["turn"] for e in talk.table.log] == [1, 2] and talk.table.log.start == 1
    assert talk.table.counts["insert"] == 3


@pytest.mark.parametrize(
    "change",
    [
        {"slots": [{"id": 0, "items": [], "turns": [4], "vector_sum": CAT.tolist()}]},
        {"slots": [{"id": 0, "items": [], "turns": [0], "vector_sum": [1.0]}]},
        {"counts": {"insert": "2"}},
        {"counts": {"insert": True}},
    ],
)
def test_a_corrupt_state_restores_nothing(change):
    state = {
        "slots": [{"id": 0, "items": [["x", 0]], "turns": [0], "vector_sum": CAT.tolist()}],
        "next_id": 1,
    }
    table = SlotTable(TopicThreadConfig(), log_entries=5)
    with pytest.raises(CorruptStateError):
        table.load({**state, **change}, [CAT], dim=DIM)
    assert table.slots == [] and table.next_id == 0 and table.counts == dict.fromkeys(EVENTS, 0)
    assert np.array_equal(table.mean(), np.zeros(1))


def test_two_means_and_unit():
    rows = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    labels, rule = two_means(rows)
    assert labels.tolist() == [0, 0, 1, 1] and rule == "2-means"
    labels, rule = two_means(np.ones((5, 2)))
    assert labels.tolist() == [0, 0, 1, 1, 1] and rule == "chronological halves"
    assert np.allclose(unit(np.array([3.0, 4.0])), [0.6, 0.8])
    assert np.array_equal(unit(np.zeros(3)), np.zeros(3))
