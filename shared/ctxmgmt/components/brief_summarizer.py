"""The discourse tree's offline node summariser: one telegraphic sentence per turn (no LLM)."""

from __future__ import annotations

from collections.abc import Sequence

from ctxmgmt.components._coerce import check_int
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer
from ctxmgmt.scoring.lexical import STOPWORDS


class BriefSummarizer:
    """Default node summariser: the turn's most informative sentence in telegraphic form (no LLM).

    The sentence is the user's earliest among the three
    :class:`~ctxmgmt.components.extractive_summarizer.ExtractiveSummarizer` ranks best (names,
    numbers, dates, centrality), else its first; stop words are then dropped (words with
    digits kept) and the rest cut at ``max_words``. The user's sentences lose their
    ``user:`` prefix; other speakers keep theirs. A topic summary joins many node summaries,
    so each must cost a fraction of its turn.

    Args:
        max_words: Longest summary, in words; default 15.

    Example:
        >>> BriefSummarizer().summarize([], "user: Can you tell me the numerical value of x, y and z?")
        ['tell numerical value x, y z?']
    """

    uses_llm = False

    def __init__(self, *, max_words: int = 15) -> None:
        check_int(max_words, "max_words")
        self.max_words = max_words
        self._pick = ExtractiveSummarizer(max_sentences=3, max_words=200, anchor_dates=False)

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        """One telegraphic summary of ``window_text`` (``[]`` when no sentence has 3+ words)."""
        ranked = self._pick.summarize([], window_text)
        if not ranked:
            return []
        text = next((i for i in ranked if i.startswith("user: ")), ranked[0])
        if text.startswith("user: "):
            text = text[len("user: ") :]
        words = [
            w
            for w in text.split()
            if any(ch.isdigit() for ch in w) or w.lower().strip(".,;:!?\"'()[]") not in STOPWORDS
        ] or text.split()
        cut = words[: self.max_words]
        return [" ".join(cut) + (" ..." if len(words) > self.max_words else "")]
