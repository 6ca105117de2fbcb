"""TierCascade: turns move down the tiers once each, within the limits, turn by turn or in a batch."""

from __future__ import annotations

import re

from ctxmgmt import Message, Turn
from ctxmgmt.components.entities import Entity
from ctxmgmt.components.summarizer import ExtractiveSummarizer
from ctxmgmt.strategies.acm_cascade import CascadeLimits, TierCascade
from tests.unit.strategies.test_acm_block_measure import MEASURE

TURNS = [
    Turn(i, (Message("user", f"Person{i} said fact {i} today."), Message("assistant", "Ok.")))
    for i in range(80)
]
TOKENS = [10] * len(TURNS)  # every turn 10 tokens


def limits(cascade_floor: int = 300, cascade_batch: float = 0.0) -> CascadeLimits:
    """B = 400 tokens: a floor of 300, 60 for summaries, 40 kept for entities."""
    return CascadeLimits(
        token_budget=400,
        floor=300,
        cascade_floor=cascade_floor,
        summary_tier_limit=60,
        entity_reserve=40,
        summary_limit=120,
        cascade_batch=cascade_batch,
    )


class Summarizer:
    """A two-word summary of each window; records the windows."""

    uses_llm = True

    def __init__(self) -> None:
        self.windows: list[str] = []

    def summarize(self, previous, text):
        self.windows.append(text)
        return ["short note"]


class Extractor:
    """``PersonN`` is a PERSON; records the texts."""

    uses_llm = False

    def __init__(self) -> None:
        self.texts: list[str] = []

    def extract(self, texts):
        self.texts.extend(texts)
        return [[Entity(w, "PERSON") for w in re.findall(r"Person\d+", t)] for t in texts]


def add(cascade: TierCascade, count: int, start: int, summarizer=None, extractor=None, **kwargs) -> int:
    return cascade.add(
        TURNS[:count],
        TOKENS[:count],
        start,
        limits(**kwargs),
        summarizer=summarizer or Summarizer(),
        fallback=ExtractiveSummarizer(),
        entity_extractor=extractor or Extractor(),
        measure=MEASURE,
    )


def test_nothing_moves_while_the_tiers_fit_the_budget():
    cascade = TierCascade(log_entries=10)
    add(cascade, 36, 0)  # 360 verbatim + 40 entity reserve = B
    assert cascade.tiers(36) == {"verbatim": list(range(36)), "summary": [], "entities": []}
    assert list(cascade.log) == []


def test_turns_are_summarised_then_collapsed_each_once_and_the_tiers_stay_contiguous():
    cascade, summarizer, extractor = TierCascade(log_entries=100), Summarizer(), Extractor()
    llm_calls = 0
    for count in range(1, 81):
        llm_calls += add(cascade, count, count - 1, summarizer, extractor)
        tiers = cascade.tiers(count)
        assert tiers["entities"] + tiers["summary"] + tiers["verbatim"] == list(range(count))
        assert sum(TOKENS[i] for i in tiers["verbatim"]) + cascade.summary_tier.tokens(MEASURE) + 40 <= 400
    assert cascade.summary_tier.items and cascade.entity_tier.records
    summarised = [int(n) for w in summarizer.windows for n in re.findall(r"fact (\d+)", w)]
    assert len(summarised) == len(set(summarised))  # each turn summarised once
    extracted = [int(n) for t in extractor.texts for n in re.findall(r"fact (\d+)", t)]
    assert sorted(extracted) == cascade.tiers(80)["entities"]  # each entity-tier turn extracted once
    assert llm_calls == cascade.summary_tier.calls == len(summarizer.windows)
    assert cascade.entity_tier.calls == sum(line.startswith("collapsed") for line in cascade.log)
    assert all(line.startswith(("summarised turns", "collapsed turns")) for line in cascade.log)


def test_adding_many_turns_at_once_is_adding_them_one_by_one():
    one, many = TierCascade(log_entries=100), TierCascade(log_entries=100)
    for count in range(1, 81):
        add(one, count, count - 1)
    add(many, 80, 0)
    assert (one.verbatim_start, one.entity_end) == (many.verbatim_start, many.entity_end)
    assert one.summary_tier.items == many.summary_tier.items
    assert one.entity_tier.records == many.entity_tier.records
    assert list(one.log) == list(many.log)  # collapse lines in place, no marks left


def test_the_query_share_of_a_stable_layout_makes_the_tiers_move_earlier():
    plain, stable = TierCascade(log_entries=10), TierCascade(log_entries=10)
    add(plain, 36, 0)
    add(stable, 36, 0, cascade_floor=240)  # 60 tokens of the floor kept for the query's turns
    assert plain.verbatim_start == 0 < stable.verbatim_start
    assert sum(TOKENS[stable.verbatim_start : 36]) <= 240


def test_a_cascade_batch_frees_more_than_it_must():
    exact, batched = TierCascade(log_entries=10), TierCascade(log_entries=10)
    add(exact, 37, 0)
    add(batched, 37, 0, cascade_batch=0.5)
    assert sum(TOKENS[exact.verbatim_start : 37]) == 300
    assert sum(TOKENS[batched.verbatim_start : 37]) <= 150


def test_the_log_keeps_the_newest_entries():
    cascade = TierCascade(log_entries=3)
    add(cascade, 80, 0)
    assert len(cascade.log) == 3 and cascade.log.start > 0
