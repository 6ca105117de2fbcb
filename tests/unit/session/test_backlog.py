"""BacklogIndex: the strategy's fast twin, else KadaneDial over the static encoder, choosing among
the turns not derived yet."""

from __future__ import annotations

import pytest

import ctxmgmt.session.backlog as backlog_module
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.components.decider import EmbeddedDecider
from ctxmgmt.components.static_turns import STATIC_TURNS_COSINE_MAP, StaticTurns
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn, chain_hashes
from ctxmgmt.scoring.kadane import TUNED_TAU
from ctxmgmt.session.backlog import RECENT_TURNS, BacklogIndex
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
from ctxmgmt.strategies.kadanedial import QUESTION_TAU_SHIFT, KadaneDialStrategy, KadaneDialTwin
from ctxmgmt.strategies.swin import SWinStrategy
from tests.helpers import TOPICS
from tests.unit.session.test_conversation import Clock

QUESTION = "car exhaust rattling mechanic"
"""Its topic is turns 3-5 (tests.helpers.TOPICS)."""


def words(text: str) -> int:
    return len(text.split())


def cost(turn: Turn) -> int:
    return sum(words(m.text) for m in turn.messages)


def history(topics=TOPICS) -> list[Turn]:
    return group_turns([m for q, a in topics for m in (Message("user", q), Message("assistant", a))])


@pytest.fixture
def turns() -> list[Turn]:
    return history()


@pytest.fixture
def index(turns: list[Turn]) -> BacklogIndex:
    index = BacklogIndex(words)
    index.update(turns, chain_hashes(turns), seconds=None)
    return index


def indexed_text(index: BacklogIndex) -> list[str]:
    return [m.text for t in index.strategy.turns for m in t.messages]


# -- update ---------------------------------------------------------------------------------------


def test_update_indexes_every_completed_turn(index, turns) -> None:
    assert len(index.strategy.turns) == len(turns)
    assert index.recent == RECENT_TURNS
    assert indexed_text(index) == [m.text for t in turns for m in t.messages]


def test_a_growing_history_is_indexed_from_where_it_stopped(turns, monkeypatch) -> None:
    index = BacklogIndex(words)
    resets: list[int] = []
    monkeypatch.setattr(index.strategy, "reset", lambda: resets.append(1))
    index.update(turns[:5], chain_hashes(turns[:5]), seconds=None)
    index.update(turns, chain_hashes(turns), seconds=None)
    index.update(turns, chain_hashes(turns), seconds=None)  # nothing new
    assert resets == [] and len(index.strategy.turns) == len(turns)


def test_an_edited_history_is_indexed_anew(index, turns) -> None:
    edited = [*history(TOPICS[:4]), *history([("[redacted]", "[redacted]")]), *history(TOPICS[5:])]
    edited = group_turns([m for t in edited for m in t.messages])  # indices 0..11 again
    index.update(edited, chain_hashes(edited), seconds=None)
    assert len(index.strategy.turns) == len(turns)
    assert "[redacted]" in indexed_text(index)
    assert "Could the car exhaust cause the rattling?" not in indexed_text(index)


def test_a_shortened_history_is_indexed_anew(index, turns) -> None:
    index.update(turns[:3], chain_hashes(turns[:3]), seconds=None)
    assert len(index.strategy.turns) == 3


def test_with_a_time_limit_a_call_indexes_a_step_and_the_next_calls_the_rest(turns, monkeypatch) -> None:
    monkeypatch.setattr(backlog_module, "INDEX_STEP", 5)
    index = BacklogIndex(words)
    chains = chain_hashes(turns)
    index.update(turns, chains, seconds=0.0)  # out of time after the first step
    assert len(index.strategy.turns) == 5
    index.update(turns, chains, seconds=0.0)
    assert len(index.strategy.turns) == 10
    index.update(turns, chains, seconds=60.0)
    assert len(index.strategy.turns) == len(turns)


def test_the_time_limit_counts_the_threads_work_not_the_wall_clock(turns, monkeypatch) -> None:
    # a host so busy that the thread waits far longer than it works: the wall clock runs 100x the CPU's
    monkeypatch.setattr(backlog_module, "INDEX_STEP", 2)
    monkeypatch.setattr(backlog_module, "INDEX_WALL_SECONDS", 1e9)
    monkeypatch.setattr(backlog_module, "_cpu", Clock(0.5))
    monkeypatch.setattr(backlog_module, "_wall", Clock(50.0))
    index = BacklogIndex(words)
    index.update(turns, chain_hashes(turns), seconds=2.0)
    assert len(index.strategy.turns) == 8  # 4 steps of 0.5 s of work, as on a quiet host


def test_the_wall_clock_stops_a_call_the_thread_barely_runs_in(turns, monkeypatch) -> None:
    monkeypatch.setattr(backlog_module, "INDEX_STEP", 2)
    monkeypatch.setattr(backlog_module, "_cpu", Clock(0.0))  # never scheduled
    monkeypatch.setattr(backlog_module, "_wall", Clock(1.0))
    index = BacklogIndex(words)
    index.update(turns, chain_hashes(turns), seconds=2.0)
    ceiling = int(backlog_module.INDEX_WALL_SECONDS)  # read 1 s apart: one step a second
    assert backlog_module.INDEX_WALL_SECONDS > 2.0 and len(index.strategy.turns) == 2 * ceiling
    longer = BacklogIndex(words)
    longer.update(turns, chain_hashes(turns), seconds=5.0)  # a longer limit lifts the ceiling
    assert len(longer.strategy.turns) == 10


# -- select ---------------------------------------------------------------------------------------


def test_select_sends_the_relevant_span_and_the_newest_turns(index, turns) -> None:
    blocks = index.select(QUESTION, turns, 2, None, cost)
    chosen = [i for b in blocks for i in b.turns]
    assert {3, 4, 5} <= set(chosen) and chosen[-RECENT_TURNS:] == [10, 11]
    assert chosen == sorted(chosen)
    for block in blocks:
        assert block.kind == "turns"
        assert block.messages == tuple(m for i in block.turns for m in turns[i].messages)
        assert block.tokens == sum(cost(turns[i]) for i in block.turns)
        assert block.reason.startswith("not derived yet: ")
    assert blocks[0].reason.endswith("a span relevant to the question (fast index)")
    assert blocks[-1].reason.endswith("newest turn")


def test_select_leaves_out_turns_before_first(index, turns) -> None:
    chosen = [i for b in index.select(QUESTION, turns, 5, None, cost) for i in b.turns]
    assert min(chosen) >= 5 and {10, 11} <= set(chosen)
    assert index.select(QUESTION, turns, len(turns), None, cost) == []  # nothing is waiting


def test_without_a_question_only_the_newest_turns_are_sent(index, turns) -> None:
    blocks = index.select("", turns, 0, None, cost)
    assert [b.turns for b in blocks] == [(10, 11)]
    none_recent = BacklogIndex(words, recent=0)
    assert none_recent.select("", turns, 0, None, cost) == []


def test_turns_not_indexed_yet_are_chosen_only_as_the_newest(turns) -> None:
    index = BacklogIndex(words)
    index.update(turns[:2], chain_hashes(turns[:2]), seconds=None)
    chosen = [i for b in index.select(QUESTION, turns, 2, None, cost) for i in b.turns]
    assert chosen == [10, 11]  # the relevant span is not indexed yet; the indexed turns are before first


def test_a_budget_drops_the_span_edges_first_and_the_newest_turns_last(index, turns) -> None:
    full = [i for b in index.select(QUESTION, turns, 2, None, cost) for i in b.turns]
    budget = cost(turns[11]) + cost(turns[10]) + cost(turns[4])
    blocks = index.select(QUESTION, turns, 2, budget, cost)
    chosen = [i for b in blocks for i in b.turns]
    assert sum(b.tokens for b in blocks) <= budget
    assert set(chosen) < set(full) and {10, 11} <= set(chosen)
    tight = [i for b in index.select(QUESTION, turns, 2, cost(turns[11]), cost) for i in b.turns]
    assert tight == [11]


def test_with_questions_the_turns_are_static_vectors_and_the_questions_its_own(turns) -> None:
    questions = HashingEmbedder(dim=384)
    index = BacklogIndex(words, questions)
    assert isinstance(index.strategy, KadaneDialTwin) and index.strategy.cosine_map == STATIC_TURNS_COSINE_MAP
    embedder = index.strategy.embedder
    assert isinstance(embedder, StaticTurns) and embedder.questions is questions
    assert embedder.turns.projection == "turns"
    index.update(turns, chain_hashes(turns), seconds=None)
    assert index.strategy.current_tau() == pytest.approx(TUNED_TAU + QUESTION_TAU_SHIFT)
    assert questions.calls == []  # turns never reach the question embedder
    index.select(QUESTION, turns, 2, None, cost)
    assert questions.calls == [1]  # the question only


# -- a strategy's fast twin ---------------------------------------------------------------------------


def tree(**params) -> DiscourseTreeStrategy:
    return DiscourseTreeStrategy(embedder=HashingEmbedder(), token_counter=words, **params)


@pytest.fixture
def twin_index(turns: list[Turn]) -> BacklogIndex:
    """A twin over every turn, asked directly (a conversation lets it answer alone) with no newest turns."""
    index = BacklogIndex(words, recent=0, twin_of=tree())
    index.update(turns, chain_hashes(turns), seconds=None)
    return index


def test_a_strategy_without_a_twin_is_stood_in_for_by_kadanedial() -> None:
    index = BacklogIndex(words, twin_of=SWinStrategy(token_counter=words))
    assert isinstance(index.strategy, KadaneDialStrategy) and not index.twin
    assert index.label == "fast index"


def test_kadanedial_is_stood_in_for_by_its_own_twin() -> None:
    strategy = KadaneDialStrategy(embedder=HashingEmbedder(), token_counter=words, tau=0.7)
    index = BacklogIndex(words, twin_of=strategy)
    assert isinstance(index.strategy, KadaneDialTwin) and index.strategy.config == strategy.config
    assert index.twin and index.label == "fast KadaneDial" and index.strategy.tau == 0.7


def test_a_strategy_with_a_twin_is_stood_in_for_by_it(turns) -> None:
    strategy = tree(recall_topics=1, summary_words=5)
    questions = HashingEmbedder(dim=384)
    index = BacklogIndex(words, questions, twin_of=strategy)
    assert isinstance(index.strategy, DiscourseTreeStrategy) and index.strategy is not strategy
    assert index.twin and index.label == "fast DiscourseTree"
    assert index.strategy.config == strategy.config and isinstance(index.strategy.decider, EmbeddedDecider)
    assert isinstance(index.strategy.embedder, StaticTurns) and index.strategy.embedder.questions is questions
    index.update(turns, chain_hashes(turns), seconds=None)
    assert len(index.strategy.turns) == len(turns) and len(strategy) == 0  # the strategy is untouched


def test_the_twin_chooses_the_waiting_turns_its_verbatim_blocks_hold(twin_index, turns) -> None:
    first = 2
    context = twin_index.strategy.select(QUESTION)
    wanted = {i for b in context.blocks if b.kind == "turns" for i in b.turns if i >= first}
    assert wanted and any(b.kind == "summary" for b in context.blocks)  # its summary is not sent
    blocks = twin_index.select(QUESTION, turns, first, None, cost)
    chosen = [i for b in blocks for i in b.turns]
    assert set(chosen) == wanted and chosen == sorted(chosen)
    for block in blocks:
        assert block.kind == "turns" and block.reason.startswith("not derived yet: ")
        assert block.messages == tuple(m for i in block.turns for m in turns[i].messages)
        assert block.reason.endswith("(fast DiscourseTree)")
    later = [i for b in twin_index.select(QUESTION, turns, 7, None, cost) for i in b.turns]
    assert not later or min(later) >= 7


def test_a_twin_that_holds_part_of_the_history_sends_the_newest_turns(turns) -> None:
    partly = BacklogIndex(words, twin_of=tree())
    partly.update(turns[:8], chain_hashes(turns[:8]), seconds=None)
    assert not partly.holds_all(turns)
    blocks = partly.select(QUESTION, turns, 2, None, cost)
    assert [b.turns for b in blocks if b.reason == "not derived yet: newest turn"] == [(10, 11)]
    assert [b.turns for b in partly.select("", turns, 2, None, cost)] == [(10, 11)]  # no question


def test_without_scores_a_budget_drops_the_twins_oldest_turns_first(twin_index, turns) -> None:
    assert "scores" not in twin_index.strategy.select(QUESTION).details
    full = [i for b in twin_index.select(QUESTION, turns, 0, None, cost) for i in b.turns]
    assert len(full) > 3
    budget = sum(cost(turns[i]) for i in full[-3:])
    blocks = twin_index.select(QUESTION, turns, 0, budget, cost)
    chosen = [i for b in blocks for i in b.turns]
    assert sum(b.tokens for b in blocks) <= budget
    assert chosen == full[-3:]  # the newest of its choice kept, the oldest dropped
    tight = [i for b in twin_index.select(QUESTION, turns, 0, cost(turns[full[-1]]), cost) for i in b.turns]
    assert tight == full[-1:]
