"""KadaneDialStrategy: relevance, blocks, keep_last, budget trimming, explain, persistence."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxmgmt import ConfigurationError, KadaneDialStrategy, Message, Turn, group_turns, kadane_dial
from ctxmgmt.components.budget import messages_tokens
from ctxmgmt.scoring.lexical import scores_for
from ctxmgmt.strategies.kadanedial import LEXICAL_WEIGHT, NEIGHBOUR_WEIGHT, SHARPNESS
from tests.helpers import PROPERTY_WITH_FIXTURE, TOPICS

N = len(TOPICS)

QUERIES = {
    "spaghetti pasta boil salted water sauce": (0, 2),
    "car engine rattling exhaust mechanic": (3, 5),
    "garden tomato plants seedlings stakes": (6, 8),
    "python file dictionary list": (9, 11),
}


def turns():
    return group_turns([m for q, a in TOPICS for m in (Message("user", q), Message("assistant", a))])


def make(embedder, **kwargs) -> KadaneDialStrategy:
    """The strategy with its defaults (fused, sharpened, neighbour-smoothed signal)."""
    strategy = KadaneDialStrategy(embedder=embedder, **kwargs)
    strategy.add_many(turns())
    return strategy


def make_paper(embedder, **kwargs) -> KadaneDialStrategy:
    """DYCP as published: the dense cosine score alone."""
    strategy = KadaneDialStrategy.from_paper(embedder=embedder, **kwargs)
    strategy.add_many(turns())
    return strategy


def runs(indices):
    out: list[list[int]] = []
    for i in sorted(indices):
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def check_blocks(strategy: KadaneDialStrategy, context) -> None:
    """Blocks are maximal runs of whole turns, chronological, with honest token counts."""
    indices = [i for b in context.blocks for i in b.turns]
    assert indices == sorted(set(indices))
    assert [list(b.turns) for b in context.blocks] == runs(indices)
    for block in context.blocks:
        assert block.kind == "turns"
        assert block.messages == tuple(m for i in block.turns for m in strategy.turns[i].messages)
        assert block.tokens == strategy.tokens_of(block.turns)
        assert block.tokens == messages_tokens(strategy.token_counter, block.messages)


# ---------------------------------------------------------------------------------------
# Relevance and layout
# ---------------------------------------------------------------------------------------


def assert_selects_topic(context, topic: tuple[int, int], signal: str) -> None:
    """Every turn of ``topic`` is selected, at most one other turn, and on ``signal`` (a list of
    ``context.details``) the topic's turns score above every other turn."""
    start, end = topic
    topic_turns = set(range(start, end + 1))
    assert topic_turns <= set(context.turn_indices)
    assert len(set(context.turn_indices) - topic_turns) <= 1
    values = np.asarray(context.details[signal])
    assert values[start : end + 1].min() > np.delete(values, list(topic_turns)).max()


@pytest.mark.parametrize(("query", "topic"), list(QUERIES.items()))
def test_paper_query_selects_its_topic(hashing_embedder, query, topic) -> None:
    strategy = make_paper(hashing_embedder)
    context = strategy.select(query)
    # The first (best) pass is exactly the topic's turns; beyond it, only the one span whose
    # gain first fell below theta; the topic's turns score above every other turn.
    assert context.details["spans"][0] == list(topic)
    assert context.details["span_gains"][0] >= strategy.theta
    assert_selects_topic(context, topic, "scores")


@pytest.mark.parametrize(("query", "topic"), list(QUERIES.items()))
def test_default_query_selects_its_topic(hashing_embedder, query, topic) -> None:
    context = make(hashing_embedder).select(query)
    start, end = topic
    first = context.details["spans"][0]
    assert start <= first[0] < first[1] <= end  # the best pass is inside the topic
    assert_selects_topic(context, topic, "relevance")


def test_selection_matches_kadane_dial_on_the_scores(hashing_embedder) -> None:
    strategy = make(hashing_embedder, tau=0.3, theta=0.5)
    query = "tomato pasta sauce garden"
    scores = strategy.signal(strategy.relevance(query))
    result = kadane_dial(scores.tolist(), tau=0.3, theta=0.5)
    context = strategy.select(query)
    assert context.turn_indices == result.selected
    assert context.details["spans"] == [list(s) for s in result.spans]
    assert context.details["z"] == pytest.approx(list(result.z))


def test_blocks_are_chronological(hashing_embedder) -> None:
    strategy = make(hashing_embedder, theta=-2.0)  # low theta: several spans, found out of order
    context = strategy.select("python file dictionary list")
    spans = [tuple(s) for s in context.details["spans"]]
    assert len(spans) >= 3
    assert spans != sorted(spans)  # the passes found them out of chronological order ...
    check_blocks(strategy, context)  # ... but the blocks are chronological
    flat = [m for b in context.blocks for m in b.messages]
    order = {id(m): k for k, t in enumerate(strategy.turns) for m in t.messages}
    assert [order[id(m)] for m in flat] == sorted(order[id(m)] for m in flat)


def test_turn_indices_are_strategy_positions(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    for turn in turns():
        strategy.add(turn)
    assert [t.index for t in strategy.turns] == list(range(N))
    batched = make(hashing_embedder)
    assert strategy.select("car engine").turn_indices == batched.select("car engine").turn_indices


def test_empty_strategy(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    context = strategy.select("anything")
    assert context.blocks == []
    assert context.details == {}
    assert strategy.relevance("anything").shape == (0,)
    assert hashing_embedder.calls == []


def test_one_turn(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    strategy.add(turns()[0])
    context = strategy.select("car")
    assert context.turn_indices == [0]


# ---------------------------------------------------------------------------------------
# keep_last
# ---------------------------------------------------------------------------------------


def test_keep_last_is_always_kept(hashing_embedder) -> None:
    strategy = make(hashing_embedder, keep_last=2)
    context = strategy.select("spaghetti pasta boil salted water sauce")
    assert {N - 2, N - 1} <= set(context.turn_indices)
    assert context.details["recent"] == [N - 2, N - 1]
    assert set(range(0, 3)) <= set(context.turn_indices)
    last = context.blocks[-1]
    assert last.turns[-2:] == (N - 2, N - 1)
    span_turns = {i for s, e in context.details["spans"] for i in range(s, e + 1)}
    if not span_turns & set(last.turns):
        assert last.reason == "one of the last 2 turns"
    check_blocks(strategy, context)


def test_keep_last_zero_and_larger_than_history(hashing_embedder) -> None:
    query = "car engine rattling exhaust mechanic"
    assert make(hashing_embedder).select(query).details["recent"] == []
    everything = make(hashing_embedder, keep_last=100).select(query)
    assert everything.turn_indices == list(range(N))
    assert len(everything.blocks) == 1


def test_block_reason_names_the_span(hashing_embedder) -> None:
    context = make_paper(hashing_embedder).select("car engine rattling exhaust mechanic")
    block = next(b for b in context.blocks if 3 in b.turns)
    assert block.reason.startswith("span 3-5 gain ")


# ---------------------------------------------------------------------------------------
# Budget trimming
# ---------------------------------------------------------------------------------------


@PROPERTY_WITH_FIXTURE
@given(
    budget=st.integers(min_value=0, max_value=500),
    query=st.sampled_from([*QUERIES, "tomato pasta", "zebra"]),
    keep_last=st.integers(0, 5),
    theta=st.sampled_from([1.0, 0.0, -3.0]),
)
def test_budget_trimming_by_edges(hashing_embedder, budget, query, keep_last, theta) -> None:
    strategy = make(hashing_embedder, keep_last=keep_last, theta=theta, budget_order="edges")
    full = strategy.select(query)
    chosen = set(full.turn_indices)
    context = strategy.select(query, budget=budget)
    kept = set(context.turn_indices)

    assert context.tokens <= budget
    check_blocks(strategy, context)
    assert kept <= chosen
    assert set(context.details["dropped"]) == chosen - kept
    assert context.details["dropped"] == sorted(context.details["dropped"])
    if full.tokens <= budget:
        assert kept == chosen
    # Only span edges are dropped: what is left of every untrimmed run stays contiguous.
    for run in runs(chosen):
        left = sorted(kept & set(run))
        if left:
            assert left == list(range(left[0], left[-1] + 1))
    # Nothing is dropped unless the untrimmed selection is over budget.
    if context.details["dropped"]:
        assert full.tokens > budget
    # The last keep_last turns are dropped only once nothing else is left, oldest first.
    recent = set(full.details["recent"])
    if (chosen - kept) & recent:
        assert kept <= recent
        assert sorted(kept) == sorted(recent & chosen)[len(recent & chosen) - len(kept) :]


def test_budget_drops_the_lowest_scoring_edge(hashing_embedder) -> None:
    strategy = make(hashing_embedder, budget_order="edges")
    query = "car engine rattling exhaust mechanic"
    full = strategy.select(query)
    chosen = set(full.turn_indices)
    scores = full.details["scores"]
    edges = [i for i in chosen if i - 1 not in chosen or i + 1 not in chosen]
    victim = min(edges, key=lambda i: (scores[i], i))
    context = strategy.select(query, budget=full.tokens - 1)
    assert context.details["dropped"] == [victim]
    assert set(context.turn_indices) == chosen - {victim}
    assert "dropped for the budget" in context.explain()


@PROPERTY_WITH_FIXTURE
@given(
    budget=st.integers(min_value=0, max_value=500),
    query=st.sampled_from([*QUERIES, "tomato pasta", "zebra"]),
    keep_last=st.integers(0, 5),
)
def test_budget_keeps_the_most_relevant_chosen_turns(hashing_embedder, budget, query, keep_last) -> None:
    strategy = make(hashing_embedder, keep_last=keep_last)
    full = strategy.select(query)
    chosen = set(full.turn_indices)
    context = strategy.select(query, budget=budget)
    kept = set(context.turn_indices)
    assert context.tokens <= budget and kept <= chosen
    check_blocks(strategy, context)
    assert set(context.details["dropped"]) == chosen - kept
    if full.tokens <= budget:
        assert kept == chosen
    recent = set(full.details["recent"])
    own = [max(r, 0.0) ** strategy.sharpness for r in full.details["relevance"]]
    tokens = {i: strategy.tokens_of([i]) for i in chosen}
    used = sum(tokens[i] for i in kept)
    for i in chosen - kept - recent:  # dropped: it did not fit beside the better turns kept
        better = [k for k in kept - recent if (own[k], -k) > (own[i], -i)]
        assert sum(tokens[k] for k in better) + sum(tokens[k] for k in kept & recent) + tokens[i] > budget
        assert used + tokens[i] > budget


def test_budget_keeps_a_peak_before_a_weak_neighbour(hashing_embedder) -> None:
    strategy = make(hashing_embedder)
    query = "car engine rattling exhaust mechanic"
    full = strategy.select(query)
    own = full.details["relevance"]
    chosen = sorted(full.turn_indices, key=lambda i: (-own[i], i))
    best = chosen[0]
    context = strategy.select(query, budget=strategy.tokens_of([best]))
    assert context.turn_indices == [best]
    assert "dropped for the budget" in context.explain()


def test_budget_zero_drops_everything(hashing_embedder) -> None:
    strategy = make(hashing_embedder, keep_last=3)
    context = strategy.select("pasta", budget=0)
    assert context.blocks == []
    assert context.tokens == 0


def test_budget_larger_than_history_changes_nothing(hashing_embedder) -> None:
    strategy = make(hashing_embedder, keep_last=1)
    query = "garden tomato plants seedlings stakes"
    a = strategy.select(query)
    b = strategy.select(query, budget=strategy.total_tokens)
    assert a.turn_indices == b.turn_indices
    assert b.details["dropped"] == []


# ---------------------------------------------------------------------------------------
# explain() and details
# ---------------------------------------------------------------------------------------


def test_explain_mentions_spans(hashing_embedder) -> None:
    context = make_paper(hashing_embedder).select("car engine rattling exhaust mechanic")
    text = context.explain()
    assert text.startswith("kadanedial: ")
    assert "turns 3-5" in text
    assert "pass 1: span 3-5, summed gain" in text
    assert "peak z" in text
    assert repr("car engine rattling exhaust mechanic") in text
    assert str(context) == text
    for k, (s, e) in enumerate(context.details["spans"]):
        assert f"pass {k + 1}: span {s}-{e}" in text


def test_details_contents(hashing_embedder) -> None:
    strategy = make(hashing_embedder, tau=0.5, theta=0.8, keep_last=1)
    query = "python file dictionary list"
    context = strategy.select(query)
    details = context.details
    assert set(details) >= {
        "relevance",
        "scores",
        "z",
        "gains",
        "spans",
        "span_gains",
        "recent",
        "dropped",
        "tau",
        "theta",
        "explain",
    }
    assert len(details["relevance"]) == len(details["scores"]) == len(details["z"]) == N
    assert len(details["gains"]) == N
    assert details["relevance"] == pytest.approx(strategy.relevance(query).tolist())
    assert details["scores"] == pytest.approx(strategy.signal(strategy.relevance(query)).tolist())
    assert details["gains"] == pytest.approx([z - 0.5 for z in details["z"]])
    assert len(details["spans"]) == len(details["span_gains"]) == len(details["explain"])
    assert details["tau"] == 0.5 and details["theta"] == 0.8
    assert details["recent"] == [N - 1]
    assert details["dropped"] == []
    json.dumps(details)  # plain data
    assert context.query == query
    assert context.strategy == "kadanedial"
    assert context.history_tokens == strategy.total_tokens


def test_paper_scores_are_the_relevance(hashing_embedder) -> None:
    context = make_paper(hashing_embedder).select("garden tomato")
    assert context.details["scores"] == context.details["relevance"]


# ---------------------------------------------------------------------------------------
# Relevance signal: lexical fusion, sharpening, neighbours
# ---------------------------------------------------------------------------------------


def test_defaults_and_from_paper(hashing_embedder) -> None:
    default = KadaneDialStrategy(embedder=hashing_embedder)
    assert (default.lexical_weight, default.sharpness, default.neighbour_weight) == (
        LEXICAL_WEIGHT,
        SHARPNESS,
        NEIGHBOUR_WEIGHT,
    )
    paper = KadaneDialStrategy.from_paper(embedder=hashing_embedder)
    assert (paper.lexical_weight, paper.sharpness, paper.neighbour_weight) == (0.0, 1.0, 0.0)
    assert (paper.tau, paper.theta, paper.keep_last) == (0.6, 1.0, 0)
    tuned = KadaneDialStrategy.from_paper(embedder=hashing_embedder, tau=0.4, sharpness=2.0)
    assert (tuned.tau, tuned.sharpness, tuned.lexical_weight) == (0.4, 2.0, 0.0)


def test_lexical_weight_changes_relevance(hashing_embedder) -> None:
    dense = make_paper(hashing_embedder)
    fused = make_paper(hashing_embedder, lexical_weight=0.7)
    query = "rattling exhaust"
    bm25 = scores_for([t.text for t in turns()], query)
    assert bm25.max() > 0
    expected = dense.relevance(query) + 0.7 * bm25 / bm25.max()
    assert fused.relevance(query) == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert not np.allclose(fused.relevance(query), dense.relevance(query))
    # With the paper's shaping the signal is the relevance itself.
    np.testing.assert_array_equal(fused.signal(fused.relevance(query)), fused.relevance(query))


def test_lexical_weight_without_a_lexical_match_changes_nothing(hashing_embedder) -> None:
    dense = make_paper(hashing_embedder)
    fused = make_paper(hashing_embedder, lexical_weight=2.0)
    query = "zebra giraffe"
    assert fused.relevance(query) == pytest.approx(dense.relevance(query))


def test_lexical_weight_can_change_the_selection(hashing_embedder) -> None:
    # BM25 stems "rattles" (turn 4) to "rattle"; the bag-of-words embedder does not match it.
    query = "rattle"
    dense = make_paper(hashing_embedder).select(query)
    fused = make_paper(hashing_embedder, lexical_weight=5.0).select(query)
    assert fused.details["spans"][0] == [4, 4]
    assert 4 not in dense.turn_indices
    assert fused.turn_indices != dense.turn_indices


def test_signal_sharpens_clipped_relevance(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder, sharpness=3.0, neighbour_weight=0.0)
    relevance = np.array([-0.5, 0.0, 0.2, 0.5, 1.0])
    np.testing.assert_allclose(strategy.signal(relevance), [0.0, 0.0, 0.008, 0.125, 1.0])


def test_signal_adds_the_neighbours_mean(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder, sharpness=1.5, neighbour_weight=0.4)
    relevance = np.array([0.1, 0.9, 0.3, -0.2, 0.6, 0.4])
    shaped = np.maximum(relevance, 0.0) ** 1.5
    signal = strategy.signal(relevance)
    assert signal.shape == relevance.shape
    for i in range(1, len(relevance) - 1):  # interior turns: both neighbours exist
        assert signal[i] == pytest.approx(shaped[i] + 0.4 * (shaped[i - 1] + shaped[i + 1]) / 2)
    assert np.all(signal >= 0)
    assert strategy.signal(np.array([0.7])) == pytest.approx([0.7**1.5])
    assert strategy.signal(np.zeros(0)).shape == (0,)


def test_neighbour_term_lets_a_span_grow_around_a_peak(hashing_embedder) -> None:
    relevance = np.array([0.1, 0.12, 0.35, 0.9, 0.34, 0.1, 0.11, 0.1, 0.12, 0.1])
    plain = KadaneDialStrategy(embedder=hashing_embedder, sharpness=1.0, neighbour_weight=0.0)
    smooth = KadaneDialStrategy(embedder=hashing_embedder, sharpness=1.0, neighbour_weight=1.0)
    peak = kadane_dial(plain.signal(relevance).tolist()).spans[0]
    grown = kadane_dial(smooth.signal(relevance).tolist()).spans[0]
    assert peak[0] <= 3 <= peak[1]
    assert grown[0] <= peak[0] and peak[1] <= grown[1]


# ---------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tau": math.nan},
        {"tau": math.inf},
        {"tau": "0.6"},
        {"tau": True},
        {"tau": None},
        {"theta": -math.inf},
        {"theta": math.nan},
        {"theta": "1"},
        {"theta": False},
        {"lexical_weight": -0.1},
        {"lexical_weight": math.nan},
        {"lexical_weight": "0.5"},
        {"sharpness": 0},
        {"sharpness": -1.0},
        {"sharpness": math.nan},
        {"sharpness": "3"},
        {"neighbour_weight": -0.1},
        {"neighbour_weight": math.inf},
        {"neighbour_weight": True},
        {"keep_last": -1},
        {"keep_last": 1.5},
        {"keep_last": True},
        {"keep_last": "2"},
        {"keep_last": None},
        {"embedder": 42},
        {"token_counter": 42},
    ],
)
def test_invalid_params(hashing_embedder, kwargs) -> None:
    kwargs.setdefault("embedder", hashing_embedder)
    with pytest.raises(ConfigurationError):
        KadaneDialStrategy(**kwargs)


def test_valid_params_are_stored(hashing_embedder) -> None:
    s = KadaneDialStrategy(
        embedder=hashing_embedder,
        tau=1,
        theta=0,
        keep_last=3,
        lexical_weight=0.25,
        sharpness=2,
        neighbour_weight=0,
    )
    assert (s.tau, s.theta, s.keep_last, s.lexical_weight) == (1.0, 0.0, 3, 0.25)
    assert (s.sharpness, s.neighbour_weight) == (2.0, 0.0)
    assert isinstance(s.tau, float) and isinstance(s.sharpness, float)


def test_custom_token_counter(hashing_embedder) -> None:
    strategy = make(hashing_embedder, token_counter=lambda text: len(text.split()))
    first = strategy.turns[0]
    expected = sum(len(m.text.split()) + 4 for m in first.messages)
    assert strategy.tokens_of([0]) == expected


# ---------------------------------------------------------------------------------------
# Persistence and caching
# ---------------------------------------------------------------------------------------


def test_state_round_trip_without_re_embedding(hashing_embedder) -> None:
    from ctxmgmt.app.testing import HashingEmbedder

    original = make(hashing_embedder, keep_last=1)
    state = json.loads(json.dumps(original.to_state()))
    assert state["strategy"] == "kadanedial"
    assert len(state["turns"]) == len(state["embeddings"]) == N

    fresh = HashingEmbedder()
    restored = KadaneDialStrategy(embedder=fresh, keep_last=1)
    restored.load_state(state)
    assert fresh.calls == []  # nothing re-embedded
    assert [t.fingerprint for t in restored.turns] == [t.fingerprint for t in original.turns]
    assert restored.total_tokens == original.total_tokens
    np.testing.assert_array_equal(restored.matrix, original.matrix)

    query = "garden tomato plants seedlings stakes"
    a, b = original.select(query), restored.select(query)
    assert fresh.calls == [1]  # only the query
    assert a.turn_indices == b.turn_indices
    assert a.details["scores"] == pytest.approx(b.details["scores"])
    assert a.messages() == b.messages()


def test_load_state_replaces_previous_turns(hashing_embedder) -> None:
    state = make(hashing_embedder).to_state()
    other = KadaneDialStrategy(embedder=hashing_embedder)
    other.add(turns()[5])
    other.load_state(state)
    assert len(other) == N


def test_load_state_rejects_another_strategy(hashing_embedder) -> None:
    state = make(hashing_embedder).to_state()
    state["strategy"] = "summary"
    with pytest.raises(ConfigurationError):
        KadaneDialStrategy(embedder=hashing_embedder).load_state(state)


def test_reset_keeps_the_embedding_cache(hashing_embedder) -> None:
    strategy = make(hashing_embedder)
    assert hashing_embedder.calls == [N]
    strategy.reset()
    assert len(strategy) == 0 and strategy.total_tokens == 0
    assert strategy.select("pasta").blocks == []
    strategy.add_many(turns())
    assert hashing_embedder.calls == [N]
    assert strategy.matrix.shape == (N, hashing_embedder.dim)


def test_equal_turns_share_their_embedding(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    same = turns()[0]
    strategy.add(same)
    strategy.add(same)
    strategy.add_many([same, turns()[1]])
    assert hashing_embedder.calls == [1, 1]  # only turn 1 was new
    assert len(strategy) == 4
    assert [t.index for t in strategy.turns] == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------
# The real default embedder (one small case)
# ---------------------------------------------------------------------------------------


def test_default_embedder_small_case(default_embedder) -> None:
    conversation = [
        ("I adopted a kitten from the shelter last week.", "Congratulations on your new cat!"),
        ("She keeps scratching the sofa.", "Try a scratching post and trim her claws."),
        ("What's the capital of Australia?", "Canberra is the capital of Australia."),
        ("Recommend a good science fiction novel.", "Try 'The Left Hand of Darkness'."),
        ("How do I fix a flat bicycle tyre?", "Patch the inner tube or replace it."),
        ("What is the boiling point of water?", "100 degrees Celsius at sea level."),
    ]
    messages = [m for q, a in conversation for m in (Message("user", q), Message("assistant", a))]
    query = "What pet do I have and what problem does it cause?"
    for strategy in (
        KadaneDialStrategy(embedder=default_embedder),
        KadaneDialStrategy.from_paper(embedder=default_embedder),
    ):
        strategy.add_many(group_turns(messages))
        context = strategy.select(query)
        first = context.details["spans"][0]
        assert 0 <= first[0] <= first[1] <= 1, context.explain()
        assert {0, 1} <= set(context.turn_indices), context.explain()
        assert len(context.turn_indices) <= 3, context.explain()
        assert strategy.matrix.shape == (6, 384)


# -- second query embedding without the words common to most turns ---------------------------
def _chat(n: int) -> list:
    """``n`` turns between Ana and Ben: their names are in every turn, the topics vary."""
    topics = ["sourdough bread", "marathon training", "tax forms", "garden tomatoes", "jazz records"]
    messages = []
    for i in range(n):
        messages.append(Message("user", f"I spent the day on {topics[i % 5]} again", name="Ana"))
        messages.append(Message("assistant", f"How did the {topics[i % 5]} go?", name="Ben"))
    return group_turns(messages)


def test_index_share_and_common_word_removal() -> None:
    from ctxmgmt.scoring.lexical import BM25Index

    index = BM25Index()
    for text in ["Ana: bread", "Ana: tomatoes", "Ana: jazz", "Ben: bread"]:
        index.add(text)
    assert index.document_share("ana") == 0.75 and index.document_share("bread") == 0.5
    assert index.without_common_words("What did Ana's bread taste like?", 0.6) == "What did bread taste like?"
    assert BM25Index().document_share("ana") == 0.0


def test_focused_query_drops_the_speakers_names(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    strategy.add_many(_chat(20))
    assert strategy.focused_query("What did Ana say about the jazz records?") == (
        "What did say about the jazz records?"
    )
    assert strategy.focused_query("What about the jazz records?") is None  # nothing common
    q, focused = hashing_embedder.embed(["What did Ana bake?", "What did bake?"])
    expected = (q + focused) / np.linalg.norm(q + focused)
    np.testing.assert_allclose(strategy.query_vector("What did Ana bake?"), expected, atol=1e-6)


def test_focused_query_needs_enough_turns_and_can_be_turned_off(hashing_embedder) -> None:
    few = KadaneDialStrategy(embedder=hashing_embedder)
    few.add_many(_chat(5))
    assert few.focused_query("What did Ana say about jazz?") is None
    off = KadaneDialStrategy(embedder=hashing_embedder, common_share=None)
    off.add_many(_chat(20))
    assert off.focused_query("What did Ana say about jazz?") is None
    np.testing.assert_allclose(
        off.query_vector("What did Ana bake?"), hashing_embedder.embed(["What did Ana bake?"])[0], atol=1e-6
    )


@pytest.mark.parametrize("bad", [0, 1.5, -0.2, True, "half", math.nan])
def test_invalid_common_share(bad) -> None:
    with pytest.raises(ConfigurationError):
        KadaneDialStrategy(common_share=bad, embedder=lambda texts: np.ones((len(texts), 3)))


def test_paper_settings_use_the_paper_tau_and_one_query_embedding() -> None:
    from ctxmgmt.scoring.kadane import TAU

    paper = KadaneDialStrategy.from_paper(embedder=lambda texts: np.ones((len(texts), 3)))
    assert (paper.tau, paper.common_share, paper.lexical_weight) == (TAU, None, 0.0)


def test_embed_queries_uses_the_query_path_when_there_is_one() -> None:
    from ctxmgmt.components.embedder import CallableEmbedder, embed_queries

    seen: list[str] = []
    embedder = CallableEmbedder(
        lambda texts: [[1.0, 0.0]] * len(texts), lambda text: seen.append(text) or [0.0, 2.0]
    )
    out = embed_queries(embedder, ["a", "b"])
    assert seen == ["a", "b"]
    np.testing.assert_allclose(out, [[0.0, 1.0], [0.0, 1.0]])


# -- one config, one relevance function, one embedding cache -----------------------------------
@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("tau", math.nan),
        ("tau", "0.5"),
        ("theta", math.inf),
        ("keep_last", -1),
        ("keep_last", 1.5),
        ("lexical_weight", -0.1),
        ("sharpness", 0),
        ("neighbour_weight", -0.1),
        ("common_share", 0),
        ("common_share", 1.5),
        ("common_share", True),
    ],
)
def test_each_bad_parameter_is_named(hashing_embedder, name, bad) -> None:
    from ctxmgmt.strategies.kadanedial import KadaneDialConfig

    with pytest.raises(ConfigurationError, match=name):
        KadaneDialStrategy(embedder=hashing_embedder, **{name: bad})
    with pytest.raises(ConfigurationError, match=name):
        KadaneDialConfig(**{name: bad})


def test_state_carries_the_config(hashing_embedder) -> None:
    state = json.loads(json.dumps(make(hashing_embedder, keep_last=2).to_state()))
    assert state["config"]["keep_last"] == 2 and state["config"]["common_share"] == 0.5
    assert state["llm_calls"] == 0


def test_load_state_fills_the_embedding_cache(hashing_embedder) -> None:
    from ctxmgmt.app.testing import HashingEmbedder

    state = make(hashing_embedder).to_state()
    fresh = HashingEmbedder()
    restored = KadaneDialStrategy(embedder=fresh)
    restored.load_state(state)
    restored.add(turns()[3])  # seen in the state: not embedded again
    assert fresh.calls == [] and len(restored) == N + 1
    np.testing.assert_array_equal(restored.matrix[N], restored.matrix[3])


def test_the_embedding_cache_is_bounded(hashing_embedder) -> None:
    from ctxmgmt.components.embedder import EmbeddingCache

    assert isinstance(make(hashing_embedder)._embeddings, EmbeddingCache)
    small = KadaneDialStrategy(embedder=hashing_embedder)
    small._embeddings.size = 4
    small.add_many(turns())  # every turn still gets its vector, in one batch
    assert hashing_embedder.calls == [N, N] and small.matrix.shape == (N, hashing_embedder.dim)
    assert len(small._embeddings) == 4
    np.testing.assert_array_equal(small.matrix, make(hashing_embedder).matrix)


def test_relevance_is_the_shared_fused_relevance(hashing_embedder) -> None:
    from ctxmgmt.scoring.relevance import fused_relevance
    from ctxmgmt.strategies.topic_thread import TopicThreadStrategy

    strategy = make(hashing_embedder, common_share=None)
    query = "spaghetti pasta sauce and the car engine"
    expected = fused_relevance(
        strategy.matrix, strategy.query_vector(query), strategy._lexical, query, lexical_weight=LEXICAL_WEIGHT
    )
    np.testing.assert_array_equal(strategy.relevance(query), expected)
    # TopicThread ranks its turns with the same function (in float64)
    threads = TopicThreadStrategy(embedder=hashing_embedder, lexical_weight=LEXICAL_WEIGHT)
    threads.add_many(turns())
    np.testing.assert_allclose(threads.turn_relevance(query), strategy.relevance(query), atol=1e-6)


def test_the_same_query_is_scored_once_until_the_turns_change(hashing_embedder, monkeypatch) -> None:
    # Memory truncating a block selects the same query again: the second selection only trims.
    import ctxmgmt.strategies.kadanedial as module

    passes: list[int] = []

    def counting(scores, **kwargs):
        passes.append(len(scores))
        return kadane_dial(scores, **kwargs)

    monkeypatch.setattr(module, "kadane_dial", counting)
    strategy = make(hashing_embedder)
    query = "car engine rattling exhaust mechanic"
    full = strategy.select(query)
    trimmed = strategy.select(query, budget=full.tokens // 2)
    assert passes == [N]
    assert trimmed.tokens <= full.tokens // 2 < full.tokens
    assert strategy.select("garden tomato plants").turn_indices and passes == [N, N]

    strategy.add(turns()[0])  # a new turn: scored again, over every turn
    strategy.select(query)
    assert passes[-1] == N + 1

    strategy.reset()  # other turns, as many as before: scored again, on them
    strategy.add_many(list(reversed(turns())) + [turns()[0]])
    again = strategy.select(query)
    assert passes[-1] == N + 1
    fresh = KadaneDialStrategy(embedder=hashing_embedder)
    fresh.add_many(strategy.turns)
    assert again.turn_indices == fresh.select(query).turn_indices != full.turn_indices

    restored = make(hashing_embedder)  # scored the query on the old turns, then restored
    restored.add(turns()[0])
    assert restored.select(query).turn_indices == full.turn_indices
    restored.load_state(strategy.to_state())
    assert restored.select(query).turn_indices == again.turn_indices


def test_a_repeated_query_is_embedded_again_when_its_focused_form_changes():
    """The query vector depends on which query words most turns share (``focused_query``):
    the same question asked again after more turns must score as a fresh strategy scores it."""
    from ctxmgmt.app.testing import HashingEmbedder

    def turn(i: int) -> Turn:
        return Turn(i, (Message("user", f"Ana: my cat number {i}"), Message("assistant", f"Ana: noted {i}")))

    query = "Ana, what about cat number 3?"
    grown = KadaneDialStrategy(embedder=HashingEmbedder())
    grown.add_many([turn(i) for i in range(10)])
    grown.relevance(query)  # too few turns for common words: one query embedding, cached
    grown.add_many([turn(i) for i in range(10, 40)])
    fresh = KadaneDialStrategy(embedder=HashingEmbedder())
    fresh.add_many([turn(i) for i in range(40)])
    assert fresh.focused_query(query) is not None
    np.testing.assert_allclose(grown.relevance(query), fresh.relevance(query), rtol=1e-6)


# ---------------------------------------------------------------------------------------
# Long replies over budget: a turn's user message alone (assistant chats, LongMemEval)
# ---------------------------------------------------------------------------------------


def long_reply_turns() -> list[Turn]:
    """``TOPICS`` with every reply padded past ``window_chars`` (1,000 characters), as an assistant writes."""
    return group_turns(
        [m for q, a in TOPICS for m in (Message("user", q), Message("assistant", " ".join([a] * 20)))]
    )


def test_over_budget_a_long_turn_sends_its_user_message_alone(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    strategy.add_many(long_reply_turns())
    query = "spaghetti pasta boil salted water sauce"
    full = strategy.select(query)
    assert set(full.turn_indices) >= {0, 1, 2} and not full.user_only_turns  # no budget: whole turns
    best = max(full.turn_indices, key=lambda i: full.details["relevance"][i])
    long = [i for i, t in enumerate(strategy.turns) if len(t.text) > 1000]
    short = [i for i in full.turn_indices if i not in long]
    assert best in long and len(long) >= 8
    parts_tokens = sum(strategy.user_part_tokens(i) or 0 for i in long)
    assert parts_tokens < min(strategy.tokens_of([i]) for i in long)
    budget = strategy.tokens_of([best, *short]) + parts_tokens  # every user message, one reply
    context = strategy.select(query, budget=budget)

    assert context.tokens <= budget
    assert context.turn_indices == sorted([best, *short])  # the best turn's reply comes back first
    parts = context.user_only_turns
    assert set(full.turn_indices) - {best, *short} <= set(parts)  # every other chosen turn, in part
    assert best not in parts and sorted(parts) == context.details["user_only"]
    for block in context.blocks:
        turn = strategy.turns[block.turns[0]]
        if block.reply_left_out:  # the user's own message, verbatim, and nothing of the reply
            assert block.messages == turn.user_part == turn.messages[:1]
            assert block.tokens == messages_tokens(strategy.token_counter, block.messages)
            assert "reply left out for the budget" in block.reason
        else:
            assert block.messages == turn.messages
    assert [b.turns[0] for b in context.blocks] == sorted(b.turns[0] for b in context.blocks)  # in order
    assert "reply left out" in context.explain()
    assert all(strategy.turns[i].messages[1].text not in context.text() for i in parts)


def test_short_turns_and_the_paper_never_send_a_user_message_alone(hashing_embedder) -> None:
    short = make(hashing_embedder)
    long_paper = KadaneDialStrategy.from_paper(embedder=hashing_embedder)
    long_paper.add_many(long_reply_turns())
    for strategy in (short, long_paper):  # turns under window_chars; window_chars=None
        for budget in (50, 200, 600):
            context = strategy.select("spaghetti pasta boil salted water sauce", budget=budget)
            assert not context.user_only_turns and context.tokens <= budget
