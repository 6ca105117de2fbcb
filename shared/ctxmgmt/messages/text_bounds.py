"""The one bound on what any component reads of one text: head and tail kept, a marker between.

:func:`bound_input` cuts every text a component reads (an embedder's input, a model prompt,
the spaCy extractor's and the extractive summariser's input, a BM25 document) to
:data:`MAX_INPUT_CHARS` characters; :func:`cap_text` does the cut for any limit. Only the
component's copy is cut; the stored history never is. Also importable from
:mod:`ctxmgmt.components.llm_call`, where the LLM components use them.
"""

from __future__ import annotations

MAX_INPUT_CHARS = 24_000
"""Most characters of one text any component reads: the one bound on work per input.

Every text that reaches a component is cut to it first (:func:`bound_input`, head and tail
kept): a model prompt (LLM summariser, decider, entity extractor, where ``llm_max_input_chars``
can change it), an embedder's input (:func:`ctxmgmt.components.embedder.embed_documents`), the
spaCy entity extractor's and the extractive summariser's input. Only the component's copy is
cut; the stored history never is. About 6,000 tokens at OpenAI's rule of thumb of ~4 characters
per English token, so a prompt with its instructions still fits an 8,192-token context window
with room for the answer; far more than the default embedder reads (256 word pieces, the first
~1,500 characters of English text), so its vectors never change for a text it could read."""

TRUNCATION_MARKER = "\n[... {removed} characters left out ...]\n"
"""What :func:`cap_text` puts where it cut text out (``{removed}``: how many characters)."""


def cap_text(text: str, max_chars: int | None) -> str:
    """``text`` cut to at most ``max_chars`` characters: head and tail kept, a marker between.

    The head gets two thirds of the room (where a message states its point), the tail the
    rest; the marker (:data:`TRUNCATION_MARKER`) says how many characters were left out.
    None (or a text that fits) returns ``text`` unchanged.

    Example:
        >>> cap_text("a" * 100 + "b" * 100, 120).count("left out")
        1
        >>> len(cap_text("x" * 10_000, 500)) <= 500
        True
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    marker = TRUNCATION_MARKER.format(removed=len(text))  # longest possible marker: sized first
    room = max(max_chars - len(marker), 0)
    head = room * 2 // 3
    tail = room - head
    marker = TRUNCATION_MARKER.format(removed=len(text) - head - tail)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def bound_input(text: str) -> str:
    """``text`` within :data:`MAX_INPUT_CHARS` (:func:`cap_text`): what a component may read of it.

    Example:
        >>> len(bound_input("x" * 5_000_000)) <= MAX_INPUT_CHARS
        True
    """
    return cap_text(text, MAX_INPUT_CHARS)
