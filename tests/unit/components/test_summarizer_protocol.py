"""The Summarizer protocol: anything with ``summarize(previous, window_text)`` is a summarizer."""

from __future__ import annotations

from collections.abc import Sequence

from ctxmgmt.components.brief_summarizer import BriefSummarizer
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer
from ctxmgmt.components.llm_summarizer import LLMSummarizer
from ctxmgmt.components.summarizer_protocol import Summarizer


class Echo:
    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        return [window_text]


def test_the_shipped_summarizers_and_a_plain_class_are_summarizers():
    for summarizer in (ExtractiveSummarizer(), BriefSummarizer(), LLMSummarizer(lambda p: "- x"), Echo()):
        assert isinstance(summarizer, Summarizer)


def test_what_is_not_a_summarizer():
    assert not isinstance(lambda previous, window_text: [], Summarizer)  # a callable is wrapped, not used
    assert not isinstance("summarize", Summarizer)
