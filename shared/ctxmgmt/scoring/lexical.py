"""Incremental BM25 index over turns (Okapi BM25, k1=1.2, b=0.75; Robertson & Zaragoza)."""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from ctxmgmt.messages.text_bounds import bound_input

_TOKEN = re.compile(r"[a-z0-9]+")
_WORD_BYTES = bytes(b if chr(b) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32 for b in range(256))
"""Byte table keeping ASCII letters and digits and turning every other byte into a space."""
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
    return list(filter(None, _stems(words(text))))


def words(text: str) -> list[str]:
    """The maximal runs of ``[a-z0-9]`` in ``text.lower()``, as ``_TOKEN.findall`` finds them.

    Byte translation instead of a regex: every non-ASCII character encodes to bytes >= 0x80,
    which the table turns into spaces, so the runs are the same and a 1,000-turn history
    splits about five times faster (restoring a stored conversation indexes every turn).
    """
    return text.lower().encode("utf-8", "surrogatepass").translate(_WORD_BYTES).decode("ascii").split()


def _stems(words: list[str]) -> list[str]:
    """The stem of each word ("" for a stop word), memoised in :data:`_STEMS`."""
    stems = list(map(_STEMS.get, words))
    if None in stems:
        for i, stem in enumerate(stems):
            if stem is None:
                word = words[i]
                stem = stems[i] = "" if word in STOPWORDS else _stem(word)
                if len(_STEMS) < _MAX_STEMS:
                    _STEMS[word] = stem
    return stems  # type: ignore[return-value]  # every None was replaced


def _stem(word: str) -> str:
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_Postings = int | tuple[int, int] | tuple["array[int]", "array[float]"]
"""One term's postings in :class:`BM25Index` (see its ``_postings``)."""


def _single(entry: _Postings) -> tuple[int, int] | None:
    """(document, count) of postings that hold one document, else None."""
    if isinstance(entry, int):
        return entry, 1
    doc, count = entry
    return (doc, count) if isinstance(doc, int) and isinstance(count, int) else None


class BM25Index:
    """Append-only BM25 index; document ``i`` is the ``i``-th added text.

    Each term keeps its postings as two flat arrays (documents, counts) that grow as documents
    are added; a term only one document has keeps just that document and count, as most terms
    of a short conversation do. A query costs one vectorised pass per query term over that
    term's postings and gathers nothing, so no query pays for a scan of the whole history
    (indexing pays instead: about 33 ms for the 1,000 turns of a restored demo conversation;
    0.1-0.2 ms per query from 1,000 to 10,000 turns).

    Args:
        k1: Term-frequency saturation (1.2, the usual Okapi default).
        b: Length normalisation (0.75, the usual Okapi default).
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._lengths = array("d")  # tokens per document
        # term -> its postings: ``d`` while only document d has it, once (most terms of a short
        # conversation: nothing to allocate), ``(d, count)`` while only d has it, then two arrays
        # ``(documents, counts)`` (a growing pair of arrays per term costs ~230 bytes)
        self._postings: dict[str, _Postings] = {}

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, text: str) -> None:
        """Index one more document: its text within :data:`~ctxmgmt.messages.text_bounds.MAX_INPUT_CHARS`."""
        doc = len(self._lengths)
        tokens = tokenize(bound_input(text))
        self._lengths.append(len(tokens))
        postings = self._postings
        for term, count in Counter(tokens).items():
            entry = postings.get(term)
            if entry is None:
                postings[term] = doc if count == 1 else (doc, count)
                continue
            first = _single(entry)
            if first is not None:
                postings[term] = (array("q", (first[0], doc)), array("d", (first[1], count)))
            else:
                docs, counts = cast("tuple[array[int], array[float]]", entry)
                docs.append(doc)
                counts.append(count)

    def _postings_of(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, counts) of ``term`` as new arrays, or None when no document has it."""
        entry = self._postings.get(term)
        if entry is None:
            return None
        first = _single(entry)
        if first is not None:
            return np.array([first[0]], dtype=np.int64), np.array([first[1]], dtype=np.float64)
        docs, counts = cast("tuple[array[int], array[float]]", entry)
        return np.array(docs, dtype=np.int64), np.array(counts, dtype=np.float64)

    def document_share(self, term: str) -> float:
        """Share (0-1) of the documents containing ``term`` (a :func:`tokenize` token)."""
        postings = self._postings_of(term)
        return 0.0 if postings is None else len(postings[0]) / len(self._lengths)

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
        lengths = np.array(self._lengths, dtype=np.float64)
        avgdl = max(lengths.mean(), 1.0)
        saturation = self.k1 * (1 - self.b + self.b * lengths / avgdl)  # per document
        for term in sorted(set(tokenize(query))):  # a fixed order: sums repeat exactly
            postings = self._postings_of(term)  # copies: the arrays may grow later
            if postings is None:
                continue
            docs, tfs = postings
            idf = _idf(n, len(docs))
            out[docs] += idf * tfs * (self.k1 + 1) / (tfs + saturation[docs])
        return out

    def term_weights(self, query: str) -> dict[str, float]:
        """BM25's idf of each distinct term of ``query`` that some document has (term -> weight)."""
        n = len(self._lengths)
        weights = {}
        for term in set(tokenize(query)):
            postings = self._postings_of(term)
            if postings is not None:
                weights[term] = _idf(n, len(postings[0]))
        return weights


def _idf(documents: int, with_term: int) -> float:
    """BM25's (Lucene's, never negative) idf of a term ``with_term`` of ``documents`` documents have."""
    return math.log(1.0 + (documents - with_term + 0.5) / (with_term + 0.5))


def match_share(weights: Mapping[str, float], part: str, whole: str) -> float | None:
    """Share of the query weight ``whole`` matches that ``part`` of it matches (None: ``whole`` none).

    ``weights`` are :meth:`BM25Index.term_weights`; a term counts once, present or not.

    Example:
        >>> match_share({"beagle": 2.0, "dog": 1.0}, "my dog", "my dog is a beagle")
        0.3333333333333333
    """
    whole_terms = set(tokenize(whole)) & weights.keys()
    total = sum(weights[t] for t in whole_terms)
    if total <= 0:
        return None
    part_terms = set(tokenize(part)) & whole_terms
    return sum(weights[t] for t in part_terms) / total


def scores_for(texts: Sequence[str], query: str) -> np.ndarray:
    """BM25 scores of ``texts`` for ``query`` (builds a throwaway index)."""
    index = BM25Index()
    for text in texts:
        index.add(text)
    return index.scores(query)
