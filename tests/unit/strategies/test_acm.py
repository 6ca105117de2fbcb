"""ACMStrategy: tier transitions, the hard budget guarantee, entity metadata, query recall."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxmgmt import BudgetExceededError, ConfigurationError, Message, Turn, build_context
from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.entities import Entity
from ctxmgmt.strategies.acm import (
    ENTITY_HEADER,
    MIN_TOKEN_BUDGET,
    SUMMARY_HEADER,
    ACMConfig,
    ACMStrategy,
    EntityRecord,
)
from tests.helpers import words

DEFAULT_TOKEN_BUDGET = ACMConfig.param("token_budget").default


class CountingExtractor:
    """Capitalised words are PERSON, four-digit numbers DATE; records every text it sees."""

    uses_llm = False

    def __init__(self) -> None:
        self.texts: list[str] = []

    def extract(self, texts: Sequence[str]) -> list[list[Entity]]:
        self.texts.extend(texts)
        out = []
        for text in texts:
            found = [Entity(w, "DATE") for w in re.findall(r"\b\d{4}\b", text)]
            found += [Entity(w, "PERSON") for w in re.findall(r"\b[A-Z][a-z]{2,}\d*\b", text)]
            out.append(found)
        return out


class CountingSummarizer:
    """First sentence of each line; records every window it is given."""

    uses_llm = False

    def __init__(self) -> None:
        self.windows: list[str] = []

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        self.windows.append(window_text)
        return [line.split(".")[0] + "." for line in window_text.splitlines()[:2]]


def turn(i: int, text: str | None = None, stamp: str | None = None) -> Turn:
    text = text or f"In 20{i % 30:02d} I met Person{i} near the old mill and we talked about item {i}."
    return Turn(i, (Message("user", text, timestamp=stamp), Message("assistant", f"Noted fact {i}.")))


def make(budget: int = 120, **kwargs) -> ACMStrategy:
    kwargs.setdefault("entity_extractor", CountingExtractor())
    kwargs.setdefault("summarizer", CountingSummarizer())
    return ACMStrategy(token_budget=budget, token_counter=words, **kwargs)


def sent_tokens(strategy: ACMStrategy, context) -> int:
    """Tokens of exactly what would be sent, message by message."""
    return sum(message_tokens(strategy.token_counter, m) for m in context.messages())


# -- construction ------------------------------------------------------------------------------
def test_defaults():
    s = ACMStrategy(entity_extractor=CountingExtractor())
    assert s.token_budget == DEFAULT_TOKEN_BUDGET == 2000
    assert (s.unmodified_ratio, s.summary_limit, s.floor) == (0.75, 120, 1500)
    assert s.select("anything").blocks == []


@pytest.mark.parametrize(
    "bad",
    [
        {"token_budget": MIN_TOKEN_BUDGET - 1},
        {"token_budget": 0},
        {"token_budget": 100.5},
        {"unmodified_ratio": 0},
        {"unmodified_ratio": 1.5},
        {"summary_share": -0.1},
        {"recall_share": float("nan")},
        {"summary_limit": 0},
        {"query_recall": "yes"},
        {"entity_extractor": 42},
    ],
)
def test_bad_parameters_raise_at_construction(bad):
    with pytest.raises(ConfigurationError):
        ACMStrategy(**bad)


def test_minimum_budget_is_accepted():
    s = make(MIN_TOKEN_BUDGET)
    for i in range(10):
        s.add(turn(i))
    assert s.select("Person3?").tokens <= MIN_TOKEN_BUDGET


# -- tier transitions --------------------------------------------------------------------------
def test_tiers_fill_in_order():
    s = make(360)  # room for two framed memory blocks (ctxmgmt.messages.framing) beside the 75% floor
    s.add(turn(0))
    assert s.tiers == {"verbatim": [0], "summary": [], "entities": []}
    for i in range(1, 30):
        s.add(turn(i))
    tiers = s.tiers
    assert tiers["entities"] and tiers["summary"] and tiers["verbatim"]
    # contiguous, oldest in entities, newest verbatim
    assert tiers["entities"] + tiers["summary"] + tiers["verbatim"] == list(range(30))
    assert s.tokens_of(tiers["verbatim"]) <= s.token_budget
    # the verbatim tier keeps at least 75% of the budget once it had to give turns away
    assert s.tokens_of(tiers["verbatim"]) + s._turn_tokens[tiers["summary"][-1]] > s.floor


def test_context_has_every_tier_and_explains_it():
    s = make(360)
    for i in range(30):
        s.add(turn(i))
    context = s.select("what happened?")
    kinds = [b.kind for b in context.blocks]
    assert kinds == ["entities", "summary", "turns"]
    assert context.blocks[-1].turns[-1] == 29
    assert context.blocks[0].text.startswith(ENTITY_HEADER)
    assert context.blocks[1].text.startswith(SUMMARY_HEADER)
    explained = context.explain()
    for word in ("verbatim tier", "summary tier", "entity tier", "floor 270"):
        assert word in explained
    assert sent_tokens(s, context) == context.tokens <= 360


def test_cascade_is_incremental_each_turn_processed_once():
    extractor, summarizer = CountingExtractor(), CountingSummarizer()
    s = make(360, entity_extractor=extractor, summarizer=summarizer)
    for i in range(60):
        s.add(turn(i))
        for _ in range(3):  # queries never summarise nor extract
            s.select(f"Person{i}?")
    summarised = Counter(n for w in summarizer.windows for n in map(int, re.findall(r"fact (\d+)\.", w)))
    extracted = Counter(n for t in extractor.texts for n in map(int, re.findall(r"fact (\d+)\.", t)))
    assert summarised and max(summarised.values()) == 1
    assert extracted and max(extracted.values()) == 1
    assert s.summarize_calls == len(summarizer.windows)
    assert set(extracted) == set(s.tiers["entities"])


def test_batching_does_not_change_the_cascade():
    one, many = make(150), make(150)
    turns = [turn(i) for i in range(40)]
    for t in turns:
        one.add(t)
    many.add_many(turns)
    assert one.tiers == many.tiers
    assert [s.text for s in one.summaries] == [s.text for s in many.summaries]


class PerTextExtractor(CountingExtractor):
    """CountingExtractor that declares each text's entities independent of the call (as spaCy)."""

    per_text = True

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def extract(self, texts: Sequence[str]) -> list[list[Entity]]:
        self.calls += 1
        return super().extract(texts)


def test_per_text_extractor_is_asked_once_for_a_batch_with_the_same_entities():
    turns = [turn(i) for i in range(60)]
    plain, ahead = make(150), make(150, entity_extractor=PerTextExtractor())
    for t in turns:
        plain.add(t)
    ahead.add_many(turns)
    assert ahead.entity_extractor.calls == 1  # one batched call, not one per collapse
    assert plain.entities == ahead.entities and plain.tiers == ahead.tiers
    assert plain.extract_calls == ahead.extract_calls > 1
    # every turn is extracted once, chatting on as well
    for i in range(60, 70):
        plain.add(turn(i))
        ahead.add(turn(i))
    assert plain.entities == ahead.entities
    assert sorted(ahead.entity_extractor.texts) == sorted(set(ahead.entity_extractor.texts))
    restored = make(150, entity_extractor=PerTextExtractor())
    restored.load_state(json.loads(json.dumps(ahead.to_state())))
    for i in range(70, 80):
        plain.add(turn(i))
        restored.add(turn(i))
    assert plain.entities == restored.entities


def test_a_batch_extracts_only_the_turns_that_collapse_and_logs_as_turn_by_turn():
    turns = [turn(i) for i in range(60)]
    plain, batched = make(150), make(150, entity_extractor=PerTextExtractor())
    for t in turns:
        plain.add(t)
    batched.add_many(turns)
    collapsed = batched.tiers["entities"]
    assert collapsed and len(collapsed) < 60  # newer turns are summarised or verbatim: not extracted
    assert len(batched.entity_extractor.texts) == len(collapsed)
    assert plain.to_state() == batched.to_state()  # tiers, entities, log lines in place, counters
    assert any(line.startswith("collapsed turns") for line in batched.to_state()["log"])


class FailingBatchExtractor(PerTextExtractor):
    """A per-text extractor that fails on any call of more than ``limit`` texts."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def extract(self, texts: Sequence[str]) -> list[list[Entity]]:
        if len(texts) > self.limit:
            raise RuntimeError("batch too large")
        return super().extract(texts)


def test_a_failed_batched_extraction_is_retried_per_collapse(caplog):
    turns = [turn(i) for i in range(60)]
    plain = make(150)
    for t in turns:
        plain.add(t)
    longest = max(len(e) for e in _collapse_groups(plain))
    retried = make(150, entity_extractor=FailingBatchExtractor(longest))
    with caplog.at_level("WARNING"):
        retried.add_many(turns)
    assert retried.entities == plain.entities and retried.tiers == plain.tiers
    assert retried.entity_extractor.calls == len(_collapse_groups(plain)) > 1  # the batch failed
    assert "entity extractor failed" not in caplog.text  # each collapse's own call succeeded


def _collapse_groups(strategy: ACMStrategy) -> list[list[int]]:
    """The turns of each collapse in the tier log."""
    groups = []
    for line in strategy.to_state()["log"]:
        found = re.match(r"collapsed turns (\d+)-(\d+)", line)
        if found:
            groups.append(list(range(int(found[1]), int(found[2]) + 1)))
    return groups


def test_summaries_respect_the_summary_limit():
    long = " ".join(f"word{k}" for k in range(200))
    s = ACMStrategy(
        token_budget=2000,
        token_counter=words,
        entity_extractor=CountingExtractor(),
        summarizer=lambda prompt: "unused",  # replaced below
    )
    s.summarizer = CountingSummarizer()
    s.summarizer.summarize = lambda previous, text: [long]  # type: ignore[method-assign]
    for i in range(60):
        s.add(turn(i, text=long))
    assert s.summaries
    assert all(words(x.text) <= 120 for x in s.summaries)


# -- entities --------------------------------------------------------------------------------
def test_entity_metadata_and_dedup():
    s = make(60)
    stamps = ["1:00 pm on 8 May, 2023", "2:00 pm on 9 May, 2023"]
    for i in range(30):
        text = f"Caroline met Person{i} today in 2023."
        s.add(turn(i, text=text, stamp=stamps[i // 15]))
    assert len(s.tiers["entities"]) >= 10
    by_text = {e.text: e for e in s.entities}
    caroline = by_text["Caroline"]
    assert caroline.label == "PERSON"
    assert caroline.count == len(caroline.turns) == len(s.tiers["entities"])  # de-duplicated with counts
    assert caroline.turns == s.tiers["entities"]
    assert caroline.times[0] == stamps[0]
    # DATE entities are not merged across timestamps
    years = [e for e in s.entities if e.text == "2023"]
    assert {e.times[0] for e in years} <= set(stamps) and len(years) == len({e.times[0] for e in years})
    line = caroline.line()
    assert (
        line.startswith("- Caroline (PERSON; turns 0-") and stamps[0] in line and f"x{caroline.count}" in line
    )
    json.dumps(s.to_state())


def test_query_recall_brings_back_the_verbatim_turn():
    texts = [f"My neighbour Zed{i} owns a blue boat." for i in range(30)]
    texts[2] = "Priya lent me her ladder on Tuesday."
    s = make(180, query_share=0.0)  # recall alone (query spans would find the turn first)
    for i, text in enumerate(texts):
        s.add(turn(i, text=text))
    assert 2 in s.tiers["entities"]
    context = s.select("Who lent me the ladder, was it Priya?")
    assert 2 in context.details["recalled"]
    assert "Priya lent me her ladder on Tuesday." in context.text()
    assert context.tokens <= 180
    off = make(180, query_recall=False, query_share=0.0)
    off.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    assert "Priya lent me her ladder" not in off.select("was it Priya?").text()


def test_query_spans_share_the_verbatim_floor():
    texts = [f"My neighbour Zed{i} owns a blue boat." for i in range(40)]
    texts[5] = "I lent my ladder to the painter."
    texts[6] = "The painter will return the ladder on Friday."
    s = make(200)  # floor 150 tokens: 90 for the query spans (query_share 0.6), 60 for the newest turns
    s.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    assert 5 in s.tiers["entities"] or 5 in s.tiers["summary"]
    context = s.select("When does the painter return my ladder?")
    spans = context.details["query_spans"]
    assert {5, 6} <= set(spans) and s.tokens_of(spans) <= 90  # the span, grown by its neighbours
    blocks = [b for b in context.blocks if b.kind == "turns"]
    assert tuple(spans) == blocks[0].turns and "query spans" in blocks[0].reason
    assert blocks[-1].turns[-1] == 39  # the newest turns keep the rest of the floor
    assert "query spans" in " ".join(context.details["explain"])
    assert sent_tokens(s, context) <= 200
    assert s.select("When does the painter return my ladder?", budget=60).tokens <= 60
    # nothing shares a word with the query, or the faithful mode: no spans
    assert s.select("xyzzy?").details["query_spans"] == []
    paper = ACMStrategy.from_paper(
        token_budget=200, token_counter=words, entity_extractor=CountingExtractor()
    )
    paper.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    assert paper.config.query_share == 0.0 and not paper.config.query_recall
    assert paper.select("When does the painter return my ladder?").details["query_spans"] == []


def test_query_spans_survive_a_state_round_trip():
    texts = [f"Turn {i} talks about the weather." for i in range(30)]
    texts[3] = "My sister Ana moved to Lisbon."
    s = make(160)
    s.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    restored = make(160)
    restored.load_state(json.loads(json.dumps(s.to_state())))
    query = "Where did Ana move?"
    assert 3 in s.select(query).details["query_spans"]
    assert restored.select(query).text() == s.select(query).text()


def test_relative_date_entities_keep_their_day():
    record = EntityRecord("yesterday", "DATE", count=1, turns=[4], times=["1:56 pm on 8 May, 2023"] * 2)
    assert record.line().startswith("- yesterday (7 May 2023) (DATE; turn 4")
    assert (
        EntityRecord("Paris", "GPE", 1, [4], ["8 May, 2023"] * 2).line()
        == "- Paris (GPE; turn 4; 8 May, 2023)"
    )


def test_entity_records_keep_the_numbers_dates_and_places_said_with_them():
    def extract(text):
        labels = {"Ana": "PERSON", "Lisbon": "GPE", "3": "CARDINAL", "yesterday": "DATE", "Porto": "GPE"}
        return [(w, labels[w]) for w in re.findall(r"\w+", text) if w in labels]

    texts = [
        "Ana moved to Lisbon yesterday with her 3 cats.",
        "Ana then visited Porto.",
        *[f"Unrelated chatter number {i} about the weather." for i in range(12)],
    ]
    s = make(60, entity_extractor=extract)
    s.add_many([turn(i, text=t, stamp="1:56 pm on 8 May, 2023") for i, t in enumerate(texts)])
    ana = next(e for e in s.entities if e.text == "Ana")
    assert ana.facts == ["Lisbon", "yesterday (7 May 2023)", "3", "Porto"][-3:]
    assert "with yesterday (7 May 2023), 3, Porto" in ana.line()
    assert not next(e for e in s.entities if e.text == "Lisbon").facts  # facts are kept with names only
    restored = make(60, entity_extractor=extract)
    restored.load_state(json.loads(json.dumps(s.to_state())))
    assert [e.facts for e in restored.entities] == [e.facts for e in s.entities]


# -- persistence -----------------------------------------------------------------------------
def test_state_round_trip_without_recomputing():
    s = make(360)
    for i in range(30):
        s.add(turn(i))
    state = json.loads(json.dumps(s.to_state()))
    extractor, summarizer = CountingExtractor(), CountingSummarizer()
    restored = make(120, entity_extractor=extractor, summarizer=summarizer)
    restored.load_state(state)
    assert extractor.texts == [] and summarizer.windows == []
    assert restored.select("Person2?").text() == s.select("Person2?").text()
    with pytest.raises(ConfigurationError):
        restored.load_state({"strategy": "swin"})


def test_reset_forgets_the_tiers():
    s = make(60)
    s.add_many([turn(i) for i in range(20)])
    s.reset()
    assert s.tiers == {"verbatim": [], "summary": [], "entities": []} and s.entities == []


def test_failing_components_do_not_break_the_cascade(caplog):
    class Broken:
        uses_llm = False

        def extract(self, texts):
            raise RuntimeError("down")

        def summarize(self, previous, text):
            raise RuntimeError("down")

    s = make(80, entity_extractor=Broken(), summarizer=Broken())
    s.add_many([turn(i) for i in range(20)])
    assert s.select("x").tokens <= 80
    assert "failed" in caplog.text


# -- the hard guarantee ----------------------------------------------------------------------
TEXT = st.text(alphabet="abcdefghij KLMNOP 0123456789.,", min_size=1, max_size=160).filter(str.strip)


@st.composite
def conversations(draw):
    n = draw(st.integers(min_value=0, max_value=40))
    turns = []
    for i in range(n):
        messages = [Message("user", draw(TEXT), timestamp=draw(st.sampled_from([None, "8 May, 2023"])))]
        if draw(st.booleans()):  # a tool-call turn
            call = {"id": f"c{i}", "name": "lookup", "args": {"q": draw(TEXT)}}
            messages.append(Message("assistant", "", tool_calls=(call,)))
            messages.append(Message("tool", draw(TEXT), tool_call_id=f"c{i}"))
        messages.append(Message("assistant", draw(TEXT)))
        turns.append(messages)
    return turns


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=conversations(),
    budget=st.integers(min_value=MIN_TOKEN_BUDGET, max_value=1500),
    select_budget=st.one_of(st.none(), st.integers(min_value=0, max_value=1500)),
    query=TEXT,
    ratio=st.sampled_from([0.5, 0.75, 1.0]),
)
def test_context_never_exceeds_the_budget(conversation, budget, select_budget, query, ratio):
    s = ACMStrategy(
        token_budget=budget, unmodified_ratio=ratio, token_counter=words, entity_extractor=CountingExtractor()
    )
    flat = [m for t in conversation for m in t]
    s.add_many([Turn(i, tuple(t)) for i, t in enumerate(conversation)])
    context = s.select(query, budget=select_budget)
    limit = budget if select_budget is None else select_budget
    assert context.tokens == sent_tokens(s, context) <= limit
    # whole turns only: a tool call never leaves without its result
    sent = context.messages()
    for m in sent:
        if m.tool_calls:
            assert any(r.tool_call_id == m.tool_calls[0]["id"] for r in sent)
    # through build_context with the budget the memory was built with (system + current included)
    messages = [Message("system", "Be brief."), *flat, Message("user", query)]
    try:
        full = build_context(s, messages, budget=budget)
    except BudgetExceededError:
        assert (
            message_tokens(s.token_counter, messages[0]) + message_tokens(s.token_counter, messages[-1])
            > budget
        )
    else:
        assert full.tokens == sent_tokens(s, full) <= budget


# -- parameters are declared once, in ACMConfig -------------------------------------------------
@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("token_budget", MIN_TOKEN_BUDGET - 1),
        ("token_budget", 100.5),
        ("token_budget", True),
        ("unmodified_ratio", 0),
        ("unmodified_ratio", 1.01),
        ("unmodified_ratio", "0.5"),
        ("summary_limit", 0),
        ("summary_limit", 8.0),
        ("summary_share", -0.1),
        ("summary_share", 1.5),
        ("recall_share", float("nan")),
        ("recall_share", 2),
        ("query_recall", "yes"),
        ("query_recall", None),
    ],
)
def test_each_bad_parameter_is_named(name, bad):
    from ctxmgmt.strategies.acm import ACMConfig

    with pytest.raises(ConfigurationError, match=name):
        ACMStrategy(entity_extractor=CountingExtractor(), **{name: bad})
    with pytest.raises(ConfigurationError, match=name):
        ACMConfig(**{name: bad})


def test_the_budget_parameter_and_check_min_budget_share_one_rule():
    from ctxmgmt.strategies.acm import ACMConfig, check_min_budget

    spec = ACMConfig.param("token_budget")
    assert spec.budget and spec.ge == MIN_TOKEN_BUDGET and spec.default == DEFAULT_TOKEN_BUDGET
    assert [p.name for p in ACMConfig.params() if p.budget] == ["token_budget"]
    assert check_min_budget(MIN_TOKEN_BUDGET) == MIN_TOKEN_BUDGET
    for bad in (MIN_TOKEN_BUDGET - 1, 20.0, True, None, "100"):
        with pytest.raises(ConfigurationError, match=f"max_token_limit must be an int >= {MIN_TOKEN_BUDGET}"):
            check_min_budget(bad, name="max_token_limit")
    with pytest.raises(ConfigurationError, match="token_budget must be an int >= 16"):
        check_min_budget(3)


def test_config_object_keywords_and_paper():
    from ctxmgmt.strategies.acm import ACMConfig

    UNMODIFIED_RATIO, SUMMARY_LIMIT = (
        ACMConfig.param(n).default for n in ("unmodified_ratio", "summary_limit")
    )

    s = ACMStrategy(ACMConfig(token_budget=400), entity_extractor=CountingExtractor(), summary_limit=40)
    assert (s.token_budget, s.summary_limit, s.unmodified_ratio) == (400, 40, UNMODIFIED_RATIO)
    assert isinstance(s.summary_share, float) and s.floor == 300
    paper = ACMConfig.paper()
    assert paper.query_recall is False
    assert (paper.unmodified_ratio, paper.summary_limit) == (UNMODIFIED_RATIO, SUMMARY_LIMIT) == (0.75, 120)
    p = ACMStrategy.from_paper(token_budget=300, entity_extractor=CountingExtractor())
    assert p.query_recall is False and p.token_budget == 300
    assert ACMStrategy.components == ("summarizer", "entity_extractor")


def test_paper_config_has_no_query_recall():
    texts = [f"My neighbour Zed{i} owns a blue boat." for i in range(30)]
    texts[2] = "Priya lent me her ladder on Tuesday."
    paper = ACMStrategy.from_paper(
        token_budget=140,
        token_counter=words,
        entity_extractor=CountingExtractor(),
        summarizer=CountingSummarizer(),
    )
    paper.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    assert 2 in paper.tiers["entities"]
    assert "Priya lent me her ladder" not in paper.select("was it Priya?").text()


def test_state_restores_the_cascade_budget_and_counters():
    class LLMish(CountingSummarizer):
        uses_llm = True

    s = make(360, summarizer=LLMish())
    s.add_many([turn(i) for i in range(30)])
    assert s.llm_calls == s.summarize_calls > 0
    state = json.loads(json.dumps(s.to_state()))
    assert state["config"]["token_budget"] == 360 and "token_budget" not in state
    restored = make(120)
    restored.load_state(state)
    assert restored.token_budget == 360 and restored.config == s.config
    assert (restored.llm_calls, restored.summarize_calls, restored.extract_calls) == (
        s.llm_calls,
        s.summarize_calls,
        s.extract_calls,
    )
    assert restored.tiers == s.tiers
    # a state saved before the config was in it names the budget at the top level
    legacy = {k: v for k, v in state.items() if k != "config"} | {"token_budget": 360}
    old = make(120)
    old.load_state(legacy)
    assert old.token_budget == 360 and old.select("Person2?").text() == s.select("Person2?").text()
    with pytest.raises(ConfigurationError, match="token_budget"):
        make(120).load_state({**state, "config": {**state["config"], "token_budget": 3}})


def test_reset_forgets_the_llm_calls_of_the_tiers():
    class LLMish(CountingSummarizer):
        uses_llm = True

    s = make(360, summarizer=LLMish())
    s.add_many([turn(i) for i in range(30)])
    assert s.llm_calls > 0
    s.reset()
    assert (s.llm_calls, s.summarize_calls, s.extract_calls) == (0, 0, 0)


# -- stable layout (prompt caches) ---------------------------------------------------------------
def test_cascade_batch_moves_the_tiers_in_blocks():
    one, batched = make(200), make(200, cascade_batch=0.5)
    moves_one, moves_batched = 0, 0
    for i in range(80):
        before = (one.tiers["verbatim"][:1], batched.tiers["verbatim"][:1])
        one.add(turn(i))
        batched.add(turn(i))
        moves_one += one.tiers["verbatim"][:1] != before[0]
        moves_batched += batched.tiers["verbatim"][:1] != before[1]
    assert moves_batched * 2 < moves_one  # the verbatim tier's start moves far less often
    verbatim = batched.tokens_of(batched.tiers["verbatim"])
    assert verbatim <= batched.floor  # and stays within the floor
    assert ACMConfig.paper().cascade_batch == 0.0 and not ACMConfig.paper().stable_layout


def test_stable_layout_keeps_the_prefix_between_cascades_and_puts_the_query_last():
    s = make(300, stable_layout=True, cascade_batch=0.5, query_share=0.2)
    for i in range(60):
        s.add(turn(i))
    a = s.select("Person3 near the mill")
    b = s.select("item 17")
    assert a.tokens <= 300 and b.tokens <= 300
    prefix = a.details["stable_blocks"]
    assert prefix == b.details["stable_blocks"] >= 2
    assert [x.text or x.messages for x in a.blocks[:prefix]] == [
        x.text or x.messages for x in b.blocks[:prefix]
    ]
    assert [x.kind for x in a.blocks[:prefix]][-1] == "turns"  # the verbatim tier ends the prefix
    assert a.blocks[-1].reason.startswith("the query's turns") and 3 in a.blocks[-1].turns
    assert a.blocks[-1].tokens <= 0.2 * s.floor
    # a new turn appends to the verbatim tier and leaves the blocks before it unchanged, until a cascade
    kinds = [x.kind for x in a.blocks[:prefix]]
    s.add(turn(60))
    c = s.select("Person3 near the mill")
    if s.tiers["verbatim"][0] == a.details["verbatim"][0]:
        assert [x.text for x in c.blocks[: prefix - 1]] == [x.text for x in a.blocks[: prefix - 1]]
        assert (
            c.blocks[prefix - 1].messages[: len(a.blocks[prefix - 1].messages)]
            == a.blocks[prefix - 1].messages
        )
    assert kinds == [x.kind for x in c.blocks[:prefix]]
    # every budget is a hard limit
    for budget in (16, 40, 120, 250):
        assert s.select("Person3", budget=budget).tokens <= budget


# -- deferred entity extraction (a conversation's first answer over a long history, issue 32) --
def test_deferred_entities_are_merged_later_into_the_same_state():
    turns = [turn(i) for i in range(60)]
    plain = make(150, entity_extractor=PerTextExtractor())
    plain.add_many(turns)
    deferred = make(150, entity_extractor=PerTextExtractor())
    deferred.defer_work = True
    deferred.add_many(turns[:30])
    deferred.add_many(turns[30:])
    collapsed = len(plain.tiers["entities"])
    assert deferred.entity_extractor.texts == [] and deferred.entities == []
    assert deferred.pending_work() == collapsed > 0 and deferred.tiers == plain.tiers
    context = deferred.select("Person2?")
    assert context.details["entities_pending"] == collapsed  # the answer says what it lacks
    assert not any(b.text().startswith(ENTITY_HEADER) for b in context.blocks if b.kind != "turns")
    job = deferred.pending_job(8)
    assert job is not None
    job()  # outside the lock: fills the extractor's cache, merges nothing
    assert deferred.pending_work() == collapsed
    while deferred.pending_work():
        assert 0 < deferred.finish_pending(8) <= max(8, max(map(len, _collapse_groups(plain))))
    assert deferred.to_state() == plain.to_state()  # entities, tiers, log and counters alike
    assert "entities_pending" not in deferred.select("Person2?").details


def test_pending_entities_survive_a_restore_and_a_strategy_on_its_own_finishes_them():
    turns = [turn(i) for i in range(60)]
    plain = make(150)
    plain.add_many(turns)
    deferred = make(150, entity_extractor=PerTextExtractor())
    deferred.defer_work = True
    deferred.add_many(turns)
    state = json.loads(json.dumps(deferred.to_state()))
    assert state["entities_pending"] and state["entities"] == {}
    restored = make(150)  # defer_work off: select finishes the work first
    restored.load_state(state)
    assert restored.pending_work() == deferred.pending_work() > 0
    assert restored.select("Person2?").text() == plain.select("Person2?").text()
    assert restored.pending_work() == 0 and restored.to_state() == plain.to_state()


def test_an_extractor_that_depends_on_the_batch_is_never_deferred_and_a_restored_queue_merges():
    deferred = make(150)  # CountingExtractor: not per_text (an LLM): it would run under the lock
    deferred.defer_work = True
    deferred.add_many([turn(i) for i in range(60)])
    assert deferred.pending_work() == 0 and deferred.entities  # extracted in the call, as before
    queued = make(150, entity_extractor=PerTextExtractor())
    queued.defer_work = True
    queued.add_many([turn(i) for i in range(60)])
    restored = make(150)  # a queue restored under an extractor that is not per_text
    restored.defer_work = True
    restored.load_state(json.loads(json.dumps(queued.to_state())))
    assert restored.pending_work() > 0 and restored.pending_job(8) is None
    assert restored.finish_pending() > 0 and restored.pending_work() == 0
    assert restored.entities == deferred.entities


def test_a_long_turn_goes_as_its_user_message_alone_only_when_that_message_is_what_the_query_matches():
    texts = [f"My neighbour Zed{i} owns a blue boat." for i in range(40)]
    reply = "Sure. Toast cumin and coriander, add the lentils and simmer the curry slowly. " * 20
    s = make(200)  # floor 150 tokens: 90 for the query's turns; turn 40 (about 260 words) never fits whole
    s.add_many([turn(i, text=t) for i, t in enumerate(texts)])
    s.add(Turn(40, (Message("user", "Can you give me a recipe for dinner?"), Message("assistant", reply))))
    s.add_many([turn(i, text=t) for i, t in enumerate(texts, start=41)][:40])
    asked_reply = s.select("Which spices went into the lentil curry?")  # the reply holds the words
    assert 40 not in asked_reply.details["query_user_only"]
    assert "Can you give me a recipe for dinner?" not in asked_reply.text()
    asked_user = s.select("What did I ask for a dinner recipe?")  # the user message holds them
    assert asked_user.details["query_user_only"] == [40]
    assert "Can you give me a recipe for dinner?" in asked_user.text() and "cumin" not in asked_user.text()
