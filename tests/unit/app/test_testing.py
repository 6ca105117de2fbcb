"""The shared test doubles (``ctxmgmt.app.testing``, public as ``ctxmgmt.testing``)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from ctxmgmt.app.testing import (
    CachingEmbedder,
    CountingEmbedder,
    CountingExtractor,
    FakeLLM,
    HangingLLM,
    HashingEmbedder,
    StatePool,
    plausible_answer,
)
from ctxmgmt.components.decider import LLMDecider, TopicView
from ctxmgmt.components.summarizer import LLMSummarizer
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.store.memory import InMemoryStore
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy


def test_hashing_embedder_is_deterministic_unit_length_and_word_based() -> None:
    embedder = HashingEmbedder(dim=64)
    vectors = embedder.embed(["my cat sleeps", "my cat sleeps", "tax return deadline"])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32 and embedder.dimension == 64
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], vectors[1])
    near = embedder.embed(["the cat sleeps"])[0]
    assert float(near @ vectors[0]) > float(near @ vectors[2])


def test_counting_embedder_counts_documents_and_queries() -> None:
    counting = CountingEmbedder(HashingEmbedder())
    counting.embed(["a", "b"])
    counting.embed(["c"])
    query = counting.embed_query("a")
    assert (counting.calls, counting.texts, counting.queries) == (2, 3, 1)
    assert query.shape[-1] == 256 and counting.dimension == 256


def test_caching_embedder_embeds_each_text_once() -> None:
    inner = CountingEmbedder(HashingEmbedder())
    caching = CachingEmbedder(inner)
    first = caching.embed(["a", "b", "a"])
    again = caching.embed(["b", "c"])
    assert inner.texts == 3 and inner.calls == 2
    np.testing.assert_array_equal(first[1], again[0])
    assert caching.embed([]).shape == (0, 0)


def test_counting_extractor_counts_calls_and_texts() -> None:
    class Capitals:
        def extract(self, texts):
            return [[w for w in t.split() if w.istitle()] for t in texts]

    counting = CountingExtractor(Capitals())
    assert counting.extract(["Ana met Bo", "no one"]) == [["Ana", "Bo"], []]
    assert (counting.calls, counting.texts, counting.uses_llm) == (1, 2, False)


def test_fake_llm_records_prompts_and_answers_fixed_or_computed() -> None:
    fixed = FakeLLM("- a fact")
    assert fixed("p1") == "- a fact" and fixed.prompts == ["p1"] and fixed.calls == 1
    echo = FakeLLM(lambda prompt: prompt.upper())
    assert echo("hi") == "HI"


def test_a_failing_fake_llm_still_counts_the_call() -> None:
    failing = FakeLLM(error=TimeoutError("provider down"))
    with pytest.raises(TimeoutError):
        failing("p")
    assert failing.calls == 1


def test_hanging_llm_answers_once_released() -> None:
    hanging = HangingLLM("- late")
    answers: list[str] = []
    worker = threading.Thread(target=lambda: answers.append(hanging("p")))
    worker.start()
    worker.join(0.05)
    assert worker.is_alive() and hanging.calls == 1
    hanging.release.set()
    worker.join(5)
    assert answers == ["- late"]


def test_plausible_answers_are_accepted_by_the_summariser_and_the_decider() -> None:
    summary = LLMSummarizer(plausible_answer).summarize(
        [], "user: I adopted a cat named Miso.\nassistant: Nice!"
    )
    assert len(summary) == 2 and summary[0].startswith("The conversation mentions")
    decider = LLMDecider(FakeLLM())
    decision = decider.decide_topic("a new question", [TopicView(0, "cats", 0.4, 0.4, 0.4, 3, True)])
    assert decision.action in {"create", "switch", "continue"}
    assert plausible_answer("anything") == plausible_answer("anything")
    assert json.loads(plausible_answer("Decide where the user's new message belongs"))["action"] == "create"


def test_state_pool_keeps_a_stored_state_per_conversation(hashing_embedder) -> None:
    store = InMemoryStore()
    pool = StatePool(lambda: KadaneDialStrategy(embedder=hashing_embedder), store=store)
    turns = [Turn(i, (Message("user", f"q{i}"), Message("assistant", f"a{i}"))) for i in range(3)]
    pool.get("alice").sync(turns)
    assert "alice" in pool and len(pool) == 1
    assert len(pool.get("alice").strategy.turns) == 3
