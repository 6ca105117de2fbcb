"""What a turn's vector stands for: the whole turn when it fits the encoder, else what the user said.

An encoder reads only the start of a text: the bundled all-MiniLM-L6-v2 cuts it at 256 word
pieces, about 1,000 characters of English. A person-to-person turn (LoCoMo: two short
utterances) fits whole. An assistant chat's turn does not: a short user message followed by a
reply of 400 tokens or more (LongMemEval: median reply 1,770 characters) gives a vector that is
mostly the first half of the reply, and the questions a user asks later are about what they
said. Such a turn is embedded as its user message(s) alone; lexical scores (BM25) still read
the whole turn, so a fact in the reply is still found by its words.
"""

from __future__ import annotations

from ctxmgmt.messages.types import Turn

WINDOW_CHARS = 1000
"""Longest turn text (characters) embedded whole: about the 256 word pieces all-MiniLM-L6-v2
reads (4 characters a word piece in English). LongMemEval dev (20 items, best turns first at
4,000 tokens, fused with BM25): evidence recall 0.913 with the user message, 0.903 whole."""

USER_PART_RANKS = 30
"""With a budget, long turns among this many most relevant (and above the mean) that a selection
left out are offered as their user message alone (KadaneDial over budget: after the chosen
turns' user messages and before their replies; DiscourseTree: with what the budget leaves).
KadaneDial, LongMemEval dev at 4,000 tokens (60 items): evidence / session recall 0.982 / 0.986
(none offered: 0.960 / 0.969; 10: 0.969 / 0.978). LoCoMo and MT-Bench+ turns are under
:data:`WINDOW_CHARS`: never cut."""


USER_PART_MATCH = 0.5
"""Least share of the query's matched term weight (BM25 idf, :func:`ctxmgmt.scoring.lexical.match_share`)
a long turn's user message must hold to go without its reply: below it the reply holds what the
query asks about ("the recipe you gave me"), and the turn goes whole or not at all. ACM at
4,000 tokens, LongMemEval dev (60 items): answer containment 0.370 -> 0.413, single-session
assistant questions 0.29 -> 0.57 (0.3: 0.370; 0.7: 0.391)."""


def vector_text(turn: Turn, window_chars: int | None = WINDOW_CHARS) -> str:
    """The text embedded for ``turn``: :attr:`Turn.text`, or its user messages when it is longer.

    Args:
        turn: The turn.
        window_chars: Longest text embedded whole; None: always the whole turn.

    Example:
        >>> from ctxmgmt.messages.types import Message
        >>> turn = Turn(0, (Message("user", "My dog is a beagle."), Message("assistant", "Nice! " * 300)))
        >>> vector_text(turn)
        'user: My dog is a beagle.'
        >>> vector_text(turn, None) == turn.text
        True
    """
    text = turn.text
    if window_chars is None or len(text) <= window_chars:
        return text
    users = [m.render() for m in turn.messages if m.role == "user" and m.text.strip()]
    return "\n".join(users) if users else text
