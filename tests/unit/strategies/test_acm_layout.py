"""ContextLayout: blocks in chronological order with plain reasons, details and the explanation."""

from __future__ import annotations

from ctxmgmt import Message, Turn
from ctxmgmt.components.entities import Entity
from ctxmgmt.messages.context import Context
from ctxmgmt.strategies.acm import ACMStrategy
from ctxmgmt.strategies.acm_entity_tier import ENTITY_HEADER, EntityRecord
from ctxmgmt.strategies.acm_layout import ContextLayout, span
from ctxmgmt.strategies.acm_packer import Packing
from ctxmgmt.strategies.acm_summary_tier import SUMMARY_HEADER, SummaryItem
from tests.helpers import words


def strategy() -> ACMStrategy:
    """Ten turns; by hand, turns 0-3 in the entity tier, 4-5 summarised, 6-9 verbatim."""
    s = ACMStrategy(token_budget=2000, token_counter=words, entity_extractor=lambda t: [Entity("x", "MISC")])
    s.add_many([Turn(i, (Message("user", f"turn {i} text"),)) for i in range(10)])
    cascade = s._cascade
    cascade.verbatim_start, cascade.entity_end = 6, 4
    cascade.summary_tier.items = [SummaryItem("older talk", 4, 5)]
    cascade.entity_tier.records = {
        "ana|PERSON": EntityRecord("Ana", "PERSON", 1, [2]),
        "bo|PERSON": EntityRecord("Bo", "PERSON", 1, [3]),
    }
    return s


def packing(**fields) -> Packing:
    ana, bo = EntityRecord("Ana", "PERSON", 1, [2]), EntityRecord("Bo", "PERSON", 1, [3])
    base = dict(
        budget=100,
        floor=75,
        verbatim=[7, 8, 9],
        ranked=[ana, bo],
        entity_lines=[ana.line()],
        summaries=[SummaryItem("older talk", 4, 5)],
        summary_lines=[SummaryItem("older talk", 4, 5).line()],
    )
    return Packing(**(base | fields))


def lay_out(s: ACMStrategy, pack: Packing, stable: bool = False) -> Context:
    layout = ContextLayout(s, s._cascade, s.config)
    context = Context(query="q", strategy=s.name)
    return layout.stable(context, pack) if stable else layout.default(context, pack)


def test_default_blocks_are_chronological_and_say_which_tier_they_come_from():
    s = strategy()
    context = lay_out(s, packing(recalled=[2], query_spans=[1, 8], mentioned={"ana|PERSON": s.entities[0]}))
    assert [(b.kind, b.turns, b.reason) for b in context.blocks] == [
        ("entities", (2,), "entity tier: 1 of 2 entities of turns 0-3"),
        ("turns", (1,), "query spans: older turns it needs"),
        ("turns", (2,), "recalled: the query mentions Ana"),
        ("summary", (4, 5), "summary tier: 1 of 1 summaries"),
        ("turns", (7, 8, 9), "verbatim tier: the newest turns (floor 75 of 100 tokens)"),
    ]
    assert context.blocks[0].text == f"{ENTITY_HEADER}\n- Ana (PERSON; turn 2)"
    assert context.blocks[3].text == f"{SUMMARY_HEADER}\n- (turns 4-5) older talk"


def test_default_details_report_the_budget_tiers_and_calls_and_explain_them():
    s = strategy()
    details = lay_out(s, packing(dropped_verbatim=[6])).details
    assert list(details) == [
        "token_budget",
        "budget",
        "floor",
        "tiers",
        "verbatim",
        "recalled",
        "query_spans",
        "query_user_only",
        "mentioned",
        "summaries",
        "entities_shown",
        "entities_total",
        "dropped_verbatim",
        "summarize_calls",
        "extract_calls",
        "llm_calls",
        "explain",
    ]
    assert details["tiers"] == {"verbatim": [6, 7, 8, 9], "summary": [4, 5], "entities": [0, 1, 2, 3]}
    assert (details["entities_shown"], details["entities_total"], details["dropped_verbatim"]) == (1, 2, [6])
    assert details["summaries"] == [{"text": "older talk", "start": 4, "end": 5, "time": ""}]
    assert details["explain"][:4] == [
        "budget 100 tokens: verbatim floor 75 (75%), band 25",
        "verbatim tier: turns 6-9; shown 7-9",
        "summary tier: 1 summaries of turns 4-5; shown 1",
        "entity tier: 2 entities of turns 0-3; shown 1",
    ]
    assert "dropped for the budget: verbatim turns 6" in details["explain"]


def test_stable_layout_puts_the_query_turns_after_the_prefix():
    s = strategy()
    context = lay_out(s, packing(verbatim=[6, 7, 8, 9], query_spans=[1], recalled=[2]), stable=True)
    assert [(b.kind, b.reason) for b in context.blocks] == [
        ("entities", "entity tier: 1 of 2 entities, ranked without the query"),
        ("summary", "summary tier: 1 of 1 summaries"),
        ("turns", "verbatim tier: from turn 6 (stable prefix)"),
        ("turns", "the query's turns: spans and mentioned entities"),
    ]
    assert context.blocks[-1].turns == (1, 2)
    assert context.details["stable_blocks"] == 3
    assert context.details["explain"][0].startswith(
        "stable layout: budget 100, cascade budget 2000; prefix of 3"
    )
    without_query = lay_out(s, packing(verbatim=[6, 7, 8, 9]), stable=True)
    assert without_query.details["stable_blocks"] == len(without_query.blocks) == 3


def test_span_names_a_run_of_turns():
    assert (span([]), span([4]), span([4, 5, 9])) == ("-", "4", "4-9")
