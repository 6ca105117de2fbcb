"""TopicThreadStrategy: insert vs revise, decay, top-1 fallback, split/merge/evict, budget, state."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ctxmgmt import ConfigurationError, Message, Turn
from ctxmgmt.components.embedder import normalise
from ctxmgmt.strategies.topic_thread import TWIN_UNBUDGETED_TAU_SHIFT, TopicThreadStrategy
from tests.helpers import words

TOPICS = ["cat", "car", "tax", "guitar", "food", "vet", "kitten"]


class KeywordEmbedder:
    """One dimension per topic keyword (plus a small constant): exact, predictable cosines."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += len(texts)
        out = np.zeros((len(texts), len(TOPICS) + 1), dtype=np.float32)
        for row, text in enumerate(texts):
            words = set(re.findall(r"[a-z]+", text.lower()))
            for k, topic in enumerate(TOPICS):
                out[row, k] = 1.0 if topic in words else 0.0
            out[row, -1] = 0.01
        return normalise(out)


def turn(i: int, user: str, assistant: str = "Noted, thanks for telling me.") -> Turn:
    return Turn(i, (Message("user", user), Message("assistant", assistant)))


def make(**kwargs) -> TopicThreadStrategy:
    kwargs.setdefault("embedder", KeywordEmbedder())
    kwargs.setdefault("token_counter", words)
    kwargs.setdefault("centre", False)
    return TopicThreadStrategy(**kwargs)


def add(strategy: TopicThreadStrategy, *texts: str) -> None:
    start = len(strategy)
    for k, text in enumerate(texts):
        strategy.add(turn(start + k, text))


def test_insert_on_topic_shift_and_revise_on_continuation():
    s = make(tau=0.5)
    add(s, "My cat is called Miso.", "The cat likes the sofa.", "My car needs new tyres.")
    assert [slot.turns for slot in s.slots] == [[0, 1], [2]]
    assert s.counts["insert"] == 2 and s.counts["revise"] == 1
    assert [e["event"] for e in s.log] == ["insert", "revise", "insert"]
    assert s.slots[0].revisions == 1
    assert s.slot_growth == [1, 1, 2]
    # the revised state holds items of both turns, each tagged with its source turn
    assert {src for _, src in s.slots[0].items} == {0, 1}


def test_revision_is_conditioned_on_the_state():
    seen = []

    class Recording:
        def summarize(self, previous, window_text):
            seen.append((list(previous), window_text))
            return [window_text.splitlines()[0]]

    s = make(tau=0.5, summarizer=Recording())
    add(s, "My cat is called Miso.", "The cat likes the sofa.")
    assert seen[0][0] == [] and "Miso" in seen[0][1]
    assert seen[1][0] == ["user: My cat is called Miso."] and "sofa" in seen[1][1]


def test_score_is_cosine_times_decay():
    s = make(tau=0.5, alpha=0.1)
    add(s, "cat one", "car two", "car three", "car four")
    vector = s.embedder.embed(["cat"])[0]
    score, cos, decay = s.scores(vector, 4)[0]
    assert cos == pytest.approx(1.0, abs=1e-3)
    assert decay == pytest.approx(math.exp(-0.1 * (4 - s.slots[0].last_retrieved)))
    assert score == pytest.approx(cos * decay)


def test_decay_turns_a_stale_thread_into_a_new_one():
    texts = ["cat one", *(f"car {k}" for k in range(12)), "cat again"]
    slow = make(tau=0.5, alpha=0.0)
    add(slow, *texts)
    assert len(slow.slots) == 2  # the cat thread is revised after the gap
    fast = make(tau=0.5, alpha=0.2)
    add(fast, *texts)
    assert len(fast.slots) == 3  # exp(-0.2 * 13) < 0.5: topic counted as new
    assert fast.log[-1]["event"] == "insert"


def test_retrieval_above_tau_and_top1_fallback():
    s = make(tau=0.5)
    add(s, "cat one", "car two", "tax three", "guitar four")
    context = s.select("how is the cat")
    assert context.details["retrieved"] == [s.slots[0].id]
    assert not context.details["fallback_top1"]
    unrelated = s.select("what about the weather")
    assert len(unrelated.details["retrieved"]) == 1
    assert unrelated.details["fallback_top1"]
    assert "top-1 fallback" in "\n".join(unrelated.details["explain"])


def test_select_is_read_only():
    s = make(tau=0.5)
    add(s, "cat one", "car two", "tax three")
    before = json.dumps(s.to_state())
    first = s.select("cat?")
    again = s.select("cat?")
    assert [b.text or b.turns for b in first.blocks] == [b.text or b.turns for b in again.blocks]
    assert json.dumps(s.to_state()) == before


def test_context_shows_states_relevant_turns_and_the_last_turn():
    s = make(tau=0.5, verbatim_turns=1, keep_last=1)
    add(
        s,
        "My cat is called Miso.",
        "The cat sleeps on the sofa all day.",
        "My car needs tyres.",
        "The tax is due.",
    )
    context = s.select("Tell me about the cat")
    kinds = [b.kind for b in context.blocks]
    assert kinds[0] == "summary"
    summary = context.blocks[0]
    assert summary.turns == (0, 1) and "Miso" in summary.text
    assert 3 in context.turn_indices  # the last turn
    assert len(set(context.turn_indices) & {0, 1}) == 1  # one verbatim turn of the thread
    assert 2 not in context.turn_indices


def test_no_summary_when_every_turn_of_the_thread_is_verbatim():
    s = make(tau=0.5)
    add(s, "My cat is called Miso.")
    context = s.select("cat?")
    assert [b.kind for b in context.blocks] == ["turns"]


def test_split_when_a_thread_outgrows_max_slot_turns():
    s = make(tau=0.3, max_slot_turns=4)
    add(s, "cat food", "cat food", "cat vet", "cat vet", "cat vet")
    assert s.counts["split"] == 1
    assert sorted(slot.turns for slot in s.slots) == [[0, 1], [2, 3, 4]]
    assert s.log[-1]["rule"] == "2-means"
    for slot in s.slots:
        assert {src for _, src in slot.items} <= set(slot.turns)


def test_merge_the_most_similar_pair_above_max_slots():
    s = make(tau=0.9, max_slots=2)
    add(s, "cat", "car", "cat kitten")
    assert s.counts["merge"] == 1
    assert sorted(slot.turns for slot in s.slots) == [[0, 2], [1]]
    merge = next(e for e in s.log if e["event"] == "merge")
    assert merge["similarity"] == pytest.approx(math.sqrt(0.5), abs=1e-2)


def test_evict_the_stalest_slot_when_no_merge_fits():
    s = make(tau=0.5, max_slots=2, max_slot_turns=2)
    add(s, "cat a", "cat b", "car a", "car b", "tax a")
    assert s.counts["evict"] == 1 and s.counts["merge"] == 0
    assert len(s.slots) == 2
    evicted = next(e for e in s.log if e["event"] == "evict")
    # "tax a" matches nothing: the top-1 fallback retrieves (refreshes) the car thread, so
    # the cat thread (last retrieved by the fallback at turn 2) is the stalest
    assert evicted["turns"] == "0-1"
    assert sorted(slot.turns for slot in s.slots) == [[2, 3], [4]]
    assert len(s) == 5  # evicted turns stay in the history


def test_recompression_bounds_the_state():
    s = make(tau=0.3, state_items=2)
    facts = [
        "The cat Miso was adopted in Paris in May.",
        "Our cat hates the vacuum cleaner and hides under the bed.",
        "The vet said the cat weighs 4 kilos on Tuesday.",
        "The cat eats salmon from Norway every Friday evening.",
        "My cat sleeps twelve hours beside the Berlin radiator.",
    ]
    add(s, *facts)
    assert len(s.slots) == 1
    assert len(s.slots[0].items) <= 2
    assert s.counts["recompress"] >= 1


@pytest.mark.parametrize("budget", [10, 25, 40, 80, 200])
def test_budget_is_respected(budget):
    s = make(tau=0.5)
    add(
        s, *(f"The {t} story number {k} is long enough to matter here." for k in range(4) for t in TOPICS[:3])
    )
    for query in ("cat story", "tax", "nothing related"):
        context = s.select(query, budget=budget)
        assert context.tokens <= budget
        assert all(b.kind in ("summary", "turns") for b in context.blocks)


def test_fill_uses_leftover_budget_only_when_enabled():
    texts = ["cat one", "cat two", "car one", "car two", "car and cat three", "tax one"]
    filled = make(tau=0.5, keep_last=0)
    add(filled, *texts)
    plain = make(tau=0.5, keep_last=0, fill=False)
    add(plain, *texts)
    assert [slot.turns for slot in plain.slots] == [[0, 1], [2, 3, 4], [5]]
    without = plain.select("cat", budget=1000)
    with_fill = filled.select("cat", budget=1000)
    assert without.turn_indices == [0, 1]
    assert with_fill.turn_indices == [0, 1, 4]  # the car thread's turn about the cat
    assert with_fill.details["filled"] == [4]
    assert filled.select("cat").turn_indices == [0, 1]  # no budget: nothing to fill


def test_centre_separates_turns_that_share_a_common_direction(hashing_embedder):
    chatter = "hey there how are you doing today my friend it is great to hear from you again"
    texts = [f"{chatter} {t} {t}" for t in ("cat", "car", "tax", "guitar")]
    plain = TopicThreadStrategy(embedder=hashing_embedder, token_counter=words, centre=False)
    centred = TopicThreadStrategy(embedder=hashing_embedder, token_counter=words)
    for k, text in enumerate(texts):
        plain.add(turn(k, text))
        centred.add(turn(k, text))
    assert len(plain.slots) == 1  # every turn "continues" the first thread
    assert len(centred.slots) == 4


def test_state_round_trip_is_plain_json():
    s = make(tau=0.5, max_slots=3)
    add(s, "cat one", "car two", "cat three", "tax four", "guitar five")
    state = json.loads(json.dumps(s.to_state()))
    embedder = KeywordEmbedder()
    restored = make(tau=0.5, max_slots=3, embedder=embedder)
    restored.load_state(state)
    assert embedder.calls == 0
    assert [x.to_dict() for x in restored.slots] == [x.to_dict() for x in s.slots]
    a, b = s.select("cat"), restored.select("cat")
    assert [(x.kind, x.turns, x.text) for x in a.blocks] == [(x.kind, x.turns, x.text) for x in b.blocks]
    add(restored, "cat six")
    assert restored.slots[0].turns[-1] == 5
    with pytest.raises(ConfigurationError):
        restored.load_state({"strategy": "other"})


def test_llm_compressor_calls_are_counted():
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "- The user has a cat."

    s = make(tau=0.5, summarizer=llm)
    add(s, "cat one", "cat two", "car three")
    assert s.llm_calls == 3 == len(prompts)
    assert s.slots[0].state == ["The user has a cat.", "The user has a cat."]


def test_failing_summarizer_falls_back_to_extractive():
    class Broken:
        def summarize(self, previous, window_text):
            raise RuntimeError("boom")

    s = make(summarizer=Broken())
    add(s, "My cat is called Miso and she is three.")
    assert s.slots[0].items


def test_explain_lists_threads_scores_and_decay():
    s = make(tau=0.5, alpha=0.05)
    add(s, "cat one", "car two", "tax three")
    text = s.explain("cat")
    assert "3 threads" in text and "decay" in text and "exp(-0.05" in text
    assert s.explain().startswith("3 threads")
    details = s.select("cat").details
    json.dumps(details)
    assert {t["slot"] for t in details["threads"]} == {x.id for x in s.slots}
    assert make().explain().startswith("topic threads: 0 slots")


def test_reset_and_empty():
    s = make()
    assert s.select("anything").blocks == []
    add(s, "cat one")
    s.reset()
    assert s.slots == [] and len(s) == 0 and s.slot_growth == []


@pytest.mark.parametrize(
    "bad",
    [
        {"tau": 2.0},
        {"tau": float("nan")},
        {"alpha": -0.1},
        {"max_slot_turns": 1},
        {"max_slots": 1},
        {"state_items": 0},
        {"top_k": 0},
        {"verbatim_turns": -1},
        {"keep_last": -1},
        {"summary_share": 1.5},
        {"centre": "yes"},
        {"fill": 1},
    ],
)
def test_bad_parameters(bad):
    with pytest.raises(ConfigurationError):
        make(**bad)


# -- parameters are declared once, in TopicThreadConfig -----------------------------------------
@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("tau", 1.5),
        ("tau", -1.01),
        ("tau", float("nan")),
        ("tau", "0.3"),
        ("alpha", -0.1),
        ("alpha", float("inf")),
        ("max_slot_turns", 1),
        ("max_slot_turns", 4.0),
        ("max_slots", 1),
        ("state_items", 0),
        ("top_k", 0),
        ("top_k", True),
        ("verbatim_turns", -1),
        ("keep_last", -1),
        ("keep_last", None),
        ("summary_share", -0.1),
        ("summary_share", 1.1),
        ("lexical_weight", -0.3),
        ("centre", "yes"),
        ("centre", 0),
        ("fill", 1),
    ],
)
def test_each_bad_parameter_is_named(name, bad):
    from ctxmgmt.strategies.topic_thread import TopicThreadConfig

    with pytest.raises(ConfigurationError, match=name):
        make(**{name: bad})
    with pytest.raises(ConfigurationError, match=name):
        TopicThreadConfig(**{name: bad})


def test_every_parameter_is_declared_with_its_default_and_a_doc():
    from ctxmgmt.strategies import topic_thread as tt

    specs = {p.name: p for p in tt.TopicThreadConfig.params()}
    assert {n: p.default for n, p in specs.items()} == {
        "tau": tt.TAU,
        "alpha": tt.ALPHA,
        "max_slot_turns": tt.MAX_SLOT_TURNS,
        "max_slots": tt.MAX_SLOTS,
        "state_items": tt.STATE_ITEMS,
        "top_k": tt.TOP_K,
        "verbatim_turns": tt.VERBATIM_TURNS,
        "keep_last": tt.KEEP_LAST,
        "summary_share": tt.SUMMARY_SHARE,
        "lexical_weight": tt.LEXICAL_WEIGHT,
        "centre": True,
        "fill": True,
        "memory_role": "user",
        "cache_friendly": False,
    }
    assert all(p.doc for p in specs.values())
    assert TopicThreadStrategy.components == ("embedder", "summarizer")


def test_config_object_keywords_and_paper():
    from ctxmgmt.strategies.topic_thread import TopicThreadConfig

    s = TopicThreadStrategy(TopicThreadConfig(tau=0.5), embedder=KeywordEmbedder(), alpha=0)
    assert (s.tau, s.alpha, s.centre, s.fill) == (0.5, 0.0, True, True)
    assert isinstance(s.alpha, float)
    paper = TopicThreadConfig.paper()
    assert (paper.centre, paper.fill) == (False, False)
    assert {k: v for k, v in paper.to_dict().items() if k not in ("centre", "fill")} == {
        k: v for k, v in TopicThreadConfig().to_dict().items() if k not in ("centre", "fill")
    }
    p = TopicThreadStrategy.from_paper(embedder=KeywordEmbedder(), token_counter=words, tau=0.5)
    assert (p.centre, p.fill, p.tau) == (False, False, 0.5)
    add(p, "cat one", "car two", "cat three")
    assert len(p.slots) == 2


def test_state_keeps_the_config_and_the_llm_calls():
    s = make(tau=0.5, summarizer=lambda prompt: "- The user has a cat.")
    add(s, "cat one", "cat two", "car three")
    state = json.loads(json.dumps(s.to_state()))
    assert state["config"] == s.config.to_dict() and state["llm_calls"] == 3
    restored = make(tau=0.5, summarizer=lambda prompt: "- Something else.")
    restored.load_state(state)
    assert restored.llm_calls == 3
    assert [x.to_dict() for x in restored.slots] == [x.to_dict() for x in s.slots]


def test_embeddings_are_cached_by_content_and_kept_by_reset():
    embedder = KeywordEmbedder()
    s = make(embedder=embedder)
    add(s, "cat one", "car two")
    add(s, "cat one")  # the same turn again: no new embedding
    assert embedder.calls == 2
    s.reset()
    add(s, "cat one", "car two", "tax three")
    assert embedder.calls == 3  # only the new turn


def test_turn_relevance_is_the_shared_fused_relevance():
    from ctxmgmt.components.embedder import embed_query
    from ctxmgmt.scoring.relevance import fused_relevance

    s = make(lexical_weight=0.5)
    add(s, "My cat sleeps.", "My car is red.", "The cat and the vet.")
    q = "cat vet"
    matrix = np.vstack(s.to_state()["embeddings"]).astype(np.float64)
    query = embed_query(s.embedder, q)[0].astype(np.float64)
    expected = fused_relevance(matrix, query, s._lexical, q, lexical_weight=0.5)
    np.testing.assert_array_equal(s.turn_relevance(q), expected)
    plain = make(lexical_weight=0)
    add(plain, "My cat sleeps.", "My car is red.", "The cat and the vet.")
    np.testing.assert_allclose(plain.turn_relevance(q), matrix @ query)


def test_the_fast_twin_keeps_the_config_and_counter_with_the_static_encoder_and_no_llm(hashing_embedder):
    from ctxmgmt.app.testing import FakeLLM, HashingEmbedder, plausible_answer
    from ctxmgmt.components.embedder import embed_query
    from ctxmgmt.components.static_embedder import MAX_TOKENS, StaticEmbedder
    from ctxmgmt.components.static_turns import TWIN_TURN_TOKENS
    from ctxmgmt.components.summarizer import ExtractiveSummarizer
    from ctxmgmt.scoring.relevance import fused_relevance

    llm = FakeLLM(plausible_answer)
    strategy = TopicThreadStrategy(
        embedder=hashing_embedder, summarizer=llm, token_counter=words, tau=0.3, top_k=2
    )
    twin = strategy.fast_twin()
    assert isinstance(twin, TopicThreadStrategy) and twin is not strategy and len(twin) == 0
    assert twin.config == strategy.config and twin.tau == 0.3
    assert twin.token_counter.count("one two three") == 3  # the strategy's counter (words)
    assert isinstance(twin.embedder, StaticEmbedder)  # no questions: the static encoder for all
    assert not isinstance(twin.summarizer, FakeLLM) and isinstance(twin.summarizer, ExtractiveSummarizer)
    turns = [Turn(i, (Message("user", f"Rome trip day {i}"), Message("assistant", "ok"))) for i in range(12)]
    twin.add_many(turns)
    query = "What did we do in Rome?"
    assert twin.select(query).blocks and twin.llm_calls == 0 and llm.prompts == []

    questions = HashingEmbedder(dim=384)  # the static encoder's dimension, as MiniLM's
    asked = strategy.fast_twin(questions)
    asked.add_many(turns)
    assert isinstance(asked.embedder, StaticEmbedder)  # threads: built and retrieved in the static space
    assert asked.embedder.max_tokens == TWIN_TURN_TOKENS and twin.embedder.max_tokens == MAX_TOKENS
    assert asked.scores(asked._query_vector(query), 12) == twin.scores(twin._query_vector(query), 12)
    ranked_by = embed_query(questions, query)[0].astype(np.float64)  # turns: by ``questions``
    expected = fused_relevance(asked._rows.matrix(), ranked_by, asked._lexical, query, lexical_weight=0.3)
    np.testing.assert_allclose(asked.turn_relevance(query), expected)
    assert not np.allclose(twin.turn_relevance(query), expected)

    # standing in for MiniLM with no budget, threads are retrieved above the shifted threshold
    assert asked.select(query).details["tau"] == 0.3 + TWIN_UNBUDGETED_TAU_SHIFT
    assert asked.select(query, budget=200).details["tau"] == twin.select(query).details["tau"] == 0.3
    low = TopicThreadStrategy(embedder=hashing_embedder, token_counter=words, tau=0.1, top_k=2)
    low_twin = low.fast_twin(questions)
    low_twin.add_many(turns)
    unbudgeted, budgeted = low_twin.select(query).details, low_twin.select(query, budget=200).details
    lower = 0.1 + TWIN_UNBUDGETED_TAU_SHIFT
    above = sorted((-row["score"], row["slot"]) for row in unbudgeted["threads"] if row["score"] > lower)
    assert len(above) > 2 and unbudgeted["retrieved"] == sorted(slot for _, slot in above[:2])
    assert budgeted["fallback_top1"] and len(budgeted["retrieved"]) == 1  # none above tau itself


def test_over_budget_a_long_turn_sends_its_user_message_alone():
    s = make(tau=0.5, keep_last=0)
    reply = " ".join(["That is a good question about many things."] * 40)  # over 1,000 characters
    for k, text in enumerate(["My cat is called Miso.", "The cat sleeps on the sofa.", "My car is red."]):
        s.add(Turn(k, (Message("user", text), Message("assistant", reply))))
    whole = s.select("cat")
    assert set(whole.turn_indices) >= {0, 1} and not whole.user_only_turns  # no budget: whole turns
    budget = s.tokens_of([0]) + 30
    context = s.select("cat", budget=budget)
    assert context.tokens <= budget
    assert set(context.turn_indices) | set(context.user_only_turns) >= {0, 1}
    assert context.user_only_turns  # one of the cat turns goes without its reply
    for block in context.blocks:
        if block.reply_left_out:
            assert block.messages == s.turns[block.turns[0]].messages[:1]
            assert "reply left out for the budget" in block.reason
