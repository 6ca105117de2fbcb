"""SWinStrategy: window arithmetic, memory (dedup, capacity, forgetting), sessions, budget."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ctxmgmt import ConfigurationError, ConversationMemory, Message, SWinStrategy, Turn
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, QUERY_WEIGHT, WINDOW, MemoryItem, content_words, jaccard
from tests.helpers import words


def turn(i: int, text: str | None = None) -> Turn:
    return Turn(
        i, (Message("user", text or f"Turn {i}: Alice visited city number {i}."), Message("assistant", "Ok."))
    )


class Recording:
    """A summarizer that records each window and returns one item naming its turns."""

    def __init__(self, items=None) -> None:
        self.windows: list[str] = []
        self.previous: list[list[str]] = []
        self.items = items
        self.lock = threading.Lock()

    def summarize(self, previous, window_text):
        with self.lock:
            self.windows.append(window_text)
            self.previous.append(list(previous))
        if self.items is not None:
            return list(self.items(window_text))
        numbers = [
            line.split(":")[1].strip().split()[1] for line in window_text.splitlines() if "Turn" in line
        ]
        return [f"Alice went to cities {' '.join(numbers)} (window {len(self.windows)})"]


class Gated(Recording):
    """A Recording summarizer whose every summary first waits (up to 5 s) for ``gate``."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def summarize(self, previous, window_text):
        self.gate.wait(5)
        return super().summarize(previous, window_text)


def turns_in(window_text: str) -> list[int]:
    return [int(line.split("Turn ")[1].split(":")[0]) for line in window_text.splitlines() if "Turn " in line]


WORDS = ["apples", "boats", "clouds", "dunes", "eels", "ferns", "geese"]


def per_turn(items: Callable[[str], list[str]], **params: Any) -> SWinStrategy:
    """A SWin summarising each turn alone (one-turn windows, no overlap) into ``items``, counting words."""
    return SWinStrategy(summarizer=Recording(items=items), token_counter=words, window=1, overlap=0, **params)


def bob_likes(window_text: str) -> list[str]:
    """One item per one-turn window: what Bob likes (one of seven words) and the turn."""
    i = turns_in(window_text)[0]
    return [f"Bob likes {WORDS[i % 7]} {i}"]


def test_defaults_follow_the_paper():
    s = SWinStrategy(token_counter=words)
    assert (s.window, s.overlap, s.stride, s.gamma) == (WINDOW, OVERLAP, 4, GAMMA) == (6, 2, 4, GAMMA)
    assert s.llm_calls == 0 and s.background is False


@pytest.mark.parametrize(
    ("window", "overlap", "n"), [(6, 2, 30), (6, 2, 6), (4, 0, 13), (5, 4, 12), (3, 1, 2)]
)
def test_each_window_is_summarised_once_and_every_turn_is_covered(window, overlap, n):
    rec = Recording()
    s = SWinStrategy(summarizer=rec, token_counter=words, window=window, overlap=overlap, gamma=1000)
    for i in range(n):
        s.add(turn(i))  # one at a time: windows are cut incrementally
    stride = window - overlap
    expected = [list(range(k, k + window)) for k in range(0, n - window + 1, stride)]
    assert [turns_in(w) for w in rec.windows] == expected
    # consecutive windows share exactly `overlap` turns
    for a, b in zip(expected, expected[1:], strict=False):
        assert len(set(a) & set(b)) == overlap
    # every turn is in a summarised window or shown verbatim
    shown = set(s.select("where did Alice go?").turn_indices)
    covered = {t for w in expected for t in w}
    assert covered | shown == set(range(n))
    assert shown == set(range(expected[-1][0] + stride if expected else 0, n)) | (
        set() if expected else set(range(n))
    )


def test_batched_add_matches_one_by_one():
    one, many = Recording(), Recording()
    a = SWinStrategy(summarizer=one, token_counter=words)
    b = SWinStrategy(summarizer=many, token_counter=words)
    for i in range(17):
        a.add(turn(i))
    b.add_many([turn(i) for i in range(17)])
    assert one.windows == many.windows and len(one.windows) == 3


def test_each_window_is_conditioned_on_the_previous_memory():
    rec = Recording()
    s = SWinStrategy(summarizer=rec, token_counter=words)
    s.add_many([turn(i) for i in range(14)])
    assert rec.previous[0] == []
    assert rec.previous[1] == [s.items[0].text]
    assert rec.previous[2] == [i.text for i in s.items[:2]]


def test_items_have_provenance():
    s = SWinStrategy(summarizer=Recording(), token_counter=words)
    s.add_many([turn(i) for i in range(10)])
    assert [(i.session, i.start, i.end, i.window) for i in s.items] == [(0, 0, 5, 0), (0, 4, 9, 1)]
    context = s.select("Alice")
    summary = context.blocks[0]
    assert summary.kind == "summary" and summary.turns == tuple(range(10))
    assert context.blocks[1].kind == "turns" and context.blocks[1].turns == (8, 9)
    json.dumps(context.details)


def test_duplicates_are_merged_and_reinforced():
    rec = Recording(items=lambda text: ["Alice lives in Paris with her cat Miso.", f"new fact {len(text)}"])
    s = SWinStrategy(summarizer=rec, token_counter=words, gamma=100)
    s.add_many([turn(i) for i in range(10)])
    texts = [i.text for i in s.items]
    assert texts.count("Alice lives in Paris with her cat Miso.") == 1
    paris = s.items[0]
    assert paris.hits == 2 and paris.last_window == 1
    assert s.windows[1]["merged"][0]["into"] == paris.text
    # near-duplicates (same content words, different stop words/punctuation) merge too
    s2 = SWinStrategy(
        summarizer=Recording(
            items=lambda t: ["Alice lives in Paris with her cat Miso" + ("." if "Turn 0" in t else "!")]
        ),
        token_counter=words,
    )
    s2.add_many([turn(i) for i in range(10)])
    assert len(s2.items) == 1 and s2.items[0].hits == 2


def test_capacity_and_forgetting_balance_recency_and_salience():
    counter = iter(range(1000))

    def items(text):
        k = next(counter)
        if k == 0:  # dense in names, numbers and dates: salient
            return ["On 3 May 2023 Alice met Bob and Carol in Paris at 10 am."]
        return [f"a remark about {WORDS[k]}"]

    s = SWinStrategy(
        summarizer=Recording(items=items), token_counter=words, gamma=3, window=2, overlap=0, forget_batch=0
    )
    s.add_many([turn(i) for i in range(12)])  # 6 windows, 6 items, capacity 3
    texts = [i.text for i in s.items]
    assert len(texts) == 3
    assert texts[0].startswith("On 3 May 2023")  # old but salient: kept
    assert texts[1:] == ["a remark about eels", "a remark about ferns"]
    forgotten = s.forgotten
    assert [f["text"] for f in forgotten] == [f"a remark about {w}" for w in WORDS[1:4]]
    for f in forgotten:
        assert f["score"] == pytest.approx(0.5 * f["recency"] + 0.5 * f["salience"], abs=1e-3)
        assert "gamma=3" in f["reason"]
    assert "forgot" in s.explain() and "gamma=3" in s.explain()


def test_recency_only_forgets_the_oldest():
    s = per_turn(
        lambda t: [f"Bob likes {WORDS[turns_in(t)[0]]}"], gamma=2, recency_weight=1.0, forget_batch=0
    )
    s.add_many([turn(i) for i in range(5)])
    assert [i.window for i in s.items] == [3, 4]


def test_forget_batch_forgets_in_blocks_so_the_first_summary_message_stays():
    s = per_turn(bob_likes, gamma=8, recency_weight=1.0, forget_batch=4, segment_items=3)
    sizes, firsts = [], []
    for i in range(20):
        s.add(turn(i))
        sizes.append(len(s.items))
        firsts.append(s.select("Bob").blocks[0].text)
    assert max(sizes) == 8 and sizes[8] == 4  # over gamma: down to gamma - forget_batch at once
    assert sizes[9:12] == [5, 6, 7]  # then windows only append
    assert len(set(firsts[8:13])) == 1  # the first summary message is unchanged meanwhile
    assert s.forgotten[0]["text"].startswith("Bob likes apples 0")
    # most half of gamma goes at once
    small = per_turn(bob_likes, gamma=3, forget_batch=8)
    small.add_many([turn(i) for i in range(6)])
    assert 2 <= len(small.items) <= 3


def test_memory_is_sent_as_append_only_segments():
    s = per_turn(
        lambda t: [f"Item {turns_in(t)[0]} about Paris."], gamma=100, segment_items=4, recall_share=0
    )
    s.add_many([turn(i) for i in range(10)])
    before = s.select("Paris")
    s.add(turn(10))
    after = s.select("Paris")
    summaries = [b for b in after.blocks if b.kind == "summary"]
    assert [b.text.count("\n- ") + b.text.startswith("- ") for b in summaries] == [4, 4, 3]
    assert summaries[0].text.startswith("Summary of the earlier conversation:")
    assert [b.text for b in after.blocks[:2]] == [b.text for b in before.blocks[:2]]  # closed segments stay


def test_new_session_keeps_memory_and_resets_windows():
    rec = Recording()
    s = SWinStrategy(summarizer=rec, token_counter=words)
    s.add_many([turn(i) for i in range(8)])  # window 0-5 done; 6-7 not summarised yet
    s.new_session()
    assert [turns_in(w) for w in rec.windows] == [list(range(6)), [4, 5, 6, 7]]  # tail summarised once
    assert len(s) == 0 and s.session == 1 and len(s.items) == 2
    rec.items = lambda text: ["Bob sailed to Oslo with Carol."]
    s.add_many([turn(i) for i in range(6)])
    assert turns_in(rec.windows[-1]) == list(range(6))  # windows restart at turn 0
    assert [(i.session, i.start) for i in s.items] == [(0, 0), (0, 4), (1, 0)]
    summary = s.select("Alice").blocks[0]
    assert summary.turns == tuple(range(6))  # provenance in this session only
    assert "session 0" in s.explain() and "session 1" in s.explain()
    s.new_session()  # nothing unsummarised beyond the overlap: turns 4-5 already covered
    assert len(rec.windows) == 3


def test_reset_forgets_everything():
    s = SWinStrategy(summarizer=Recording(), token_counter=words)
    s.add_many([turn(i) for i in range(10)])
    s.reset()
    assert s.items == [] and s.windows == [] and len(s) == 0
    assert s.select("x").blocks == []


def test_background_equals_sync_after_flush():
    slow = threading.Event()
    sync_rec = Recording()
    sync = SWinStrategy(summarizer=sync_rec, token_counter=words)
    bg_rec = Gated(slow)
    bg = SWinStrategy(summarizer=bg_rec, token_counter=words, background=True)
    turns = [turn(i) for i in range(22)]
    sync.add_many(turns)
    bg.add_many(turns)  # returns at once: the worker is blocked
    early = bg.select("Alice")
    assert early.turn_indices == list(range(22))  # nothing merged yet: every turn verbatim
    assert [b.kind for b in early.blocks] == ["turns"]
    slow.set()
    bg.flush()
    assert [i.to_dict() for i in bg.items] == [i.to_dict() for i in sync.items]
    assert bg.select("Alice").blocks == sync.select("Alice").blocks
    assert bg_rec.previous == sync_rec.previous  # each window conditioned on the same memory
    bg.close()


def test_background_reset_drops_pending_windows():
    gate = threading.Event()
    s = SWinStrategy(summarizer=Gated(gate), token_counter=words, background=True)
    s.add_many([turn(i) for i in range(10)])
    s.reset()
    gate.set()
    s.close()
    assert s.items == []


@pytest.mark.parametrize("budget", [15, 30, 60, 100, 400])
def test_budget_is_respected_and_turns_stay_whole(budget):
    s = SWinStrategy(token_counter=words)
    s.add_many([turn(i, f"Turn {i}: Alice met Bob number {i} in Paris on {i} May.") for i in range(15)])
    context = s.select("Bob", budget=budget)
    assert context.tokens <= budget
    for block in context.blocks:
        if block.kind == "turns":
            assert all(len(s.turns[t].messages) == 2 for t in block.turns)
            assert block.turns == tuple(range(block.turns[0], 15))  # newest turns, contiguous


def drop_one_at_a_time(s: SWinStrategy, query: str, budget: int) -> tuple[list[str], list[int]]:
    """The budget rule stated directly: drop the lowest-priority item, count again, repeat; then turns."""
    words_of_query = content_words(query)

    def priority(item: MemoryItem) -> tuple[float, int]:
        overlap = jaccard(words_of_query, content_words(item.text))
        return s.score(item)[0] + QUERY_WEIGHT * overlap, item.window

    kept = sorted(s.items, key=lambda i: (i.session, i.start, i.window))
    verbatim = list(s.select(query).details["verbatim"])
    dropped: list[str] = []

    def total() -> int:
        return sum(b.tokens for b in s._summary_blocks(kept)) + s.tokens_of(verbatim)

    while (kept or verbatim) and total() > budget:
        if kept:
            victim = min(kept, key=priority)
            kept.remove(victim)
            dropped.append(victim.text)
        else:
            verbatim.pop(0)
    return dropped, verbatim


def test_budget_bisection_drops_what_dropping_one_item_at_a_time_drops():
    names = ["Bob", "Ana", "Chen", "Dmitri", "Eve", "Farah", "Goran", "Hiro", "Ines", "Jamal"]
    cities = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Perth", "Delhi", "Seoul", "Accra"]
    s = SWinStrategy(token_counter=words, recall_share=0)  # the memory's own budget rule
    s.add_many(
        [
            turn(i, f"Turn {i}: Alice met {names[i % 10]} in {cities[i * 3 % 10]} about {i * 7} boxes.")
            for i in range(80)
        ]
    )
    full = s.select("Bob in Paris")
    assert len(full.details["items"]) >= 8
    for budget in range(0, full.tokens + 5, 3):
        context = s.select("Bob in Paris", budget=budget)
        dropped, verbatim = drop_one_at_a_time(s, "Bob in Paris", budget)
        assert context.details["dropped_items"] == dropped, budget
        assert context.details["verbatim"] == verbatim, budget
        assert context.tokens <= budget or not context.blocks


def test_budget_drops_items_before_turns():
    s = SWinStrategy(token_counter=words, recall_share=0)
    s.add_many([turn(i, f"Turn {i}: Alice met Bob number {i} in Paris on {i} May.") for i in range(15)])
    full = s.select("Bob")
    verbatim = full.blocks[-1].tokens
    tight = s.select("Bob", budget=verbatim + 2)
    assert [b.kind for b in tight.blocks] == ["turns"] and tight.blocks[0].tokens == verbatim
    assert len(tight.details["dropped_items"]) == len(full.details["items"])
    assert "dropped for the budget" in tight.explain()


@pytest.mark.parametrize(
    "bad",
    [
        {"window": 0},
        {"window": 2.5},
        {"overlap": -1},
        {"overlap": 6},
        {"window": 3, "overlap": 4},
        {"gamma": 0},
        {"gamma": True},
        {"recent_turns": -1},
        {"half_life": 0},
        {"recency_weight": 1.5},
        {"dedup_threshold": 0},
        {"dedup_threshold": float("nan")},
        {"background": "yes"},
        {"summarizer": 42},
    ],
)
def test_invalid_parameters(bad):
    with pytest.raises(ConfigurationError):
        SWinStrategy(token_counter=words, **bad)


def test_recent_turns_widens_the_verbatim_tail():
    s = SWinStrategy(summarizer=Recording(), token_counter=words, recent_turns=5)
    s.add_many([turn(i) for i in range(10)])
    assert s.select("x").turn_indices == [5, 6, 7, 8, 9]


def test_state_round_trip_without_summarising_again():
    rec = Recording()
    s = SWinStrategy(summarizer=rec, token_counter=words)
    s.add_many([turn(i) for i in range(11)])
    state = json.loads(json.dumps(s.to_state()))
    other_rec = Recording()
    restored = SWinStrategy(summarizer=other_rec, token_counter=words)
    restored.load_state(state)
    assert other_rec.windows == []
    assert restored.select("x").blocks == s.select("x").blocks
    restored.add_many([turn(i) for i in range(11, 14)])
    assert turns_in(other_rec.windows[0]) == list(range(8, 14))
    with pytest.raises(ConfigurationError):
        restored.load_state({"strategy": "kadanedial"})


def test_llm_calls_are_counted():
    from ctxmgmt.components.summarizer import LLMSummarizer

    prompts: list[str] = []
    s = SWinStrategy(
        summarizer=LLMSummarizer(lambda p: prompts.append(p) or "- A fact."), token_counter=words
    )
    s.add_many([turn(i) for i in range(14)])
    assert s.llm_calls == len(prompts) == 3


def test_with_conversation_memory_and_the_default_summarizer():
    memory = ConversationMemory(SWinStrategy(token_counter=words), budget=500)
    for i in range(12):
        memory.add_messages(
            [
                Message("user", f"On day {i} Alice bought {i + 2} apples in Lyon."),
                Message("assistant", "Noted."),
            ]
        )
    memory.add_messages([Message("user", "How many apples did Alice buy on day 0?")])
    context = memory.select()
    assert [b.kind for b in context.blocks] == ["summary", "turns", "current"]
    assert "day 0" in context.blocks[0].text and "Lyon" in context.blocks[0].text


def test_items_with_different_numbers_are_not_duplicates():
    rec = Recording(items=lambda t: ["Bob is 40 years old." if "Turn 0" in t else "Bob is 41 years old."])
    s = SWinStrategy(summarizer=rec, token_counter=words, window=2, overlap=0)
    s.add_many([turn(i) for i in range(4)])
    assert [i.text for i in s.items] == ["Bob is 40 years old.", "Bob is 41 years old."]


def test_explain_maps_windows_to_items():
    s = SWinStrategy(summarizer=Recording(), token_counter=words)
    s.add_many([turn(i) for i in range(10)])
    text = s.explain()
    assert "window 0 (session 0, turns 0-5): +1 items" in text
    assert "window 1 (session 0, turns 4-9): +1 items" in text
    assert "Alice went to cities 0 1 2 3 4 5" in text
    context = s.select("Alice")
    assert "window 1 (session 0, turns 4-9)" in context.explain()
    assert [w["turns"] for w in context.details["windows"]] == [[0, 5], [4, 9]]


# -- parameters are declared once, in SWinConfig ------------------------------------------------
@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("window", 0),
        ("window", 2.5),
        ("window", True),
        ("overlap", -1),
        ("overlap", "2"),
        ("gamma", 0),
        ("gamma", None),
        ("recent_turns", -1),
        ("half_life", 0),
        ("half_life", float("inf")),
        ("recency_weight", -0.1),
        ("recency_weight", 1.5),
        ("dedup_threshold", 0),
        ("dedup_threshold", 1.01),
        ("background", "yes"),
        ("background", 1),
    ],
)
def test_each_bad_parameter_is_named(name, bad):
    from ctxmgmt.strategies.swin import SWinConfig

    with pytest.raises(ConfigurationError, match=name):
        SWinStrategy(token_counter=words, **{name: bad})
    with pytest.raises(ConfigurationError, match=name):
        SWinConfig(**{name: bad})


def test_overlap_must_be_smaller_than_window():
    from ctxmgmt.strategies.swin import SWinConfig

    with pytest.raises(ConfigurationError, match=r"overlap must be smaller than window \(6\), got 6"):
        SWinConfig(overlap=6)
    with pytest.raises(ConfigurationError, match="overlap"):
        SWinStrategy(token_counter=words, window=3, overlap=3)
    assert SWinConfig(window=3, overlap=2).overlap == 2


def test_every_parameter_is_declared_with_its_default_and_a_doc():
    from ctxmgmt.strategies.swin import DEDUP_THRESHOLD, HALF_LIFE, RECENCY_WEIGHT, RECENT_TURNS, SWinConfig

    specs = {p.name: p for p in SWinConfig.params()}
    assert {n: p.default for n, p in specs.items()} == {
        "window": WINDOW,
        "overlap": OVERLAP,
        "gamma": GAMMA,
        "recent_turns": RECENT_TURNS,
        "half_life": HALF_LIFE,
        "recency_weight": RECENCY_WEIGHT,
        "dedup_threshold": DEDUP_THRESHOLD,
        "background": False,
        "recall_share": 0.5,
        "recall_ratio": 0.01,
        "segment_items": 12,
        "forget_batch": 8,
        "memory_role": "user",
    }
    assert specs["background"].kind is bool
    assert specs["memory_role"].choices == ("user", "assistant", "system")
    assert all(p.doc and not p.budget for p in specs.values())
    assert SWinStrategy.config_class is SWinConfig and SWinStrategy.components == ("summarizer",)


def test_config_object_keywords_and_paper():
    from ctxmgmt.strategies.swin import SWinConfig

    config = SWinConfig(window=4, overlap=1)
    s = SWinStrategy(config, token_counter=words, gamma=10)
    assert (s.window, s.overlap, s.stride, s.gamma) == (4, 1, 3, 10)
    assert s.config == SWinConfig(window=4, overlap=1, gamma=10) and config.gamma == GAMMA
    assert isinstance(s.half_life, float) and s.config.to_dict()["half_life"] == 4.0
    # SWin as published: no recalled passages, one item forgotten at a time
    assert SWinConfig.paper() == SWinConfig(recall_share=0.0, forget_batch=0)
    assert SWinStrategy.from_paper(token_counter=words).config == SWinConfig.paper()
    with pytest.raises(ConfigurationError, match="unexpected"):
        SWinStrategy(token_counter=words, windows=4)


def test_state_carries_the_config_and_the_llm_calls():
    from ctxmgmt.components.summarizer import LLMSummarizer

    s = SWinStrategy(
        summarizer=LLMSummarizer(lambda p: "- A fact."), token_counter=words, window=4, overlap=1
    )
    s.add_many([turn(i) for i in range(11)])
    state = json.loads(json.dumps(s.to_state()))
    assert state["config"] == s.config.to_dict() and state["llm_calls"] == s.llm_calls == 3
    restored = SWinStrategy(summarizer=LLMSummarizer(lambda p: "- Another fact."), token_counter=words)
    restored.load_state(state)
    assert restored.llm_calls == 3 and [i.text for i in restored.items] == [i.text for i in s.items]
    assert [t.fingerprint for t in restored.turns] == [t.fingerprint for t in s.turns]
    assert restored.total_tokens == s.total_tokens


def test_background_state_waits_for_pending_windows():
    from ctxmgmt.components.summarizer import LLMSummarizer

    s = SWinStrategy(summarizer=LLMSummarizer(lambda p: "- A fact."), token_counter=words, background=True)
    s.add_many([turn(i) for i in range(14)])
    state = s.to_state()  # flushes first
    assert state["llm_calls"] == 3 and len(state["windows"]) == 3
    s.close()


def test_default_summariser_keeps_dated_facts_compactly():
    s = SWinStrategy(window=2, overlap=0)
    stamp = "1:56 pm on 8 May, 2023"
    s.add(
        Turn(
            0,
            (
                Message("user", "I went to a pottery class yesterday with Ana.", timestamp=stamp),
                Message("assistant", "Wow, that sounds fun!", timestamp=stamp),
            ),
        )
    )
    s.add(Turn(1, (Message("user", "Hi.", timestamp=stamp), Message("assistant", "Hello.", timestamp=stamp))))
    texts = [i.text for i in s.items]
    assert any("yesterday (7 May 2023)" in t and t.startswith("user (8 May 2023): ") for t in texts)
    assert s.llm_calls == 0


def test_recall_brings_back_dated_passages_of_older_turns_after_the_window():
    s = SWinStrategy(token_counter=words, recall_ratio=0.5)
    filler = [turn(i, f"Turn {i}: we talked about the weather in city number {i}.") for i in range(40)]
    fact = Turn(
        0,
        (
            Message(
                "user",
                "I adopted a dog last week. He is a Golden Retriever named Max.",
                timestamp="2023/05/25 (Thu) 23:07",
            ),
            Message("assistant", "Congratulations on Max!"),
        ),
    )
    s.add(fact)
    s.add_many(filler)
    context = s.select("What breed is my dog Max?", budget=400)
    assert context.tokens <= 400
    recall = context.blocks[-1]
    assert recall.kind == "summary" and recall.text.startswith("Passages of earlier turns")
    assert "user (25 May 2023): He is a Golden Retriever named Max." in recall.text
    assert recall.turns == (0,) and 0 not in context.turn_indices  # not verbatim: no evidence credit
    assert context.details["recalled_passages"] >= 1
    assert context.details["stable_blocks"] == len(context.blocks) - 1
    # at most recall_ratio of the history and recall_share of the budget
    assert recall.tokens <= min(s.recall_cap(400), 0.5 * 400)
    off = SWinStrategy(token_counter=words, recall_share=0)
    off.add(fact)
    off.add_many(filler)
    assert "Passages" not in off.select("What breed is my dog Max?", budget=400).text()
    # rebuilt, not stored: a restored memory recalls the same
    restored = SWinStrategy(token_counter=words, recall_ratio=0.5)
    restored.load_state(s.to_state())
    assert restored.select("What breed is my dog Max?", budget=400).text() == context.text()
