"""Incremental BM25 index over turns (Okapi BM25, k1=1.2, b=0.75; Robertson & Zaragoza)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Container, Sequence

import numpy as np

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


FULL_BUILD_SCANS = 32
"""First-time term scans after which :class:`BM25Index` builds every term's postings at once (a
pass over all documents costs about as much as 30-60 scans on the demo conversation)."""


class BM25Index:
    """Append-only BM25 index; document ``i`` is the ``i``-th added text.

    Adding a document keeps its term counts; a term's postings (documents and counts) are
    gathered the first time a query asks for the term and kept up to date from then on. So
    indexing costs one tokenisation per document (restoring a stored 1,000-turn conversation
    indexes it in a few milliseconds) and a query pays one scan of the documents per term it
    meets for the first time. After ``FULL_BUILD_SCANS`` such scans every term's postings are
    built in one pass and kept from then on, so queries stop paying per-term scans (their
    cost no longer grows with the number of documents); the pass costs about as much as the
    scans before it. Scores are the same either way.

    Args:
        k1: Term-frequency saturation (1.2, the usual Okapi default).
        b: Length normalisation (0.75, the usual Okapi default).
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._counts: list[Counter[str]] = []
        self._lengths: list[int] = []
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._scans = 0  # first-time term scans so far
        self._complete = False  # every term has its postings (built in one pass)

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, text: str) -> None:
        """Index one more document."""
        doc = len(self._lengths)
        tokens = tokenize(text)
        counts = Counter(tokens)
        self._counts.append(counts)
        self._lengths.append(len(tokens))
        postings = self._postings
        if self._complete:
            self._post(doc, counts)
        elif postings:
            for term in counts.keys() & postings.keys():
                postings[term].append((doc, counts[term]))

    def _post(self, doc: int, counts: Counter[str], skip: Container[str] = ()) -> None:
        """Append document ``doc`` to the postings of each of its terms not in ``skip``."""
        postings = self._postings
        for term, count in counts.items():
            if term in skip:
                continue
            entry = postings.get(term)
            if entry is None:
                postings[term] = [(doc, count)]
            else:
                entry.append((doc, count))

    def _postings_of(self, term: str) -> list[tuple[int, int]]:
        """(document, term count) of every document containing ``term``, in document order."""
        entry = self._postings.get(term)
        if entry is not None:
            return entry
        if self._complete:
            return []
        self._scans += 1
        if self._scans > FULL_BUILD_SCANS:
            self._build_postings()
            return self._postings.get(term, [])
        entry = [(doc, counts[term]) for doc, counts in enumerate(self._counts) if term in counts]
        if entry:  # a term no document has is not kept: queries cannot grow the index
            self._postings[term] = entry
        return entry

    def _build_postings(self) -> None:
        """Every term's postings in one pass over the documents (terms already gathered are kept)."""
        known = set(self._postings)
        for doc, counts in enumerate(self._counts):
            self._post(doc, counts, known)
        self._complete = True

    def document_share(self, term: str) -> float:
        """Share (0-1) of the documents containing ``term`` (a :func:`tokenize` token)."""
        return len(self._postings_of(term)) / len(self._lengths) if self._lengths else 0.0

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
            postings = self._postings_of(term)
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
