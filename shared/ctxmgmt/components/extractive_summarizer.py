"""The offline extractive summariser: a window's most informative sentences, verbatim (no LLM)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ctxmgmt.components._coerce import check_int
from ctxmgmt.components.llm_call import MAX_INPUT_CHARS, cap_text, check_max_chars
from ctxmgmt.components.summary_words import SENTENCE_END, content_words, jaccard, specifics
from ctxmgmt.messages.dates import anchor_dates, format_date, parse_date
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.types import SEEN_MARK

_LINE = re.compile(r"^(?P<stamp>\[[^\]]*\] )?(?P<speaker>[^:\n]{1,40}): (?P<text>.*)$")
CENTRALITY_SAMPLE = 64
"""Most sentences a sentence is compared with for its centrality (evenly spaced over the window).

A window of up to 65 sentences (SWin's 6-turn windows have about 10 to 40) compares every pair,
as before; a longer one compares each sentence with 64 others, so scoring is linear in the
number of sentences instead of quadratic (24,000 characters of three-word sentences: about
4,000 sentences, 16 million comparisons without the sample)."""
USER_BONUS = 1.0
"""Score added to the user's own sentences (SWin 3.3.2: the memory keeps user-centric detail)."""
_PREFIX = re.compile(r"^(?:\[(?P<stamp>[^\]]*)\] )?(?P<speaker>[^:]*): $")
_FILLER = re.compile(
    r"^(?:(?:wow|oh|ah|aw+|hey|hi|hello|yeah|yes|yep|no|nope|ok(?:ay)?|well|so|thanks|thank you|"
    r"sure|great|cool|awesome|nice|haha|lol|omg|hmm|right|totally|absolutely|really|indeed|"
    r"congrats|congratulations|sounds great|that's (?:great|awesome|amazing|cool))"
    r"(?:,? +[A-Z][a-z]+)?[,!.]+\s+)+",
    re.IGNORECASE,
)
"""Leading interjections, optionally with a vocative name ("Wow, Caroline! "), that
``compact`` summaries drop."""


def _strip_filler(sentence: str) -> str:
    """``sentence`` without leading interjections ("Wow, Mel! I ..." -> "I ...")."""
    stripped = _FILLER.sub("", sentence)
    return stripped[:1].upper() + stripped[1:] if stripped else sentence


def _sentences(window_text: str) -> list[tuple[str, str]]:
    """(speaker prefix, sentence) pairs of a rendered window, in order.

    An indented line continues the message above (:meth:`ctxmgmt.Message.render`) and keeps
    its speaker, so a line written inside a message ("assistant: ...") is not a speaker line.
    """
    out: list[tuple[str, str]] = []
    prefix = ""
    for raw in window_text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = None if raw[:1].isspace() else _LINE.match(line)
        body = line
        if match:
            prefix = f"{match.group('stamp') or ''}{match.group('speaker')}: "
            body = match.group("text")
        elif not raw[:1].isspace():
            prefix = ""
        out.extend((prefix, s.strip()) for s in SENTENCE_END.split(body) if s.strip())
    return out


def _centrality(words: Sequence[set[str]], rows: Sequence[int], sample: Sequence[int]) -> list[float]:
    """Mean word overlap (Jaccard) of each sentence of ``rows`` with the others of ``sample``.

    Every overlap at once, from one matrix product of the sentences' word incidence; each mean
    is summed in ``sample`` order as Python floats, so it equals the mean of the pairwise
    :func:`~ctxmgmt.components.summary_words.jaccard` values to the last bit (a score tie falls the same way).
    """
    if not rows:
        return []
    vocabulary: dict[str, int] = {}
    needed = sorted({*rows, *sample})
    position = {j: k for k, j in enumerate(needed)}
    cells: list[tuple[int, int]] = []
    for k, j in enumerate(needed):
        for word in words[j]:
            cells.append((k, vocabulary.setdefault(word, len(vocabulary))))
    incidence = np.zeros((len(needed), max(1, len(vocabulary))), dtype=np.float32)
    if cells:
        at = np.array(cells)
        incidence[at[:, 0], at[:, 1]] = 1.0
    row_at = [position[i] for i in rows]
    sample_at = [position[j] for j in sample]
    # counts of shared words: exact integers (far below 2**24) in float32
    common = (incidence[row_at] @ incidence[sample_at].T).astype(np.float64)
    sizes = np.array([len(words[j]) for j in needed], dtype=np.float64)
    union = sizes[row_at][:, None] + sizes[sample_at][None, :] - common
    overlap = np.divide(common, union, out=np.zeros_like(common), where=union > 0)
    out: list[float] = []
    for k, i in enumerate(rows):
        values = overlap[k].tolist()
        others = [v for j, v in zip(sample, values, strict=True) if j != i]
        out.append(sum(others) / len(others) if others else 0.0)
    return out


class ExtractiveSummarizer:
    r"""Offline summarizer: keeps the window's most informative sentences verbatim (no LLM).

    Each sentence is scored by ``specifics`` (names, numbers, dates: 1 each) plus
    ``3 * centrality`` (mean word overlap with the window's other sentences, or with
    :data:`CENTRALITY_SAMPLE` of them evenly spaced in a longer window) plus a small
    length term (0.1 per content word, up to 1.5); questions score 1 less and the user's
    own sentences 1 more (SWin keeps user-centric detail). Sentences with
    fewer than ``min_words`` words and sentences already in the memory (word-set Jaccard
    >= ``known_threshold`` with an item) are skipped. The best ``max_sentences`` are returned
    in conversation order, each prefixed with its speaker (and timestamp) so names and
    dates survive.

    Args:
        max_sentences: Items per window; default 4.
        max_words: Longest item in words (longer sentences are cut with "..."); default 40.
        min_words: Shortest sentence kept, in words; default 3 ("Thanks!" is not a fact).
        known_threshold: Jaccard similarity above which a sentence counts as already in
            the memory; default 0.6.
        max_input_chars: Most characters of a window read (head and tail of a longer one,
            :func:`~ctxmgmt.components.llm_call.cap_text`: scoring is quadratic in sentences);
            default 24,000 (:data:`~ctxmgmt.components.llm_call.MAX_INPUT_CHARS`); None: no cap.
        anchor_dates: Write the absolute date after relative ones ("yesterday (7 May 2023)")
            from the line's timestamp (:func:`ctxmgmt.messages.dates.anchor_dates`); default True.
        compact: Facts in fewer tokens: the prefix is ``Speaker (8 May 2023): `` instead of
            ``[1:56 pm on 8 May, 2023] Speaker: ``, leading interjections and vocatives
            ("Wow, Caroline! ...") are dropped and a sentence is scored on what remains;
            default False (the sentence and its prefix verbatim).

    Example:
        >>> s = ExtractiveSummarizer(max_sentences=1)
        >>> s.summarize([], "user: I adopted a cat named Miso on 3 May.\nassistant: Nice!")
        ['user: I adopted a cat named Miso on 3 May.']
    """

    uses_llm = False

    def __init__(
        self,
        *,
        max_sentences: int = 4,
        max_words: int = 40,
        min_words: int = 3,
        known_threshold: float = 0.6,
        max_input_chars: int | None = MAX_INPUT_CHARS,
        anchor_dates: bool = True,
        compact: bool = False,
    ) -> None:
        for label, value in (("max_sentences", max_sentences), ("max_words", max_words)):
            check_int(value, label)
        check_int(min_words, "min_words", 0)
        if not 0 < known_threshold <= 1:
            raise ConfigurationError(f"known_threshold must be in (0, 1], got {known_threshold!r}")
        self.max_sentences = max_sentences
        self.max_words = max_words
        self.min_words = min_words
        self.known_threshold = known_threshold
        self.max_input_chars = check_max_chars(max_input_chars)
        self.anchor_dates = bool(anchor_dates)
        self.compact = bool(compact)

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        """The window's ``max_sentences`` most informative new sentences, in order.

        Sentences are scored as written (after the filler cut when ``compact``); anchoring
        dates and shortening the prefix change the items, not which sentences are chosen.
        """
        pairs = _sentences(cap_text(window_text, self.max_input_chars))
        if self.compact:
            pairs = [(prefix, _strip_filler(sentence)) for prefix, sentence in pairs]
        words = [content_words(s) for _, s in pairs]
        n = len(words)
        sample: Sequence[int] = range(n)  # every sentence while the window has at most 65
        if n > CENTRALITY_SAMPLE + 1:
            sample = sorted({k * (n - 1) // (CENTRALITY_SAMPLE - 1) for k in range(CENTRALITY_SAMPLE)})
        eligible = [i for i, (_, s) in enumerate(pairs) if words[i] and len(s.split()) >= self.min_words]
        centrality = _centrality(words, eligible, sample)
        candidates: list[tuple[float, int]] = []
        for i, mean_overlap in zip(eligible, centrality, strict=True):
            prefix, sentence = pairs[i]
            score = specifics(sentence) + 3.0 * mean_overlap + min(0.1 * len(words[i]), 1.5)
            if sentence.endswith("?"):
                score -= 1.0
            if prefix.rstrip().endswith("user:"):
                score += USER_BONUS
            candidates.append((score, i))
        # Best first; a sentence the memory already holds is skipped, so only the sentences
        # read until max_sentences are kept are rendered and compared with the memory.
        known: list[set[str]] | None = None
        chosen: list[int] = []
        for _, i in sorted(candidates, key=lambda c: (-c[0], c[1])):
            if len(chosen) == self.max_sentences:
                break
            if previous:
                known = known if known is not None else [content_words(p) for p in previous]
                full = content_words(self._render(*pairs[i]))  # as it would be stored
                if any(jaccard(full, k) >= self.known_threshold for k in known):
                    continue
            chosen.append(i)
        return self._items(pairs, sorted(chosen))

    def _items(self, pairs: Sequence[tuple[str, str]], chosen: Sequence[int]) -> list[str]:
        """The chosen sentences of ``pairs`` as items, in the given order, each cut to ``max_words``."""
        out: list[str] = []
        for i in chosen:
            prefix, sentence = pairs[i]
            tokens = sentence.split()
            if len(tokens) > self.max_words:
                sentence = " ".join(tokens[: self.max_words]) + " ..."
            out.append(self._render(prefix, sentence))
        return out

    def _render(self, prefix: str, sentence: str) -> str:
        """One item: relative dates anchored; when compact, the prefix ``Speaker (date): ``."""
        match = _PREFIX.match(prefix)
        if match is None or not match["stamp"]:
            return prefix + sentence
        stamp = match["stamp"]
        first_seen = stamp.startswith(SEEN_MARK)  # anchors, but is not the conversation's own time
        stamp = stamp.removeprefix(SEEN_MARK)
        if self.anchor_dates:
            sentence = anchor_dates(sentence, stamp)
        if first_seen:
            return f"{match['speaker']}: {sentence}"
        if self.compact:
            day = parse_date(stamp)
            prefix = f"{match['speaker']} ({format_date(day)}): " if day else prefix
        return prefix + sentence
