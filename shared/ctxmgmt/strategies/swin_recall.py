"""PassageRecall: the sentences of older turns that best match a question (SWin's recall, beyond SWin)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ctxmgmt.messages.context import Block
from ctxmgmt.messages.dates import format_date, parse_date
from ctxmgmt.messages.framing import speaker_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.strategies.base import Strategy

RECALL_HEADER = "Passages of earlier turns that match the question (oldest first):"
"""First line of the recalled passages' block."""
PASSAGE_WORDS = 50
"""Longest recalled passage, in words: a longer sentence or list item is cut into pieces of this size."""
MIN_PASSAGE_WORDS = 3
"""Shortest passage indexed, in words ("Thanks!" is not a fact)."""
MIN_RECALL_TOKENS = 40
"""Smallest room worth a recalled-passages block, in tokens (its framing alone costs about 40)."""
TURN_WEIGHT = 1.0
"""Weight of a passage's turn's BM25 score (scaled to [0, 1]) added to its own (scaled alike)."""
BRIEF_WEIGHT = 2.0
"""Extra weight of its turn's scaled score for a passage of a brief message beside a long one
(:func:`brief_flags`: a user's words beside a long reply): a long reply's many passages share the
turn's match, the brief message says what the turn is about. LongMemEval dev at 4,000 tokens:
answer containment 0.435 from 1.5 to 3.0 (top-k BM25 0.435), 0.391 with 1.0, 0.370 with 0."""
LONG_MESSAGE = 10
"""Passages from which a message is long and the other messages of its turn brief; no message of
LoCoMo dev or MT-Bench+ dev has this many beside another (their recall is unchanged)."""
RECALL_CANDIDATES = 400
"""Best-scoring passages considered for the recall block (the rest score lower than any shown)."""
_PIECE = re.compile(r"(?<=[.!?])\s+(?=\S)|\n+")
"""Where a message splits into pieces: after a sentence's end, and at line breaks."""
_BULLET = re.compile(r"^\s*(?:[-*\u2022#>]+|\d+[.)])\s*")
"""A list item's or heading's marker at the start of a piece (dropped from the passage)."""


def pieces(text: str) -> list[str]:
    """A message's sentences and list items, each of at most :data:`PASSAGE_WORDS` words.

    Pieces shorter than :data:`MIN_PASSAGE_WORDS` words are left out; bullets and ``**`` go.
    """
    out: list[str] = []
    for raw in _PIECE.split(text):
        words = _BULLET.sub("", raw).replace("**", "").split()
        if len(words) < MIN_PASSAGE_WORDS:
            continue
        for k in range(0, len(words), PASSAGE_WORDS):
            piece = words[k : k + PASSAGE_WORDS]
            if len(piece) >= MIN_PASSAGE_WORDS:
                out.append(" ".join(piece))
    return out


def passages(turn: Turn) -> list[str]:
    """The passages of one turn as recall lines: ``speaker (date): text`` (no date when unknown)."""
    return [line for lines in message_passages(turn) for line in lines]


def message_passages(turn: Turn) -> list[list[str]]:
    """The recall lines of each message of ``turn`` (see :func:`passages`), one list per message."""
    out: list[list[str]] = []
    for message in turn.messages:
        if not message.text.strip():
            out.append([])
            continue
        day = parse_date(message.timestamp)
        when = f" ({format_date(day)})" if day else ""
        prefix = f"{speaker_label(message.name, message.role)}{when}: "
        out.append([prefix + piece for piece in pieces(message.text)])
    return out


def brief_flags(per_message: Sequence[Sequence[str]]) -> list[bool]:
    """Per message of a turn (its passages), whether it is brief beside a long one.

    Brief: fewer passages than the turn's longest message, which has at least
    :data:`LONG_MESSAGE` (a user's question or statement beside a long reply).
    """
    longest = max((len(lines) for lines in per_message), default=0)
    return [longest >= LONG_MESSAGE and len(lines) < longest for lines in per_message]


class PassageRecall:
    """Every passage (sentence or list item) of a session's turns, indexed for a query (BM25).

    The running memory keeps what windows found salient, not what a question will ask; these
    passages, each with its speaker and date, bring back the facts it asks about. A passage
    scores its own BM25 plus ``TURN_WEIGHT`` times its turn's, each scaled to [0, 1] (so a
    passage of a matching turn counts even when it shares no word with the query); a passage
    of a brief message beside a long one (the user's words beside a long reply,
    :func:`brief_flags`) adds ``BRIEF_WEIGHT`` times its turn's, so the fact a matching turn
    holds ("a Golden Retriever like Max") outranks the reply's many generic sentences. Derived
    from the turns, never stored: a restored strategy indexes its turns again.

    Attributes:
        lines: Each passage as a recall line, in the order indexed.
        turns: The turn index of each line.
        brief: Whether each line is of a brief message beside a long one.
    """

    def __init__(self) -> None:
        self._passage_index = BM25Index()
        self._turn_index = BM25Index()  # one document per turn: a passage inherits its turn's score
        self.lines: list[str] = []
        self.turns: list[int] = []
        self.brief: list[bool] = []
        self._turn_array = np.zeros(0, dtype=np.int64)
        self._weight_array = np.zeros(0, dtype=np.float64)

    def __len__(self) -> int:
        """Number of passages indexed."""
        return len(self.lines)

    def add(self, turns: Sequence[Turn]) -> None:
        """Index the passages of ``turns`` (each turn once, in order)."""
        for turn in turns:
            self._turn_index.add(turn.text)
            per_message = message_passages(turn)
            for lines, brief in zip(per_message, brief_flags(per_message), strict=True):
                for line in lines:
                    self._passage_index.add(line)
                    self.lines.append(line)
                    self.turns.append(turn.index)
                    self.brief.append(brief)

    def _turn_of_each(self) -> np.ndarray:
        """Each passage's turn, as an index array (rebuilt when passages were added)."""
        if len(self._turn_array) != len(self.turns):
            self._turn_array = np.array(self.turns, dtype=np.int64)
        return self._turn_array

    def _turn_weights(self) -> np.ndarray:
        """Each passage's weight of its turn's score (rebuilt when passages were added).

        :data:`TURN_WEIGHT`, plus :data:`BRIEF_WEIGHT` for a passage of a brief message.
        """
        if len(self._weight_array) != len(self.brief):
            self._weight_array = TURN_WEIGHT + BRIEF_WEIGHT * np.array(self.brief, dtype=np.float64)
        return self._weight_array

    def scores(self, query: str) -> np.ndarray:
        """Each passage's score for ``query``: its BM25 plus its turn's times its weight, scaled to [0, 1]."""
        scores = self._passage_index.scores(query)
        top = float(scores.max()) if len(scores) else 0.0
        scores = scores / top if top > 0 else scores
        if TURN_WEIGHT > 0 or BRIEF_WEIGHT > 0:  # a passage of a matching turn counts without a shared word
            turn_scores = self._turn_index.scores(query)
            best = float(turn_scores.max()) if len(turn_scores) else 0.0
            if best > 0:
                scores = scores + self._turn_weights() * turn_scores[self._turn_of_each()] / best
        return scores

    def block(self, strategy: Strategy, query: str, shown: set[int], cap: int) -> Block | None:
        """The passages of turns not in ``shown`` that match ``query`` best, oldest first, in ``cap`` tokens.

        A ``"summary"`` block of ``strategy`` (its token counter and memory role) headed by
        :data:`RECALL_HEADER`, one ``- line`` per passage, repeated lines once. Passages are taken
        best first while they fit; when the block's count exceeds the per-line estimate, the
        lowest-scoring go. None when the cap is below :data:`MIN_RECALL_TOKENS`, the query is
        blank, or nothing matches.
        """
        if cap < MIN_RECALL_TOKENS or not query.strip() or not self.lines:
            return None
        scores = self.scores(query)
        count = strategy.token_counter.count
        order = [int(k) for k in scores.argsort()[::-1][:RECALL_CANDIDATES] if scores[k] > 0]
        chosen: list[int] = []
        seen: set[str] = set()
        used = strategy.memory_tokens(RECALL_HEADER)
        for k in order:
            line = self.lines[k]
            if self.turns[k] in shown or line in seen:
                continue
            cost = count(line) + 2
            if used + cost <= cap:
                chosen.append(k)
                seen.add(line)
                used += cost
        if not chosen:
            return None
        out = self._block(strategy, chosen)
        while chosen and out.tokens > cap:  # the per-line estimate was short: the lowest-scoring go
            chosen.pop()
            out = self._block(strategy, chosen)
        return out if chosen else None

    def _block(self, strategy: Strategy, picked: list[int]) -> Block:
        """The recall block of passages ``picked`` (indices into :attr:`lines`), oldest first."""
        ordered = sorted(picked)
        return strategy.text_block(
            "summary",
            "\n".join([RECALL_HEADER, *(f"- {self.lines[k]}" for k in ordered)]),
            turns=sorted({self.turns[k] for k in ordered}),
            reason=f"recalled: {len(ordered)} passages of older turns that match the query",
        )
