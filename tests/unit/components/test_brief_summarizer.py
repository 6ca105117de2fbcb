"""BriefSummarizer: a turn's most informative sentence in telegraphic form (the discourse tree's nodes)."""

from __future__ import annotations

import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components.brief_summarizer import BriefSummarizer
from ctxmgmt.components.summarizer_protocol import Summarizer


def test_stop_words_go_and_the_users_prefix_with_them():
    summary = BriefSummarizer().summarize([], "user: Can you tell me the numerical value of x, y and z?")
    assert summary == ["tell numerical value x, y z?"]


def test_the_users_sentence_wins_and_other_speakers_keep_their_prefix():
    window = (
        "assistant: I booked the hotel in Porto for 2 nights.\nuser: My sister Ana arrives in Porto on 3 May."
    )
    assert BriefSummarizer().summarize([], window) == ["sister Ana arrives Porto 3 May."]
    only_assistant = BriefSummarizer(max_words=3).summarize(
        [], "assistant: The 3 trains to Lisbon leave at 9."
    )
    assert only_assistant == ["assistant: 3 trains ..."]  # words with digits are kept, then the cut


def test_a_long_summary_is_cut_at_max_words():
    summary = BriefSummarizer(max_words=3).summarize([], "user: Can you tell me the numerical value of x?")
    assert summary == ["tell numerical value ..."]


def test_no_sentence_of_three_words_gives_no_summary():
    assert BriefSummarizer().summarize([], "user: ok") == []
    assert BriefSummarizer().summarize(["an earlier item"], "") == []


@pytest.mark.parametrize("bad", [0, -1, True, "15", 2.5])
def test_max_words_must_be_a_positive_int(bad):
    with pytest.raises(ConfigurationError, match="max_words"):
        BriefSummarizer(max_words=bad)


def test_it_is_an_offline_summarizer():
    summarizer = BriefSummarizer()
    assert isinstance(summarizer, Summarizer) and summarizer.uses_llm is False
