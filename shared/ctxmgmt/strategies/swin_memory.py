"""SWinMemory: SWin's running memory of items, merged window by window, with dedup and forgetting."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxmgmt.components.summarizer import content_words, jaccard, numbers, salience
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.strategies.base import checked_fields
from ctxmgmt.strategies.state import CappedLog, plain_fields

Score = tuple[float, float, float]
"""(retention score, recency, salience) of a memory item (see :class:`SWinMemory`)."""


class RetentionConfig(Protocol):
    """The parameters the memory reads (``SWinConfig`` has them; see its fields for the defaults)."""

    @property
    def gamma(self) -> int:
        """Memory capacity, in items."""

    @property
    def forget_batch(self) -> int:
        """Extra items forgotten when the memory exceeds ``gamma``."""

    @property
    def half_life(self) -> float:
        """Recency half-life of an item, in windows."""

    @property
    def recency_weight(self) -> float:
        """Share of recency in the retention score, in [0, 1]."""

    @property
    def dedup_threshold(self) -> float:
        """Word-set Jaccard similarity at which a new item duplicates a stored one."""


@dataclass
class MemoryItem:
    """One statement of the running memory, with provenance.

    Attributes:
        text: The statement.
        session: Session in which its window was summarised (0 first; see ``new_session``).
        start: First turn of the window that produced it (index within ``session``).
        end: Last turn of that window (inclusive).
        window: Serial number of that window (counted over every session).
        last_window: Serial of the newest window that produced or repeated it.
        hits: How many windows produced it (1 + the duplicates merged into it).
    """

    text: str
    session: int
    start: int
    end: int
    window: int
    last_window: int
    hits: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return plain_fields(self)

    def scored(self, score: Score) -> dict[str, Any]:
        """:meth:`to_dict` with its ``score``, ``recency`` and ``salience`` (rounded to 4 places)."""
        return {
            **self.to_dict(),
            "score": round(score[0], 4),
            "recency": round(score[1], 4),
            "salience": round(score[2], 4),
        }


@functools.lru_cache(maxsize=4096)
def item_features(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content words, numbers) of a memory item's ``text``: compared with every new item.

    Kept for the 4,096 texts asked last, so each stored item is read once, not once per new item.
    """
    return frozenset(content_words(text)), frozenset(numbers(text))


def shorten(text: str, width: int = 60) -> str:
    """``text`` cut to ``width`` characters (the last three ``...``) for an explanation line."""
    return text if len(text) <= width else text[: width - 3] + "..."


class SWinMemory:
    """SWin's running memory: items with provenance, the log of merged windows, the forgotten items.

    Each summarised window's items are merged in (:meth:`merge`, SWin algorithm 2):

    * **Dedup**: an item whose word set (stemmed, stop words removed) has Jaccard similarity
      >= ``dedup_threshold`` with a stored item holding the same numbers is not added; the
      stored item is *reinforced* instead (``hits`` + 1, seen again at this window). Items with
      different numbers ("Bob is 40" / "Bob is 41") both stay.
    * **Forgetting**: above ``gamma`` items, the items with the lowest retention score go
      (ties: the older) until ``gamma - forget_batch`` are left (at most half of ``gamma``
      goes at once; ``forget_batch=0`` forgets one at a time, as published)::

          score = recency_weight * 0.5 ** (age / half_life) + (1 - recency_weight) * salience
          age = windows summarised since the item was last produced or reinforced
          salience = 1 - exp(-(names + numbers + dates in the item + hits - 1) / 3)

      so a recent item, or an old one dense in names, numbers and dates or repeated by
      several windows, stays.

    Not thread-safe: the strategy holds its lock around every call.

    Args:
        config: The retention parameters (read at each call).
        forgotten_cap: Forgotten items kept for explanations (the newest; a :class:`CappedLog`).

    Attributes:
        items: The memory, in the order items were added.
        log: One record per merged window: ``window`` (serial), ``session``, ``turns``
            (``[start, end]``), ``added`` and ``forgotten`` texts, ``merged`` duplicates
            (``text``, ``into``, ``similarity``) and ``fallback`` (the extractive summary stood in).
        forgotten: One record per forgotten item: ``text``, ``session``, ``turns``, ``window``,
            ``score``, ``recency``, ``salience`` and ``reason``.
        serial: Serial number the next window gets.
        last_serial: Serial of the newest merged window (-1: none yet).
    """

    def __init__(self, config: RetentionConfig, forgotten_cap: int) -> None:
        self.config = config
        self.items: list[MemoryItem] = []
        self.log: list[dict[str, Any]] = []
        self.forgotten: CappedLog[dict[str, Any]] = CappedLog(forgotten_cap)
        self.serial = 0
        self.last_serial = -1

    def new_serial(self) -> int:
        """The serial number of a window about to be summarised (counted over every session)."""
        serial = self.serial
        self.serial += 1
        return serial

    def chronological(self) -> list[MemoryItem]:
        """The items ordered by session, then first turn, then window: the order they are shown in."""
        return sorted(self.items, key=lambda i: (i.session, i.start, i.window))

    def score(self, item: MemoryItem) -> Score:
        """(retention score, recency, salience) of ``item`` now (see the class docstring)."""
        config = self.config
        age = max(0, self.last_serial - item.last_window)
        recency = 0.5 ** (age / config.half_life)
        sal = salience(item.text, item.hits - 1)
        return config.recency_weight * recency + (1 - config.recency_weight) * sal, recency, sal

    def merge(
        self, texts: Sequence[str], session: int, serial: int, start: int, end: int, *, fallback: bool
    ) -> None:
        """Merge window ``serial``'s items (it covered turns ``start..end`` of ``session``), then forget.

        ``fallback``: the extractive summary stood in for a failed summarizer (logged).
        """
        added: list[str] = []
        merged: list[dict[str, Any]] = []
        self.last_serial = max(self.last_serial, serial)
        for raw in texts:
            text = " ".join(str(raw).split())
            if not text:
                continue
            best, best_sim = self._closest(text)
            if best is not None and (best_sim >= self.config.dedup_threshold or text == best.text):
                best.hits += 1
                best.last_window = serial
                merged.append({"text": text, "into": best.text, "similarity": round(best_sim, 3)})
                continue
            self.items.append(MemoryItem(text, session, start, end, serial, serial))
            added.append(text)
        forgotten = self._forget(serial)
        self.log.append(
            {
                "window": serial,
                "session": session,
                "turns": [start, end],
                "added": added,
                "merged": merged,
                "forgotten": [f["text"] for f in forgotten],
                "fallback": fallback,
            }
        )

    def _closest(self, text: str) -> tuple[MemoryItem | None, float]:
        """(the stored item most like ``text`` with the same numbers, its Jaccard similarity)."""
        words, digits = item_features(text)
        best, best_sim = None, 0.0
        for item in self.items:
            item_words, item_digits = item_features(item.text)
            if item_digits != digits:  # "Bob is 40" and "Bob is 41" are two facts
                continue
            sim = jaccard(words, item_words)
            if sim > best_sim:
                best, best_sim = item, sim
        return best, best_sim

    def _forget(self, serial: int) -> list[dict[str, Any]]:
        """Drop the lowest-scoring items while over ``gamma`` (window ``serial`` just merged)."""
        out: list[dict[str, Any]] = []
        gamma = self.config.gamma
        if len(self.items) <= gamma:
            return out
        # nothing a score reads changes while items go: score them once
        scored = [(self.score(item), item) for item in self.items]
        keep = gamma - min(self.config.forget_batch, gamma // 2)
        while len(self.items) > keep:
            pick = min(range(len(scored)), key=lambda k: (scored[k][0][0], scored[k][1].window))
            (score, recency, sal), victim = scored.pop(pick)
            self.items.remove(victim)
            record = {
                "text": victim.text,
                "session": victim.session,
                "turns": [victim.start, victim.end],
                "window": serial,
                "score": round(score, 4),
                "recency": round(recency, 4),
                "salience": round(sal, 4),
                "reason": f"lowest retention score when window {serial} went over gamma={gamma}",
            }
            out.append(record)
            self.forgotten.append(record)
        return out

    def explain_lines(self, last: int | None = None) -> list[str]:
        """One line per merged window (items added, merged, forgotten and why), then the forgotten.

        ``last``: only the newest ``last`` windows and forgotten items (None: all).
        """
        lines: list[str] = []
        start = 0 if last is None else max(0, len(self.log) - last)
        for w in self.log[start:]:
            s, e = w["turns"]
            parts = [f"+{len(w['added'])} items"]
            if w["merged"]:
                parts.append(f"{len(w['merged'])} duplicates reinforced")
            if w["fallback"]:
                parts.append("extractive fallback")
            lines.append(f"window {w['window']} (session {w['session']}, turns {s}-{e}): " + ", ".join(parts))
            lines.extend(f"    + {shorten(t)!r}" for t in w["added"])
            lines.extend(f"    = {shorten(m['text'])!r} ~ {shorten(m['into'], 40)!r}" for m in w["merged"])
        weight = self.config.recency_weight
        forgotten = self.forgotten if last is None else self.forgotten[-last:]
        for f in forgotten:
            lines.append(
                f"forgot {shorten(f['text'])!r} (session {f['session']}, turns {f['turns'][0]}-"
                f"{f['turns'][1]}): score {f['score']:.2f} = {weight:g} * recency "
                f"{f['recency']:.2f} + {1 - weight:g} * salience {f['salience']:.2f}, "
                f"the lowest when window {f['window']} exceeded gamma={self.config.gamma}"
            )
        return lines

    def restore(self, state: dict[str, Any], turns: int) -> None:
        """Replace the memory by a stored one: ``items``, ``windows``, ``forgotten``, two serials.

        ``turns``: how many turns the current session (``state["session"]``) has.

        Raises:
            CorruptStateError: an item or window covers turns that do not exist.
        """
        items = [checked_fields(MemoryItem(**d), "memory item") for d in state["items"]]
        windows = [dict(w) for w in state["windows"]]
        check_restored(items, windows, turns, int(state["session"]))
        self.items = items
        self.log = windows
        self.forgotten = CappedLog.restored(self.forgotten.cap, state["forgotten"]).map(dict)
        self.serial = int(state["serial"])
        self.last_serial = int(state["last_serial"])


def check_restored(items: list[MemoryItem], windows: list[dict[str, Any]], turns: int, session: int) -> None:
    """Restored memory items and windows of the current session cover turns that exist.

    Items and windows carried over from earlier sessions (``new_session``) only need well-formed
    turn ranges.

    Raises:
        CorruptStateError: they do not (a stored record was altered).
    """
    for item in items:
        limit = max(turns, 1) if item.session == session else item.end + 1
        if not 0 <= item.start <= item.end < limit:
            raise CorruptStateError(f"saved memory item covers turns {item.start}..{item.end} of {turns}")
    for window in windows:
        span = window.get("turns")
        ok = (
            isinstance(span, list)
            and len(span) == 2
            and all(isinstance(t, int) and not isinstance(t, bool) for t in span)
            and 0 <= span[0] <= span[1]
        )
        if not ok or (window.get("session") == session and span[1] >= max(turns, 1)):  # type: ignore[index]
            raise CorruptStateError(f"saved window covers turns {span!r:.40} of {turns}")
