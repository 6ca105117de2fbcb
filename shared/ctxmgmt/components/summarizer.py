"""Summarizers by what users pass (:func:`as_summarizer`), and the one import for all of them.

A summarizer turns one window of conversation text into a few short memory items, given
the memory built so far (so it can skip what is already known). Memories that summarise
(``SWinStrategy`` and later ones) share this component. Each piece lives in its own module:

- :mod:`~ctxmgmt.components.summarizer_protocol`: the :class:`Summarizer` protocol;
- :mod:`~ctxmgmt.components.extractive_summarizer`: :class:`ExtractiveSummarizer`, the offline default;
- :mod:`~ctxmgmt.components.llm_summarizer`: :class:`LLMSummarizer`, its prompt and answer parsing;
- :mod:`~ctxmgmt.components.brief_summarizer`: :class:`BriefSummarizer`, the discourse tree's
  offline node summariser (one telegraphic sentence per turn);
- :mod:`~ctxmgmt.components.summary_words`: the word measures they score and deduplicate by.
"""

from __future__ import annotations

from typing import Any

from ctxmgmt.components._coerce import as_component
from ctxmgmt.components.brief_summarizer import BriefSummarizer as BriefSummarizer
from ctxmgmt.components.extractive_summarizer import CENTRALITY_SAMPLE as CENTRALITY_SAMPLE
from ctxmgmt.components.extractive_summarizer import USER_BONUS as USER_BONUS
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer as ExtractiveSummarizer
from ctxmgmt.components.llm_summarizer import PROMPT as PROMPT
from ctxmgmt.components.llm_summarizer import LLMSummarizer as LLMSummarizer
from ctxmgmt.components.llm_summarizer import build_prompt as build_prompt
from ctxmgmt.components.llm_summarizer import check_prompt as check_prompt
from ctxmgmt.components.llm_summarizer import parse_items as parse_items
from ctxmgmt.components.llm_summarizer import prompt_lines as prompt_lines
from ctxmgmt.components.summarizer_protocol import Summarizer as Summarizer
from ctxmgmt.components.summary_words import content_words as content_words
from ctxmgmt.components.summary_words import jaccard as jaccard
from ctxmgmt.components.summary_words import numbers as numbers
from ctxmgmt.components.summary_words import salience as salience
from ctxmgmt.components.summary_words import specific_terms as specific_terms
from ctxmgmt.components.summary_words import specifics as specifics


def as_summarizer(obj: Any) -> Summarizer:
    """Accept a Summarizer, a ``prompt -> text`` callable (wrapped in LLMSummarizer), or None.

    None gives the offline :class:`ExtractiveSummarizer`.
    """
    return as_component(
        obj,
        Summarizer,
        ExtractiveSummarizer,
        LLMSummarizer,
        "summarizer must be a Summarizer, a prompt -> text callable or None",
    )
