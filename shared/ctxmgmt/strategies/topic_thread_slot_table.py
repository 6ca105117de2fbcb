"""SlotTable: TopicThread's memory, one slot per topic thread, and the rules that write it.

C-DIC (``papers/cdic-incremental-compression.md``, 3.2) keeps one compressed state per topic
thread and writes every new turn back into it: the turn revises the thread it continues or opens
a new one. A :class:`SlotTable` holds those threads (each a
:class:`~ctxmgmt.strategies.topic_thread_slot.Slot`), scores them for a query and applies the
write-back with TopicThread's split and capacity rules. The caller passes in what compresses a
thread's text (:class:`~ctxmgmt.strategies.topic_thread.TopicThreadStrategy`: its summarizer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ctxmgmt.components.summarizer import content_words, jaccard
from ctxmgmt.messages.context import span_label
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.messages.types import Turn
from ctxmgmt.strategies.base import checked_fields
from ctxmgmt.strategies.state import CappedLog
from ctxmgmt.strategies.topic_thread_slot import Slot, check_slot

SlotScore = tuple[float, float, float]
"""(score, cosine, decay factor) of one slot for one query: score = cosine x decay factor."""

Compress = Callable[[Sequence[str], str], list[str]]
"""``compress(previous items, text)``: the new items of a thread's state (a summarizer call)."""

EVENTS = ("insert", "revise", "split", "merge", "evict", "recompress")
"""Kinds of write-back event, counted in :attr:`SlotTable.counts` and logged in :attr:`SlotTable.log`."""

SPLIT_ITERATIONS = 8
"""Most 2-means iterations when a thread is split."""


class SlotRules(Protocol):
    """The parameters a :class:`SlotTable` follows (:class:`TopicThreadConfig` has them all)."""

    @property
    def tau(self) -> float:
        """Score threshold for retrieval and insert-vs-revise, in cosine units."""

    @property
    def alpha(self) -> float:
        """Decay rate per turn since a slot was last retrieved."""

    @property
    def top_k(self) -> int:
        """Most slots retrieved per query."""

    @property
    def max_slot_turns(self) -> int:
        """Turns a slot may cover before it is split in two."""

    @property
    def max_slots(self) -> int:
        """Most slots; above it two merge or one is evicted."""

    @property
    def state_items(self) -> int:
        """Items a slot's state may hold before it is re-compressed."""

    @property
    def centre(self) -> bool:
        """Whether cosines are taken after subtracting the mean turn embedding."""


class SlotTable:
    """TopicThread's slots, scored for a query and written back turn by turn (C-DIC 3.2).

    **Score** of a slot for a query vector ``q`` at turn ``t``::

        S(q, slot) = cos(q, slot) * exp(-alpha * (t - slot.last_retrieved))

    with the cosine taken on mean-centred embeddings when ``centre`` (the running mean of the
    turn embeddings added so far is subtracted from both sides). Slots with ``S > tau`` are
    retrieved (at most ``top_k``, best first); if none is, the best one is (top-1 fallback).

    **Write-back** (:meth:`add`, the turn as the query): the retrieved slots are marked
    retrieved at this turn. If the peak score is below ``tau`` (topic shift) a new slot is
    inserted with state ``compress([], turn)``; otherwise the best slot is revised:
    ``compress(state, turn)`` adds the turn's new items. A state over ``state_items`` items is
    re-compressed: ``compress([], state)`` (each resulting item keeps the source turn of the
    stored item it overlaps most).

    * *Split*: a slot covering more than ``max_slot_turns`` turns is split in two by 2-means
      over its turns' embeddings (seeds: its oldest turn and the turn least similar to it; 8
      iterations; if a side ends empty, it is split chronologically in halves). Items go with
      their source turn; both halves keep ``last_retrieved``.
    * *Capacity*: above ``max_slots`` slots, the two slots with the most similar embeddings
      whose union fits ``max_slot_turns`` merge (turns and items united, state re-compressed
      if too long). If no pair fits, the slot with the lowest decay factor (least recently
      retrieved; ties: the smallest) is evicted; its turns stay in the history (never lost)
      but no longer belong to a thread.

    Every insert, revision, split, merge, eviction and re-compression is counted
    (:attr:`counts`) and logged (:attr:`log`, the newest ``log_entries`` events).

    Args:
        rules: The parameters (a :class:`~ctxmgmt.strategies.topic_thread.TopicThreadConfig`).
        log_entries: Most write-back events kept in :attr:`log`, >= 1.

    Attributes:
        slots: The threads, in slot order.
        next_id: Id of the next slot opened.
        log: The newest write-back events, each ``{"event": kind, "turn": index, ...}``.
        counts: Events of each kind since the first turn.
        growth: Number of slots after each added turn.
    """

    def __init__(self, rules: SlotRules, *, log_entries: int) -> None:
        self.rules = rules
        self.slots: list[Slot] = []
        self.next_id = 0
        self.log: CappedLog[dict[str, Any]] = CappedLog(log_entries)
        self.counts = dict.fromkeys(EVENTS, 0)
        self.growth: list[int] = []
        self._total: np.ndarray = np.zeros(1)  # sum of the turn embeddings added
        self._count = 0
        self._sums: dict[int, tuple[Slot, list[float], np.ndarray]] = {}  # :meth:`_slot_sum`

    def __len__(self) -> int:
        return len(self.slots)

    # -- scoring --------------------------------------------------------------------------
    def mean(self) -> np.ndarray:
        """The mean embedding of the turns added (zeros when ``centre`` is off or no turns)."""
        if not self.rules.centre or not self._count:
            return np.zeros(1)
        return self._total / self._count

    def _slot_sum(self, slot: Slot) -> np.ndarray:
        """``slot.vector_sum`` as an array, converted once per value (every change assigns a new list)."""
        cached = self._sums.get(id(slot))
        if cached is not None and cached[0] is slot and cached[1] is slot.vector_sum:
            return cached[2]
        if len(self._sums) > 4 * self.rules.max_slots:
            self._sums.clear()
        array = np.asarray(slot.vector_sum, dtype=np.float64)
        self._sums[id(slot)] = (slot, slot.vector_sum, array)
        return array

    def _slot_matrix(self, mean: np.ndarray) -> np.ndarray:
        """Every slot's mean embedding minus ``mean``, at unit length (a zero row stays zero), stacked."""
        sizes = np.array([len(slot.turns) for slot in self.slots], dtype=np.float64)
        centred = np.vstack([self._slot_sum(slot) for slot in self.slots]) / sizes[:, None] - mean
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        return centred / np.where(norms > 0, norms, 1.0)

    def scores(self, vector: np.ndarray, now: int) -> list[SlotScore]:
        """(score, cosine, decay factor) of every slot for a query ``vector`` at turn ``now``."""
        if not self.slots:
            return []
        mean = self.mean()
        query = unit(np.asarray(vector, dtype=np.float64) - mean)
        cosines = self._slot_matrix(mean) @ query  # one product for every slot
        ages = np.maximum(0, now - np.array([slot.last_retrieved for slot in self.slots], dtype=np.float64))
        decays = np.exp(-float(self.rules.alpha) * ages)
        return list(zip((cosines * decays).tolist(), cosines.tolist(), decays.tolist(), strict=True))

    def retrieve(self, scores: Sequence[SlotScore], *, tau: float | None = None) -> list[int]:
        """Slot positions retrieved: score > tau (best first, at most top_k), else the top one.

        ``tau`` overrides the rules' threshold for this retrieval (None: the rules').
        """
        tau = self.rules.tau if tau is None else tau
        order = sorted(range(len(scores)), key=lambda i: (-scores[i][0], i))
        above = [i for i in order if scores[i][0] > tau][: self.rules.top_k]
        return above or order[:1]

    def describe(
        self, scores: Sequence[SlotScore], retrieved: Sequence[int], now: int
    ) -> list[dict[str, Any]]:
        """Every slot with its ``scores`` at turn ``now`` and whether it is ``retrieved`` (JSON data)."""
        retrieved_ids = {self.slots[p].id for p in retrieved}
        return [
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
            for p, slot in enumerate(self.slots)
        ]

    def explain(
        self, threads: Sequence[dict[str, Any]], fallback: bool, *, tau: float | None = None
    ) -> list[str]:
        """Lines explaining :meth:`describe` output, best score first (``fallback``: top-1 fallback).

        ``tau``: the retrieval threshold used (None: the rules').
        """
        rules = self.rules
        tau = rules.tau if tau is None else tau
        head = f"{len(threads)} threads (tau={tau:g}, alpha={rules.alpha:g})"
        lines = [f"{head}; write-back: {self.counts_text()}"]
        if fallback:
            lines.append("no thread scored above tau: the best one is retrieved (top-1 fallback)")
        for row in sorted(threads, key=lambda row: -row["score"]):
            mark = "*" if row["retrieved"] else " "
            lines.append(
                f"{mark} thread {row['slot']} turns {row['turns']} "
                f"({row['size']} turns, {row['items']} items): score {row['score']:.3f} = "
                f"cos {row['cosine']:.3f} x exp(-{rules.alpha:g} x {row['since_retrieved']}) = "
                f"decay {row['decay']:.3f}"
            )
        return lines

    def counts_text(self) -> str:
        """The event counts in words, e.g. ``"2 insert, 1 revise, 0 split, ..."``."""
        return ", ".join(f"{n} {kind}" for kind, n in self.counts.items())

    # -- write-back -----------------------------------------------------------------------
    def add(
        self, turn: Turn, vector: np.ndarray, *, turn_vectors: Sequence[np.ndarray], compress: Compress
    ) -> None:
        """Write ``turn`` (embedded as ``vector``) back into the slots.

        Args:
            turn: The new turn; its index is the turn number the events carry.
            vector: Its embedding.
            turn_vectors: The embeddings of every turn so far, this one included (a split
                reads its slot's turns).
            compress: Writes a thread's state (see :data:`Compress`).
        """
        vector = vector.astype(np.float64)
        self._total = self._total + vector
        self._count += 1
        self._write_back(turn, vector, turn_vectors, compress)
        self.growth.append(len(self.slots))

    def _event(self, kind: str, turn: int, **data: Any) -> None:
        self.counts[kind] += 1
        self.log.append({"event": kind, "turn": turn, **data})

    def _write_back(
        self, turn: Turn, vector: np.ndarray, turn_vectors: Sequence[np.ndarray], compress: Compress
    ) -> None:
        t = turn.index
        if not self.slots:
            self._insert(turn, vector, None, compress)
            return
        scores = self.scores(vector, t)
        retrieved = self.retrieve(scores)
        for i in retrieved:
            self.slots[i].last_retrieved = t
        best = retrieved[0]
        peak = scores[best][0]
        if peak < self.rules.tau:
            self._insert(turn, vector, peak, compress)
        else:
            self._revise(self.slots[best], turn, vector, peak, turn_vectors, compress)

    def _insert(self, turn: Turn, vector: np.ndarray, peak: float | None, compress: Compress) -> None:
        t = turn.index
        items = [[text, t] for text in compress([], turn.dated_text)]
        slot = Slot(
            id=self.next_id, items=items, turns=[t], vector_sum=vector.tolist(), last_retrieved=t, created=t
        )
        self.next_id += 1
        self.slots.append(slot)
        self._event("insert", t, slot=slot.id, peak=None if peak is None else round(peak, 4))
        if len(self.slots) > self.rules.max_slots:
            self._shrink(t, compress)

    def _revise(
        self,
        slot: Slot,
        turn: Turn,
        vector: np.ndarray,
        peak: float,
        turn_vectors: Sequence[np.ndarray],
        compress: Compress,
    ) -> None:
        t = turn.index
        new = compress(slot.state, turn.dated_text)
        slot.items.extend([text, t] for text in new)
        slot.turns.append(t)
        slot.vector_sum = (self._slot_sum(slot) + vector).tolist()
        slot.last_retrieved = t
        slot.revisions += 1
        self._event("revise", t, slot=slot.id, peak=round(peak, 4), added=len(new))
        if len(slot.items) > self.rules.state_items:
            self._recompress(slot, t, compress)
        if len(slot.turns) > self.rules.max_slot_turns:
            self._split(slot, t, turn_vectors, compress)

    def _recompress(self, slot: Slot, t: int, compress: Compress) -> None:
        """Re-compress the state as one text; each new item keeps its closest item's turn."""
        before = len(slot.items)
        texts = compress([], "\n".join(slot.state))
        if not texts:
            return
        old = [(content_words(str(text)), source) for text, source in slot.items]
        items: list[list[Any]] = []
        for text in texts[: self.rules.state_items]:
            words = content_words(text)
            source = max(old, key=lambda o: jaccard(words, o[0]))[1] if old else t
            items.append([text, source])
        items.sort(key=lambda item: item[1])
        slot.items = items
        self._event("recompress", t, slot=slot.id, before=before, after=len(items))

    def _split(self, slot: Slot, t: int, turn_vectors: Sequence[np.ndarray], compress: Compress) -> None:
        """Split ``slot`` in two by :func:`two_means` over its turns' embeddings."""
        members = list(slot.turns)
        raw = np.vstack([turn_vectors[i] for i in members]).astype(np.float64)
        labels, rule = two_means(raw - self.mean())
        halves: list[Slot] = []
        for k in (0, 1):
            turns = [m for m, label in zip(members, labels, strict=True) if label == k]
            keep = set(turns)
            halves.append(
                Slot(
                    id=slot.id if k == 0 else self.next_id,
                    items=[item for item in slot.items if item[1] in keep],
                    turns=turns,
                    vector_sum=raw[labels == k].sum(axis=0).tolist(),
                    last_retrieved=slot.last_retrieved,
                    created=turns[0],
                    revisions=slot.revisions if k == 0 else 0,
                )
            )
        self.next_id += 1
        position = self.slots.index(slot)
        self.slots[position : position + 1] = halves
        sizes = [len(h.turns) for h in halves]
        self._event("split", t, slot=slot.id, into=[h.id for h in halves], sizes=sizes, rule=rule)
        if len(self.slots) > self.rules.max_slots:
            self._shrink(t, compress)

    def _shrink(self, t: int, compress: Compress) -> None:
        """Merge the most similar pair that fits ``max_slot_turns``; else evict the stalest slot."""
        while len(self.slots) > self.rules.max_slots:
            pair = self._closest_fitting_pair()
            if pair is None:
                self._evict(t)
                continue
            similarity, a, b = pair
            keep, gone = self.slots[a], self.slots[b]
            keep.turns = sorted(keep.turns + gone.turns)
            keep.items = sorted(keep.items + gone.items, key=lambda item: item[1])
            keep.vector_sum = (np.asarray(keep.vector_sum) + np.asarray(gone.vector_sum)).tolist()
            keep.last_retrieved = max(keep.last_retrieved, gone.last_retrieved)
            keep.created = min(keep.created, gone.created)
            keep.revisions += gone.revisions + 1
            del self.slots[b]
            self._event("merge", t, slot=keep.id, merged=gone.id, similarity=round(similarity, 4))
            if len(keep.items) > self.rules.state_items:
                self._recompress(keep, t, compress)

    def _closest_fitting_pair(self) -> tuple[float, int, int] | None:
        """(similarity, a, b) of the most similar slots a < b whose turns together fit, or None.

        Among ties the first (a, b) in row order.
        """
        vectors = self._slot_matrix(self.mean())
        similarities = vectors @ vectors.T
        sizes = np.array([len(slot.turns) for slot in self.slots])
        fits = np.triu((sizes[:, None] + sizes[None, :]) <= self.rules.max_slot_turns, k=1)
        if not fits.any():
            return None
        flat = int(np.argmax(np.where(fits, similarities, -np.inf)))
        row, col = np.unravel_index(flat, similarities.shape)
        return float(similarities[row, col]), int(row), int(col)

    def _evict(self, t: int) -> None:
        """Drop the least recently retrieved slot (ties: the smallest, then the oldest id)."""
        victim = min(self.slots, key=lambda s: (s.last_retrieved, len(s.turns), s.id))
        self.slots.remove(victim)
        self._event(
            "evict", t, slot=victim.id, turns=span_label(victim.turns), last_retrieved=victim.last_retrieved
        )

    # -- persistence ----------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The slots, the next id, the log, the counts and the growth (plain data)."""
        return {
            "slots": [s.to_dict() for s in self.slots],
            "next_id": self.next_id,
            "log": self.log.map(dict),
            "counts": dict(self.counts),
            "growth": list(self.growth),
        }

    def load(self, state: dict[str, Any], turn_vectors: Sequence[np.ndarray], *, dim: int | None) -> None:
        """Restore :meth:`to_state` output over the turns embedded as ``turn_vectors``.

        Args:
            state: What :meth:`to_state` returned (``"log"``, ``"counts"`` and ``"growth"``
                may be missing: states written before they were kept).
            turn_vectors: The embeddings of every turn of the conversation.
            dim: The embeddings' dimension (None: not known yet).

        Raises:
            CorruptStateError: a slot is malformed or the counts are not integers; nothing is
                restored then.
        """
        slots = [checked_fields(Slot(**d), "slot") for d in state["slots"]]
        for slot in slots:
            check_slot(slot, dim, len(turn_vectors))
        next_id = int(state["next_id"])
        log = CappedLog.restored(self.log.cap, state.get("log", [])).map(dict)
        counts = dict(state.get("counts", {}))
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in counts.values()):
            raise CorruptStateError("saved event counts are not integers")
        for array in turn_vectors:
            self._total = self._total + array.astype(np.float64)
            self._count += 1
        self.slots, self.next_id, self.log = slots, next_id, log
        self.counts.update(counts)
        self.growth = list(state.get("growth", []))


def two_means(centred: np.ndarray) -> tuple[np.ndarray, str]:
    """Labels 0/1 splitting the rows of ``centred`` in two, and the rule that split them.

    2-means on the cosine (seeds: the first row and the row least similar to it; at most
    :data:`SPLIT_ITERATIONS` iterations). If every row ends on one side, the rows are split
    chronologically in halves (rule ``"chronological halves"``, else ``"2-means"``).
    """
    matrix = centred / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
    first = matrix[0]
    far = int(np.argmin(matrix @ first))
    centres = np.vstack([first, matrix[far]])
    labels = np.zeros(len(matrix), dtype=int)
    for _ in range(SPLIT_ITERATIONS):
        labels = np.argmax(matrix @ centres.T, axis=1)
        if labels.min() == labels.max():
            break
        centres = np.vstack([unit(matrix[labels == k].mean(axis=0)) for k in (0, 1)])
    if labels.min() == labels.max():
        halves = np.array([0 if k < len(matrix) // 2 else 1 for k in range(len(matrix))])
        return halves, "chronological halves"
    return labels, "2-means"


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` at unit length (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector
