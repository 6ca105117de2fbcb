"""Incremental BM25 index over turns (Okapi BM25, k1=1.2, b=0.75; Robertson & Zaragoza)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """a about after all also am an and any are as at be been before but by can could did do
    does doing done for from had has have having he her here hers him his how i if in into is it
    its just me my of on or our out over she so some than that the their them then there these
    they this those to too up us very was we were what when where which while who whom why will
    with would you your yours""".split()
)


_STEMS: dict[str, str] = {}
"""Stem per word seen ("" for a stop word): words repeat, so indexing a restored history of
1,000 turns stems each distinct word once. At most :data:`_MAX_STEMS` entries."""
_MAX_STEMS = 200_000


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric words without stop words, with a light plural/-ing stem."""
    out = []
    for word in _TOKEN.findall(text.lower()):
        stem = _STEMS.get(word)
        if stem is None:
            stem = "" if word in STOPWORDS else _stem(word)
            if len(_STEMS) < _MAX_STEMS:
                _STEMS[word] = stem
        if stem:
            out.append(stem)
    return out


def _stem(word: str) -> str:
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class BM25Index:
    """Append-only BM25 index; document ``i`` is the ``i``-th added text.

    Args:
        k1: Term-frequency saturation (1.2, the usual Okapi default).
        b: Length normalisation (0.75, the usual Okapi default).
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, text: str) -> None:
        """Index one more document."""
        doc = len(self._lengths)
        tokens = tokenize(text)
        postings = self._postings
        for term, tf in Counter(tokens).items():
            entry = postings.get(term)
            if entry is None:
                postings[term] = [(doc, tf)]
            else:
                entry.append((doc, tf))
        self._lengths.append(len(tokens))

    def document_share(self, term: str) -> float:
        """Share (0-1) of the documents containing ``term`` (a :func:`tokenize` token)."""
        return len(self._postings.get(term, ())) / len(self._lengths) if self._lengths else 0.0

    def without_common_words(self, text: str, max_share: float) -> str:
        """``text`` without the words whose tokens all occur in more than ``max_share`` of the documents.

        Single letters (the ``s`` of "Ana's") are ignored; stop words and words without letters
        or digits are kept.
        """
        kept = []
        for word in text.split():
            tokens = [_stem(t) for t in _TOKEN.findall(word.lower()) if len(t) > 1 and t not in STOPWORDS]
            if tokens and all(self.document_share(t) > max_share for t in tokens):
                continue
            kept.append(word)
        return " ".join(kept)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when nothing matches)."""
        n = len(self._lengths)
        out = np.zeros(n, dtype=np.float64)
        if n == 0:
            return out
        lengths = np.asarray(self._lengths, dtype=np.float64)
        avgdl = max(lengths.mean(), 1.0)
        for term in sorted(set(tokenize(query))):  # a fixed order: sums repeat exactly
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1.0 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            docs = np.fromiter((d for d, _ in postings), dtype=np.int64, count=len(postings))
            tfs = np.fromiter((t for _, t in postings), dtype=np.float64, count=len(postings))
            denom = tfs + self.k1 * (1 - self.b + self.b * lengths[docs] / avgdl)
            out[docs] += idf * tfs * (self.k1 + 1) / denom
        return out


def scores_for(texts: Sequence[str], query: str) -> np.ndarray:
    """BM25 scores of ``texts`` for ``query`` (builds a throwaway index)."""
    index = BM25Index()
    for text in texts:
        index.add(text)
    return index.scores(query)
