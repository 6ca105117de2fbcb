"""Tokenising and the incremental BM25 index (``ctxmgmt.scoring.lexical``)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ctxmgmt.scoring.lexical import STOPWORDS, BM25Index, match_share, scores_for, tokenize, words


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


def test_words_are_lower_case_ascii_runs() -> None:
    assert words("Café OK, it's 3pm!") == ["caf", "ok", "it", "s", "3pm"]
    assert words("") == []


def test_without_common_words_drops_words_most_documents_share() -> None:
    index = BM25Index()
    for text in ["the vet said my dog is fine", "dog food prices", "dog walk at noon", "tax return"]:
        index.add(text)
    assert index.without_common_words("dogs and the vet", max_share=0.5) == "and the vet"
    assert index.without_common_words("dogs and the vet", max_share=0.9) == "dogs and the vet"


def test_term_weights_are_the_idf_of_the_query_terms_some_document_has() -> None:
    index = BM25Index()
    for text in ["my dog is a beagle", "my dog barks", "the cat sleeps"]:
        index.add(text)
    weights = index.term_weights("Is my beagle a dog or a unicorn?")
    assert set(weights) == {"beagle", "dog"}  # "unicorn": in no document; "is", "my", "a": stop words
    assert weights["beagle"] > weights["dog"] > 0  # the rarer term weighs more


def test_match_share_is_the_part_s_share_of_the_query_weight_the_whole_matches() -> None:
    weights = {"beagle": 2.0, "dog": 1.0}
    assert match_share(weights, "my dog", "my dog is a beagle") == pytest.approx(1 / 3)
    assert match_share(weights, "a beagle and a dog", "a beagle and a dog") == 1.0
    assert match_share(weights, "hello", "nothing the query asks") is None  # the whole matches none
