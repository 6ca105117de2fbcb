"""EntityTier: collapsed turns merged once into de-duplicated records, mentions, ranking, recall order."""

from __future__ import annotations

import logging

from ctxmgmt import Message, Turn
from ctxmgmt.components.entities import Entity
from ctxmgmt.strategies.acm_entity_tier import (
    EntityRecord,
    EntityTier,
    facts_of,
    recall_order,
    turn_time,
)

MAY_8 = "1:56 pm on 8 May, 2023"
MAY_9 = "2:00 pm on 9 May, 2023"
LABELS = {"Ana": "PERSON", "Lisbon": "GPE", "Porto": "GPE", "yesterday": "DATE", "3": "CARDINAL"}


class Extractor:
    """Labels the words of :data:`LABELS`; counts its calls and the texts it sees."""

    uses_llm = False

    def __init__(self, per_text: bool = False, fail_over: int | None = None) -> None:
        self.per_text = per_text
        self.fail_over = fail_over
        self.calls = 0
        self.texts: list[str] = []

    def extract(self, texts):
        self.calls += 1
        if self.fail_over is not None and len(texts) > self.fail_over:
            raise RuntimeError("too many texts")
        self.texts.extend(texts)
        return [
            [Entity(w, LABELS[w]) for w in text.replace(".", " ").split() if w in LABELS] for text in texts
        ]


def turn(i: int, text: str, stamp: str | None = MAY_8) -> Turn:
    return Turn(i, (Message("user", text, timestamp=stamp), Message("assistant", "Ok.")))


TURNS = [
    turn(0, "Ana moved to Lisbon yesterday with 3 cats."),
    turn(1, "Ana then visited Porto."),
    turn(2, "It rained yesterday.", stamp=MAY_9),
    turn(3, "Nothing to note."),
]


def merged(extractor: Extractor, *groups: list[int]) -> tuple[EntityTier, list[str], int]:
    tier = EntityTier()
    for group in groups:
        tier.collapse(group)
    lines, llm_calls = tier.merge_pending(TURNS, extractor)
    return tier, lines, llm_calls


def test_collapsed_turns_merge_into_records_with_counts_turns_times_and_facts():
    tier, lines, llm_calls = merged(Extractor(), [0, 1], [2, 3])
    assert tier.calls == 2 and llm_calls == 0
    assert lines == ["collapsed turns 0-1 to entities (+5 new)", "collapsed turns 2-3 to entities (+1 new)"]
    ana = tier.records["ana|PERSON"]
    assert (ana.count, ana.turns, ana.times) == (2, [0, 1], [MAY_8, MAY_8])
    assert ana.facts == ["yesterday (7 May 2023)", "3", "Porto"]  # the newest three, dates anchored
    assert not tier.records["lisbon|GPE"].facts  # facts are kept with names only
    # "yesterday" means another day in another session: one record per timestamp
    assert {k for k in tier.records if k.startswith("yesterday")} == {
        f"yesterday|DATE|{MAY_8}",
        f"yesterday|DATE|{MAY_9}",
    }
    assert tier.merge_pending(TURNS, Extractor()) == ([], 0)  # nothing left queued


def test_a_per_text_extractor_is_asked_once_for_every_queued_group():
    one_by_one, batched = Extractor(), Extractor(per_text=True)
    plain, _, _ = merged(one_by_one, [0, 1], [2, 3])
    ahead, _, _ = merged(batched, [0, 1], [2, 3])
    assert (one_by_one.calls, batched.calls) == (2, 1)
    assert plain.records == ahead.records


def test_a_failed_batch_is_retried_per_group_and_a_failed_group_keeps_no_entities(caplog):
    retried, _, _ = merged(Extractor(per_text=True, fail_over=2), [0, 1], [2, 3])
    assert retried.records == merged(Extractor(), [0, 1], [2, 3])[0].records
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.strategies.acm"):
        failed, lines, _ = merged(Extractor(fail_over=1), [0, 1], [2])
    assert "entity extractor failed on turns 0-1" in caplog.text
    assert lines[0] == "collapsed turns 0-1 to entities (+0 new)" and "ana|PERSON" not in failed.records


def test_llm_calls_are_charged_per_text_for_an_llm_extractor():
    class LLMish(Extractor):
        uses_llm = True

    _, _, llm_calls = merged(LLMish(), [0, 1], [2])
    assert llm_calls == 3


def test_mentions_match_whole_entities_or_a_word_of_a_name():
    tier = EntityTier(
        {
            "caroline smith|PERSON": EntityRecord("Caroline Smith", "PERSON", 1, [0]),
            "new york|GPE": EntityRecord("New York", "GPE", 1, [1]),
            "the|ORG": EntityRecord("the", "ORG", 1, [2]),
            "first|ORDINAL": EntityRecord("first", "ORDINAL", 1, [3]),
        }
    )
    assert set(tier.mentioned("Where does Caroline live?")) == {"caroline smith|PERSON"}
    assert set(tier.mentioned("Was it in new york, the first time?")) == {"new york|GPE", "first|ORDINAL"}
    assert tier.mentioned("York") == {"new york|GPE": tier.records["new york|GPE"]}  # a word of a place name
    assert tier.mentioned("nothing here") == {}


def test_ranking_puts_mentioned_first_then_value_mentions_and_recency():
    records = {
        "ana|PERSON": EntityRecord("Ana", "PERSON", 1, [0]),
        "bo|PERSON": EntityRecord("Bo", "PERSON", 5, [1, 2]),
        "one|CARDINAL": EntityRecord("one", "CARDINAL", 1, [3]),
        "cy|PERSON": EntityRecord("Cy", "PERSON", 1, [4]),
    }
    tier = EntityTier(records)
    assert [r.text for r in tier.ranked({}, 5)] == ["Bo", "Cy", "Ana", "one"]
    mentioned = {"ana|PERSON": records["ana|PERSON"]}
    assert [r.text for r in tier.ranked(mentioned, 5)][0] == "Ana"


def test_recall_order_prefers_the_turns_of_rare_entities_then_newer_turns():
    mentioned = {
        "rare": EntityRecord("Rare", "PERSON", 1, [3]),
        "common": EntityRecord("Common", "PERSON", 4, [1, 2, 3, 5]),
    }
    assert recall_order(mentioned, set()) == [3, 5, 2, 1]
    assert recall_order(mentioned, {3, 5}) == [2, 1]


def test_facts_and_turn_times():
    entities = [
        Entity("yesterday", "DATE"),
        Entity("Ana", "PERSON"),
        Entity("3", "CARDINAL"),
        Entity("3", "CARDINAL"),
    ]
    assert facts_of(entities, MAY_8) == ["yesterday (7 May 2023)", "3"]
    assert turn_time(TURNS[2]) == MAY_9 and turn_time(turn(9, "undated", stamp=None)) == ""


def test_entity_lines():
    record = EntityRecord("Ana", "PERSON", 2, [0, 4], [MAY_8, MAY_9], ["Lisbon"])
    assert record.line() == f"- Ana (PERSON; turns 0-4; {MAY_8}; x2; with Lisbon)"
