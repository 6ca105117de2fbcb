"""ExtractiveSummarizer: a window's most informative sentences, verbatim, in conversation order."""

from __future__ import annotations

import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer

WINDOW = "\n".join(
    [
        "[1:56 pm on 8 May, 2023] Caroline: Hi! How are you doing today?",
        "[1:56 pm on 8 May, 2023] Melanie: Great, thanks. I ran a charity race for mental health on Sunday.",
        "[1:56 pm on 8 May, 2023] Caroline: That is nice. I went to the LGBTQ support group in Boston.",
        "[1:56 pm on 8 May, 2023] Melanie: Cool.",
        "[1:56 pm on 8 May, 2023] Caroline: The group meets every week and it really helps me.",
        "[1:56 pm on 8 May, 2023] Melanie: My kids are 7 and 9 and they love painting.",
    ]
)
"""A LoCoMo-style window of six turns (the LLM summarizer's tests use it too)."""


def test_extractive_keeps_names_numbers_and_dates():
    items = ExtractiveSummarizer(max_sentences=4).summarize([], WINDOW)
    assert len(items) == 4
    text = "\n".join(items)
    for kept in ("Boston", "LGBTQ", "Sunday", "7 and 9", "8 May, 2023", "Caroline", "Melanie"):
        assert kept in text
    assert "Cool." not in text and "How are you" not in text
    assert "on Sunday (the Sunday before 8 May 2023)" in text  # past tense: the Sunday before
    # conversation order is kept
    said = [
        i.split("] ", 1)[1].split(": ", 1)[1].replace(" (the Sunday before 8 May 2023)", "") for i in items
    ]
    assert [WINDOW.index(s) for s in said] == sorted(WINDOW.index(s) for s in said)


def test_extractive_skips_what_the_memory_already_holds():
    summarizer = ExtractiveSummarizer(max_sentences=1)
    first = summarizer.summarize([], WINDOW)
    second = summarizer.summarize(first, WINDOW)
    assert second and second != first


def test_extractive_cuts_long_sentences_and_is_deterministic():
    long = "user: " + " ".join(f"Word{i}" for i in range(100)) + "."
    (item,) = ExtractiveSummarizer(max_words=10).summarize([], long)
    assert item.endswith("...") and len(item.split()) == 12  # speaker + 10 words + "..."
    assert ExtractiveSummarizer().summarize([], WINDOW) == ExtractiveSummarizer().summarize([], WINDOW)
    assert ExtractiveSummarizer().summarize([], "") == []


@pytest.mark.parametrize(
    "bad", [{"max_sentences": 0}, {"max_words": "5"}, {"min_words": -1}, {"known_threshold": 0}]
)
def test_extractive_bad_parameters(bad):
    with pytest.raises(ConfigurationError):
        ExtractiveSummarizer(**bad)


def test_extractive_anchors_relative_dates_to_the_line_stamp():
    window = "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday with Ana."
    assert ExtractiveSummarizer().summarize([], window) == [
        "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday (7 May 2023) with Ana."
    ]
    plain = ExtractiveSummarizer(anchor_dates=False).summarize([], window)
    assert plain == [window]
    # no stamp, no anchoring
    assert ExtractiveSummarizer().summarize([], "user: I saw Ana yesterday at the fair.") == [
        "user: I saw Ana yesterday at the fair."
    ]


def test_compact_items_keep_the_facts_in_fewer_words():
    full = ExtractiveSummarizer(max_sentences=4).summarize([], WINDOW)
    compact = ExtractiveSummarizer(max_sentences=4, compact=True).summarize([], WINDOW)
    assert len(compact) == len(full)
    assert sum(len(i.split()) for i in compact) < sum(len(i.split()) for i in full)
    text = "\n".join(compact)
    for kept in ("Boston", "LGBTQ", "Sunday", "7 and 9", "Caroline (8 May 2023): ", "Melanie (8 May 2023): "):
        assert kept in text
    assert "1:56 pm" not in text
    # leading interjections and vocatives go; the fact stays
    window = (
        "[1:56 pm on 8 May, 2023] Melanie: Wow, Caroline! Thanks, I ran a race for charity last Saturday."
    )
    assert ExtractiveSummarizer(compact=True).summarize([], window) == [
        "Melanie (8 May 2023): I ran a race for charity last Saturday (the Saturday before 8 May 2023)."
    ]


def test_compact_items_are_deduplicated_across_overlapping_windows():
    summarizer = ExtractiveSummarizer(compact=True)
    first = summarizer.summarize([], WINDOW)
    again = summarizer.summarize(first, WINDOW)  # the same turns in the next, overlapping window
    assert again and not set(again) & set(first)  # only the sentences not kept the first time


def _reference_summary(s, previous, window_text):
    """The extractive summary as first written: every pair compared, the memory checked first."""
    from ctxmgmt.components import extractive_summarizer as module

    pairs = module._sentences(module.cap_text(window_text, s.max_input_chars))
    if s.compact:
        pairs = [(prefix, module._strip_filler(sentence)) for prefix, sentence in pairs]
    known = [module.content_words(p) for p in previous]
    words = [module.content_words(x) for _, x in pairs]
    n = len(words)
    sample = range(n)
    if n > module.CENTRALITY_SAMPLE + 1:
        sample = sorted(
            {k * (n - 1) // (module.CENTRALITY_SAMPLE - 1) for k in range(module.CENTRALITY_SAMPLE)}
        )
    candidates = []
    for i, (prefix, sentence) in enumerate(pairs):
        if len(sentence.split()) < s.min_words or not words[i]:
            continue
        full = module.content_words(s._render(prefix, sentence))
        if any(module.jaccard(full, k) >= s.known_threshold for k in known):
            continue
        others = [
            len(words[i] & words[j]) / len(words[i] | words[j]) if words[j] else 0.0 for j in sample if j != i
        ]
        centrality = sum(others) / len(others) if others else 0.0
        score = module.specifics(sentence) + 3.0 * centrality + min(0.1 * len(words[i]), 1.5)
        score -= 1.0 if sentence.endswith("?") else 0.0
        score += module.USER_BONUS if prefix.rstrip().endswith("user:") else 0.0
        candidates.append((score, i))
    chosen = sorted(i for _, i in sorted(candidates, key=lambda c: (-c[0], c[1]))[: s.max_sentences])
    return s._items(pairs, chosen)  # the choice is what this checks; the items are rendered alike


@pytest.mark.parametrize("compact", [False, True])
def test_summary_equals_the_pairwise_reference_with_a_growing_memory(compact):
    """Scores from one matrix product and the memory check on the best sentences only: the same items."""
    from ctxmgmt.app.data import load_demo

    turns = load_demo().turns
    s = ExtractiveSummarizer(compact=compact)
    memory: list[str] = []
    for start in range(0, len(turns) - 6, 4):
        text = "\n".join(t.dated_text for t in turns[start : start + 6])
        items = s.summarize(memory, text)
        assert items == _reference_summary(s, memory, text)
        memory.extend(items)
    long_window = "\n".join(
        f"user: Item {k} of {k % 7} boxes went to Lyon on day {k % 5}." for k in range(150)
    )
    assert s.summarize(memory, long_window) == _reference_summary(
        s, memory, long_window
    )  # sampled centrality
