"""BlockMeasure: the exact token cost of ACM's text blocks (a header line, then one line per item)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxmgmt.components.tokens import MESSAGE_OVERHEAD


@dataclass(frozen=True)
class BlockMeasure:
    """Counts ACM's text blocks as they are sent, and fits lines and text into a token limit.

    A block is a header line followed by item lines, sent as one framed memory message
    (:meth:`ctxmgmt.strategies.base.Strategy.memory_tokens`).

    Attributes:
        memory_tokens: Tokens of a text sent as a memory message, overhead included.
        count: Tokens of a plain text (the token counter).
    """

    memory_tokens: Callable[[str], int]
    count: Callable[[str], int]

    def block_tokens(self, header: str, lines: Sequence[str]) -> int:
        """Tokens of the block ``header`` + ``lines`` as sent; 0 when there are no lines (no block)."""
        if not lines:
            return 0
        return self.memory_tokens("\n".join([header, *lines]))

    def fill_lines(self, header: str, chosen: list[str], candidates: Sequence[str], cap: int) -> list[str]:
        """``chosen`` with candidate lines added, in order, while the block stays within ``cap`` tokens.

        Lines are added greedily on a per-line estimate (a line's tokens plus one for its
        newline), then the block is counted exactly and the last lines added are removed until
        it fits: the result is within ``cap`` whatever the tokenizer does at line boundaries.
        ``chosen`` itself is kept (and not changed).
        """
        out = list(chosen)
        estimate = self.block_tokens(header, out) if out else self.count(header) + MESSAGE_OVERHEAD
        for line in candidates:
            cost = self.count(line) + 1
            if estimate + cost <= cap:
                out.append(line)
                estimate += cost
        while len(out) > len(chosen) and self.block_tokens(header, out) > cap:
            out.pop()
        return out

    def fit(self, text: str, limit: int) -> str:
        """The longest word prefix of ``text`` within ``limit`` tokens, marked with " ..." when cut.

        "" when ``limit`` is not positive or not even one word fits.
        """
        if limit <= 0 or not text:
            return ""
        if self.count(text) <= limit:
            return text
        words = text.split()
        low, high = 0, len(words)
        while low < high:  # largest k with words[:k] + " ..." within the limit
            middle = (low + high + 1) // 2
            if self.count(" ".join(words[:middle]) + " ...") <= limit:
                low = middle
            else:
                high = middle - 1
        return " ".join(words[:low]) + " ..." if low else ""
