"""SWin's memory as append-only summary messages, and what of a select fits its budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ctxmgmt.components.summarizer import content_words, jaccard
from ctxmgmt.messages.context import Block
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.swin_memory import MemoryItem, Score, item_features, shorten

HEADER = "Summary of the earlier conversation:"
"""First line of the summary block."""
QUERY_WEIGHT = 0.5
"""Weight of an item's word overlap with the query when the budget forces items out."""


def summary_segments(strategy: Strategy, items: Sequence[MemoryItem], size: int, session: int) -> list[Block]:
    """The memory as consecutive ``"summary"`` blocks of ``size`` items each, oldest first.

    ``items`` are chronological and a window only appends to them, so between forgettings a new
    window changes the last block alone: the earlier ones stay byte-identical (a provider's
    prompt cache keeps them). A block's turns are those of its items' windows in ``session``
    (the current one); the first block starts with :data:`HEADER`.
    """
    blocks: list[Block] = []
    for k in range(0, len(items), size):
        chunk = items[k : k + size]
        lines = [HEADER] if k == 0 else []
        text = "\n".join([*lines, *(f"- {item.text}" for item in chunk)])
        turns = sorted({t for i in chunk if i.session == session for t in range(i.start, i.end + 1)})
        windows = sorted({i.window for i in chunk})
        blocks.append(
            strategy.text_block(
                "summary",
                text,
                turns=turns,
                reason=f"SWin memory: items {k + 1}-{k + len(chunk)} of {len(items)}, windows {windows}",
            )
        )
    return blocks


def priorities(query: str, items: Sequence[MemoryItem], scores: dict[int, Score]) -> dict[int, float]:
    """Each item's claim to stay within a budget, by ``id``: retention score + query word overlap.

    The overlap is the Jaccard similarity of the content words, weighted :data:`QUERY_WEIGHT`.
    """
    query_words = content_words(query)
    return {
        id(i): scores[id(i)][0] + QUERY_WEIGHT * jaccard(query_words, item_features(i.text)[0]) for i in items
    }


def fit_items(
    items: list[MemoryItem],
    priority: dict[int, float],
    room: int,
    tokens: Callable[[list[MemoryItem]], int],
) -> tuple[list[MemoryItem], list[MemoryItem]]:
    """(kept, dropped): the fewest memory items dropped for ``tokens(kept)`` to fit ``room`` tokens.

    Items go lowest ``priority`` (keyed by ``id(item)``) first, ties to the earlier window, then
    to the earlier item; ``kept`` keeps the order of ``items``. The tokens shrink as items go, so
    the number of drops is found by bisection: a few summaries are rendered and counted instead
    of one per dropped item (~20 ms per over-budget selection on a 300-turn conversation before).
    ``room`` < 0: every item goes.
    """
    order = sorted(items, key=lambda i: (priority[id(i)], i.window))

    def rest(k: int) -> list[MemoryItem]:
        gone = {id(i) for i in order[:k]}
        return [i for i in items if id(i) not in gone]

    if room < 0:
        return [], order
    low, high = 0, len(order)  # dropping all of them fits (an empty summary): find the first k that fits
    while low < high:
        middle = (low + high) // 2
        if tokens(rest(middle)) <= room:
            high = middle
        else:
            low = middle + 1
    return rest(low), order[:low]


@dataclass
class Fitted:
    """What a SWin select shows within its budget, and what the budget left out."""

    items: list[MemoryItem]
    """Every memory item, chronological."""
    scores: dict[int, Score]
    """Each item's (retention score, recency, salience), by ``id``."""
    priority: dict[int, float]
    """Each item's claim to stay (:func:`priorities`), by ``id``."""
    kept: list[MemoryItem]
    """The items shown, chronological."""
    verbatim: list[int]
    """Turns shown verbatim (the open window), oldest first."""
    recall: Block | None = None
    """The recalled passages' block (None: no room or nothing matches)."""
    dropped_items: list[MemoryItem] = field(default_factory=list)
    dropped_turns: list[int] = field(default_factory=list)

    def drop_lines(self) -> list[str]:
        """Explanation lines for what the budget left out (none when it all fits)."""
        lines: list[str] = []
        if self.dropped_items:
            lines.append(
                "dropped for the budget: "
                + "; ".join(
                    f"{shorten(i.text, 40)!r} (priority {self.priority[id(i)]:.2f})"
                    for i in self.dropped_items
                )
            )
        if self.dropped_turns:
            lines.append(f"dropped for the budget: turns {self.dropped_turns}")
        return lines
