"""BudgetPacker: what one selection takes from the tiers, in which order, within its budget."""

from __future__ import annotations

from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.strategies.acm import ACMConfig
from ctxmgmt.strategies.acm_cascade import TierCascade
from ctxmgmt.strategies.acm_entity_tier import ENTITY_HEADER, EntityRecord
from ctxmgmt.strategies.acm_packer import BudgetPacker, Packing
from ctxmgmt.strategies.acm_summary_tier import SUMMARY_HEADER, SummaryItem
from tests.unit.strategies.test_acm_block_measure import MEASURE

TEXTS = [f"Small talk number {i} about the weather." for i in range(30)]
TEXTS[4] = "Priya lent me her ladder on Tuesday."
TEXTS[12] = "The painter borrowed the ladder too."
TOKENS = [10] * 30  # every turn 10 tokens


def tiers() -> TierCascade:
    """Turns 0-9 in the entity tier, 10-19 summarised, 20-29 verbatim."""
    cascade = TierCascade(log_entries=10)
    cascade.verbatim_start, cascade.entity_end = 20, 10
    cascade.summary_tier.items = [SummaryItem(f"talk {i}", i, i + 4) for i in (10, 15)]
    cascade.entity_tier.records = {
        "priya|PERSON": EntityRecord("Priya", "PERSON", 1, [4]),
        "tuesday|DATE": EntityRecord("Tuesday", "DATE", 1, [4]),
        "weather|MISC": EntityRecord("weather", "MISC", 9, list(range(9))),
    }
    return cascade


def packer(cascade: TierCascade | None = None, **params) -> BudgetPacker:
    config = ACMConfig(token_budget=params.pop("token_budget", 200), **params)
    lexical = BM25Index()
    for text in TEXTS:
        lexical.add(text)
    floor = int(config.unmodified_ratio * config.token_budget)
    cascade_floor = floor - int(config.query_share * floor) if config.stable_layout else floor
    return BudgetPacker(config, cascade or tiers(), TOKENS, lexical, MEASURE, cascade_floor)


def shown_tokens(packing: Packing) -> int:
    turns = {*packing.verbatim, *packing.recalled, *packing.query_spans}
    return (
        10 * len(turns)
        + MEASURE.block_tokens(SUMMARY_HEADER, packing.summary_lines)
        + MEASURE.block_tokens(ENTITY_HEADER, packing.entity_lines)
    )


def test_newest_turns_fill_the_floor_then_summaries_and_entities_the_band():
    packing = packer(query_share=0.0).pack("anything new?", 200)
    assert packing.floor == 150
    assert packing.verbatim == list(range(20, 30))  # the whole verbatim tier: 100 tokens
    assert [s.start for s in packing.summaries] == [10, 15]
    assert packing.summary_lines == [s.line() for s in packing.summaries]
    assert len(packing.entity_lines) == 3 and packing.recalled == [] and packing.query_spans == []
    assert packing.used == shown_tokens(packing) <= 200


def test_a_small_budget_keeps_the_newest_turns_and_reports_the_others_dropped():
    packing = packer(query_share=0.0).pack("anything?", 45)
    # floor 33: the newest three turns, then one more in what the band leaves
    assert packing.verbatim == [26, 27, 28, 29]
    assert packing.dropped_verbatim == list(range(20, 26))
    assert packing.used == shown_tokens(packing) <= 45
    assert packer().pack("anything?", 5).verbatim == []  # not even the newest turn fits


def test_the_query_brings_back_the_turns_behind_the_entities_it_mentions():
    packing = packer(query_share=0.0).pack("Did Priya lend it?", 200)
    assert set(packing.mentioned) == {"priya|PERSON"} and packing.recalled == [4]
    assert packing.ranked[0].text == "Priya"  # ranked first; shown in order of first mention
    assert packing.entity_lines[:2] == ["- weather (MISC; turns 0-8; x9)", "- Priya (PERSON; turn 4)"]
    assert packer(query_share=0.0, query_recall=False).pack("Did Priya lend it?", 200).recalled == []


def test_query_spans_take_their_share_of_the_floor_and_are_shown_with_the_verbatim_turns():
    packing = packer(query_share=0.5).pack("who has the ladder", 200)
    assert {4, 12} <= set(packing.query_spans) and 10 * len(packing.query_spans) <= 75
    assert packing.used == shown_tokens(packing) <= 200
    assert packing.verbatim == sorted(packing.verbatim)


def test_query_spans_need_room_and_a_shared_word():
    p = packer()
    assert p.query_spans("ladder", 0, set()) == []
    assert p.query_spans("xylophone", 100, set()) == []
    assert 4 not in p.query_spans("ladder", 100, {4})
    assert sum(TOKENS[t] for t in p.query_spans("ladder Priya painter weather", 20, set())) <= 20


def test_the_stable_prefix_does_not_depend_on_the_query():
    a = packer(stable_layout=True, query_share=0.2).pack_stable("Did Priya lend the ladder?", 200)
    b = packer(stable_layout=True, query_share=0.2).pack_stable("weather", 200)
    assert (a.verbatim, a.summary_lines, a.entity_lines) == (b.verbatim, b.summary_lines, b.entity_lines)
    assert a.verbatim == list(range(20, 30))
    asked = {*a.query_spans, *a.recalled}
    assert asked and 10 * len(asked) <= 150 - 120  # within the query's share of the floor
    assert a.used + 10 * len(asked) <= 200


def test_a_stable_prefix_within_a_small_budget_keeps_the_newest_turn():
    packing = packer(stable_layout=True).pack_stable("weather", 15)
    assert packing.verbatim == [29] and packing.summary_lines == [] and packing.entity_lines == []


def test_best_query_turns_take_the_best_bm25_turns_first_without_their_neighbours():
    p = packer(query_turns="best")
    assert p.query_spans("who lent the ladder", 20, set()) == [4, 12]  # the two matches, no span edges
    assert p.query_spans("Priya lent the ladder", 10, set()) == [4]  # the best one that fits
    assert p.query_spans("ladder", 100, {4}) == [12]  # taken turns left out
    assert p.query_spans("xylophone", 100, set()) == []
    assert ACMConfig().query_turns == "spans"  # KadaneDial's spans stay the default


def test_a_turn_too_long_for_the_room_is_skipped_not_the_end():
    p = packer(query_turns="best")
    p.turn_tokens = [*TOKENS[:4], 30, *TOKENS[5:]]  # turn 4, the best, no longer fits in 25
    assert p.query_spans("Priya lent the ladder", 25, set()) == [12]


def test_long_older_turns_the_query_needs_go_as_their_user_message_when_the_room_is_short():
    for mode in ("spans", "best"):
        p = packer(query_turns=mode)
        p.turn_tokens = [*TOKENS[:4], 60, *TOKENS[5:12], 60, *TOKENS[13:]]  # turns 4 and 12: long replies
        p.user_part = {4: 8, 12: 8}.get  # what each user said: 8 tokens
        whole, alone = p.query_turns("ladder", 200, set())
        assert {4, 12} <= set(whole) and alone == {}  # room for both: whole (a span may hold a neighbour)
        whole, alone = p.query_turns("ladder", 20, set())
        assert {*whole} <= {3, 5, 11, 13} and alone == {4: 8, 12: 8}  # both users' messages, no reply
        whole, alone = p.query_turns("ladder", 68, {3, 5, 11, 13})
        assert len(whole) == 1 and len(alone) == 1 and {*whole, *alone} == {4, 12}  # one reply fits
        p.cascade.verbatim_start = 10  # turn 12 is in the verbatim tier: never cut
        assert p.query_turns("ladder", 20, {3, 5, 11, 13})[1] == {4: 8}
    assert packer().pack("who lent the ladder", 200).query_user_only == {}  # no long turn: no change


def test_a_packing_counts_the_user_messages_it_shows():
    p = packer()
    p.turn_tokens = [*TOKENS[:4], 60, *TOKENS[5:12], 60, *TOKENS[13:]]
    p.user_part = {4: 8, 12: 8}.get
    packing = p.pack("ladder", 200)
    assert packing.query_user_only  # the query's share of the floor (90) does not hold both turns whole
    turns = {*packing.verbatim, *packing.recalled, *packing.query_spans}
    assert not turns & set(packing.query_user_only)  # never both a user message and its whole turn
    assert packing.used <= 200
