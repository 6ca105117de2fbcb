"""Bounded model calls (``ctxmgmt.components.llm_call``): time limit, input cap, exact counts.

Hung calls are fakes that block on a ``threading.Event``; the ``hang`` fixture releases them at
teardown and waits until no abandoned call is left, so the process-wide bound starts at zero
in every test.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterator

import pytest

from ctxmgmt import ConfigurationError, Message, Turn
from ctxmgmt.app.testing import FakeLLM, HangingLLM
from ctxmgmt.components import llm_call
from ctxmgmt.components.decider import EmbeddedDecider, LLMDecider, TopicView
from ctxmgmt.components.entities import CallableEntityExtractor, Entity, LLMEntityExtractor
from ctxmgmt.components.llm_call import (
    CallNotStartedError,
    LLMCaller,
    LLMTimeoutError,
    abandoned_calls,
    call_llm,
    meter_calls,
)
from ctxmgmt.components.summarizer import ExtractiveSummarizer, LLMSummarizer
from ctxmgmt.strategies.acm import ACMStrategy
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
from ctxmgmt.strategies.swin import SWinStrategy
from ctxmgmt.strategies.topic_thread import TopicThreadStrategy

TIMEOUT = 0.2
"""Seconds the tests give a call; a hung one must return within this plus MARGIN."""
MARGIN = 3.0
"""Generous slack for a loaded CI machine (the point is "not forever", not exact timing)."""


@pytest.fixture
def hang() -> Iterator[HangingLLM]:
    fake = HangingLLM()
    yield fake
    fake.release.set()
    deadline = time.monotonic() + 5
    while abandoned_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert abandoned_calls() == 0


SUMMARY = "- The user adopted a cat named Miso."
"""What the recording fake LLM answers unless told otherwise."""


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


# -- call_llm ---------------------------------------------------------------------------------


def test_an_answer_comes_back_and_is_counted_by_every_open_meter():
    with meter_calls() as outer:
        assert call_llm(str.upper, "hi", timeout=TIMEOUT) == "HI"
        with meter_calls() as inner:
            assert call_llm(str.upper, "yo", timeout=None) == "YO"
    assert (outer.calls, inner.calls) == (2, 1)
    assert call_llm(str.upper, "outside", timeout=1) == "OUTSIDE"  # no meter open: nothing to count
    assert outer.calls == 2


def test_a_hung_call_times_out_and_its_late_answer_is_ignored(hang):
    with meter_calls() as meter, pytest.raises(LLMTimeoutError, match="no answer within 0.2 s"):
        call_llm(hang, "p", timeout=TIMEOUT)
    assert meter.calls == 1 and hang.prompts == ["p"]
    assert abandoned_calls() == 1
    hang.release.set()
    deadline = time.monotonic() + 5
    while abandoned_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert abandoned_calls() == 0  # the late answer ended the abandoned call; nobody used it


def test_timeout_bounds_the_wait(hang):
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError):
        call_llm(hang, "p", timeout=TIMEOUT)
    assert time.perf_counter() - start < TIMEOUT + MARGIN


def test_abandoned_calls_are_bounded_and_extra_calls_not_started(hang, monkeypatch):
    monkeypatch.setattr(llm_call, "MAX_ABANDONED_CALLS", 2)
    for _ in range(2):
        with pytest.raises(LLMTimeoutError):
            call_llm(hang, "p", timeout=0.05)
    with meter_calls() as meter:
        start = time.perf_counter()
        with pytest.raises(CallNotStartedError, match="2 earlier model calls"):
            call_llm(hang, "p", timeout=10 * MARGIN)
        assert time.perf_counter() - start < MARGIN  # refused at once, no wait
    assert meter.calls == 0 and len(hang.prompts) == 2  # not started, not counted
    assert abandoned_calls() == 2


def test_provider_errors_propagate_and_still_count():
    def broken(prompt: str) -> str:
        raise RuntimeError("provider down")

    with meter_calls() as meter, pytest.raises(RuntimeError, match="provider down"):
        call_llm(broken, "p", timeout=TIMEOUT)
    assert meter.calls == 1


def test_the_worker_runs_in_the_callers_context():
    request = contextvars.ContextVar("request", default="none")
    request.set("trace-42")
    assert call_llm(lambda prompt: f"{prompt} {request.get()}", "seen", timeout=TIMEOUT) == "seen trace-42"


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "30", True])
def test_bad_timeouts_are_rejected(bad):
    with pytest.raises(ConfigurationError, match="timeout must be"):
        LLMSummarizer(str, timeout=bad)


@pytest.mark.parametrize("bad", [199, 1.5, "big", False])
def test_bad_input_caps_are_rejected(bad):
    with pytest.raises(ConfigurationError, match="max_input_chars must be"):
        LLMDecider(str, max_input_chars=bad)


# -- the components fall back when the call hangs ---------------------------------------------


def test_summarizer_answers_from_the_fallback_after_the_timeout(hang, caplog):
    window = "user: I adopted a grey cat named Miso on 3 May.\nassistant: Lovely name!"
    summarizer = LLMSummarizer(hang, timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        items, elapsed = timed(summarizer.summarize, [], window)
    assert elapsed < TIMEOUT + MARGIN
    assert items == ExtractiveSummarizer().summarize([], window)
    assert (summarizer.calls, summarizer.timeouts, summarizer.failures) == (1, 1, 1)
    assert "LLMTimeoutError" in caplog.text and "using the extractive summary" in caplog.text


def test_decider_answers_from_the_fallback_after_the_timeout(hang, caplog):
    topics = [TopicView(0, "cats", 0.9, 0.9, 0.9, 3, True), TopicView(1, "bread", 0.1, 0.1, 0.1, 2, False)]
    decider = LLMDecider(hang, fallback=EmbeddedDecider(shift_model=None), timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        decision, elapsed = timed(decider.decide_topic, "and my cat?", topics)
    assert elapsed < TIMEOUT + MARGIN
    assert decision.source == "fallback"
    assert (decider.calls, decider.timeouts, decider.failures) == (1, 1, 1)
    assert "LLMTimeoutError" in caplog.text


def test_entity_extractor_answers_from_the_fallback_after_the_timeout(hang, caplog):
    fallback = CallableEntityExtractor(lambda text: [(w, "NAME") for w in text.split() if w.istitle()])
    extractor = LLMEntityExtractor(hang, fallback=fallback, timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        found, elapsed = timed(extractor.extract, ["ask Bob", "call Alice"])
    assert elapsed < TIMEOUT + MARGIN  # the second text does not wait: the first call still hangs
    assert found == [[Entity("Bob", "NAME")], [Entity("Alice", "NAME")]]
    assert (extractor.calls, extractor.timeouts) == (1, 2)
    assert "LLMTimeoutError" in caplog.text and "CallNotStartedError" in caplog.text


def test_a_component_starts_no_call_while_its_timed_out_call_runs(hang):
    summarizer = LLMSummarizer(hang, timeout=TIMEOUT)
    window = "user: I adopted a grey cat named Miso on 3 May."
    summarizer.summarize([], window)
    summarizer.timeout = 10 * MARGIN  # a wait would now be long: the next call must not wait
    _, elapsed = timed(summarizer.summarize, [], window)
    assert elapsed < MARGIN  # refused at once: the fallback answered
    assert (summarizer.calls, summarizer.timeouts, len(hang.prompts)) == (1, 2, 1)
    hang.release.set()  # the provider comes back: the hung call ends, calls resume
    deadline = time.monotonic() + 5
    while abandoned_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    summarizer.summarize([], window)
    assert (summarizer.calls, len(hang.prompts)) == (2, 2)


# -- a huge message: the prompt is capped, the input is not touched --------------------------


def test_a_million_character_message_reaches_the_model_capped():
    message = "I adopted a grey cat named Miso. " + "blah " * 200_000 + "Her vet is Dr Ruiz."
    assert len(message) > 1_000_000
    model = FakeLLM(SUMMARY)
    window = f"user: {message}\nassistant: Noted."
    LLMSummarizer(model, max_input_chars=24_000).summarize([], window)
    prompt = model.prompts[0]
    assert len(prompt) < 24_000 + 2_000  # the cap plus the instructions
    assert "grey cat named Miso" in prompt and "assistant: Noted." in prompt  # head and tail kept
    assert "characters left out" in prompt
    assert len(window) > 1_000_000  # the caller's text is unchanged

    decider_model = FakeLLM('{"action": "create"}')
    LLMDecider(decider_model).decide_topic(message, [TopicView(0, "cats", 0.1, 0.1, 0.1, 1, True)])
    assert len(decider_model.prompts[0]) < 24_000 + 3_000

    entity_model = FakeLLM("Miso | PERSON")
    LLMEntityExtractor(entity_model).extract([message])
    assert len(entity_model.prompts[0]) < 24_000 + 1_000


def test_the_extractive_summariser_reads_a_capped_copy_fast():
    message = "user: " + " ".join(f"Sentence {i} names Miso and Boston on {i} May." for i in range(40_000))
    assert len(message) > 1_000_000
    items, elapsed = timed(ExtractiveSummarizer().summarize, [], message)
    assert items and elapsed < 20  # uncapped, scoring 40,000 sentences pairwise takes minutes


# -- llm_calls counts exactly, per strategy ---------------------------------------------------


def turns(n: int, start: int = 0) -> list[Turn]:
    topics = ["my cat Miso", "sourdough bread", "a trip to Lisbon", "the tax form"]
    return [
        Turn(
            i,
            (
                Message("user", f"Tell me about {topics[i % 4]}, point {i}. It matters to Maria on {i} May."),
                Message("assistant", f"Here is point {i} about {topics[i % 4]} for Maria."),
            ),
        )
        for i in range(start, start + n)
    ]


def strategies(model, hashing_embedder) -> dict[str, object]:
    """Every LLM-capable strategy, its LLM component(s) calling ``model``."""
    names = CallableEntityExtractor(lambda text: [(w, "NAME") for w in text.split() if w.istitle()])
    return {
        "swin": SWinStrategy(summarizer=LLMSummarizer(model), window=4, overlap=1),
        "acm": ACMStrategy(
            summarizer=LLMSummarizer(model),
            entity_extractor=LLMEntityExtractor(model, fallback=names),
            token_budget=300,
        ),
        "topic_thread": TopicThreadStrategy(embedder=hashing_embedder, summarizer=LLMSummarizer(model)),
        "discourse_tree": DiscourseTreeStrategy(
            embedder=hashing_embedder,
            decider=LLMDecider(model, fallback=EmbeddedDecider(shift_model=None)),
            summarizer=LLMSummarizer(model),
        ),
    }


@pytest.mark.parametrize("name", ["swin", "acm", "topic_thread", "discourse_tree"])
def test_llm_calls_equals_the_calls_the_model_received(name, hashing_embedder):
    model = FakeLLM(SUMMARY)
    strategy = strategies(model, hashing_embedder)[name]
    for turn in turns(24):
        strategy.add(turn)
        strategy.select("what about my cat Miso?", budget=600)
    assert model.prompts, name
    assert strategy.llm_calls == len(model.prompts)


@pytest.mark.parametrize("name", ["swin", "acm", "topic_thread", "discourse_tree"])
def test_timeouts_and_failures_count_as_calls(name, hashing_embedder, hang, caplog):
    strategy = strategies(hang, hashing_embedder)[name]
    for component in ("summarizer", "decider", "entity_extractor"):
        if hasattr(strategy, component) and isinstance(getattr(strategy, component), LLMCaller):
            getattr(strategy, component).timeout = 0.01
    with caplog.at_level(logging.WARNING, logger="ctxmgmt"):
        for turn in turns(12):
            strategy.add(turn)
        strategy.select("what about my cat Miso?", budget=600)
    assert hang.prompts  # the calls started (and timed out)
    assert strategy.llm_calls == len(hang.prompts)
    assert "LLMTimeoutError" in caplog.text


def test_a_shared_component_counts_each_strategys_calls_only():
    model = FakeLLM(SUMMARY)
    shared = LLMSummarizer(model)
    first = SWinStrategy(summarizer=shared, window=4, overlap=1)
    second = SWinStrategy(summarizer=shared, window=4, overlap=1)
    first.add_many(turns(10))
    second.add_many(turns(4))
    assert (first.llm_calls, second.llm_calls) == (3, 1)
    assert shared.calls == len(model.prompts) == 4


def test_decider_calls_are_kept_with_the_derived_state(hashing_embedder):
    model = FakeLLM('{"action": "create"}')

    def make() -> DiscourseTreeStrategy:
        return DiscourseTreeStrategy(
            embedder=hashing_embedder, decider=LLMDecider(model, fallback=EmbeddedDecider(shift_model=None))
        )

    strategy = make()
    strategy.add_many(turns(6))
    assert strategy.llm_calls == len(model.prompts) >= 5  # one topic decision per turn after the first
    restored = make()
    restored.load_state(strategy.to_state())
    assert restored.llm_calls == strategy.llm_calls


def test_a_custom_llm_component_without_the_bounded_call_counts_one_per_use():
    class CustomSummarizer:
        uses_llm = True

        def summarize(self, previous, window_text):
            return ["The user has a cat."]

    strategy = SWinStrategy(summarizer=CustomSummarizer(), window=4, overlap=1)
    strategy.add_many(turns(10))
    assert strategy.llm_calls == 3  # windows 0-3, 3-6, 6-9
