"""as_summarizer (what users pass as ``summarizer``), a failing custom summarizer, and the names
``ctxmgmt.components.summarizer`` still exports from the modules it was split into."""

from __future__ import annotations

import logging

import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components import summarizer as summarizer_module
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer
from ctxmgmt.components.llm_summarizer import LLMSummarizer
from ctxmgmt.components.summarizer import as_summarizer


def test_as_summarizer():
    assert isinstance(as_summarizer(None), ExtractiveSummarizer)
    custom = ExtractiveSummarizer(max_sentences=1)
    assert as_summarizer(custom) is custom
    wrapped = as_summarizer(lambda p: "- x")
    assert isinstance(wrapped, LLMSummarizer)
    for bad in (42, "text", ExtractiveSummarizer):
        with pytest.raises(ConfigurationError):
            as_summarizer(bad)
    with pytest.raises(ConfigurationError):
        LLMSummarizer("not callable")


def test_a_failing_custom_summarizer_never_loses_a_window(caplog):
    from ctxmgmt import Message, SWinStrategy, Turn

    class Broken:
        def summarize(self, previous, window_text):
            raise ValueError("boom")

    s = SWinStrategy(summarizer=Broken(), token_counter=lambda t: len(t.split()), window=2, overlap=0)
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.strategies.swin"):
        s.add_many([Turn(i, (Message("user", f"Alice moved to Oslo in {2000 + i}."),)) for i in range(2)])
    assert [i.text for i in s.items] == [
        "user: Alice moved to Oslo in 2000.",
        "user: Alice moved to Oslo in 2001.",
    ]
    assert s.windows[0]["fallback"] and "boom" in caplog.text


OLD_NAMES = """BriefSummarizer CENTRALITY_SAMPLE ExtractiveSummarizer LLMSummarizer PROMPT Summarizer
USER_BONUS as_summarizer build_prompt check_prompt content_words jaccard numbers parse_items
prompt_lines salience specific_terms specifics""".split()
"""The public names ``ctxmgmt.components.summarizer`` held before it was split."""


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_name_of_the_old_module_is_still_exported(name):
    assert hasattr(summarizer_module, name)


def test_the_exported_names_are_the_new_modules_objects():
    from ctxmgmt.components import brief_summarizer, llm_summarizer, summary_words

    assert summarizer_module.LLMSummarizer is llm_summarizer.LLMSummarizer
    assert summarizer_module.BriefSummarizer is brief_summarizer.BriefSummarizer
    assert summarizer_module.specifics is summary_words.specifics
    assert summarizer_module.ExtractiveSummarizer is ExtractiveSummarizer
