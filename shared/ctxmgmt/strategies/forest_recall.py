"""The :class:`ForestRecall` of a discourse tree: earlier topics a query brings back verbatim.

Context-Agent shows only the active path verbatim; this extension (``recall_topics`` > 0)
scores every turn as KadaneDial does (cosine plus weighted BM25, shaped, then dialled with
KadaneDial's tuned values) and brings back the topics of the turns it finds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxmgmt.components.decider import ANAPHORA_CUES, has_cue
from ctxmgmt.components.static_turns import CosineMap
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.kadane import NEIGHBOUR_WEIGHT, SHARPNESS, TUNED_TAU, kadane_dial, shape_signal
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.relevance import LEXICAL_WEIGHT, fused_relevance
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_records import Plan

__all__ = ["ForestRecall"]


class ForestRecall:
    """Which earlier topics come back verbatim for a query, and why.

    Keeps a BM25 index of the turns (document ``i`` = turn ``i``, synced as turns arrive) and
    the last query's scores. A new :class:`ForestRecall` goes with a new forest (a reset).

    Args:
        topics: Most topics that come back (``DiscourseTreeConfig.recall_topics``, default 3; 0: none).
        ratio: Share of the best topic's relevance another topic needs to come back too
            (``recall_ratio``, default 0.65).
        window: Turns of a recalled topic, each side of its matching turn, that come back
            (``recall_window``, default 3).
    """

    def __init__(self, *, topics: int, ratio: float, window: int) -> None:
        self.topics = topics
        self.ratio = ratio
        self.window = window
        self._lexical = BM25Index()
        self._last: tuple[tuple[str, int, CosineMap | None], tuple[np.ndarray, list[int]]] | None = None

    def scored(
        self,
        forest: Forest,
        turns: Sequence[Turn],
        query: str,
        q: np.ndarray,
        cosine_map: CosineMap | None = None,
    ) -> tuple[np.ndarray, list[int]]:
        """(every turn's relevance, the turns KadaneDial finds in it) for ``query`` (its vector ``q``).

        A turn's relevance is its cosine (through ``cosine_map`` when given) plus KadaneDial's
        weighted, max-scaled BM25. Kept for the last query until a turn is placed (keyed by the
        number of nodes): a memory block selects the same query again when LlamaIndex ``Memory``
        truncates it, and then only trims.
        """
        key = (query, len(forest.nodes), cosine_map)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        while len(self._lexical) < len(turns):  # the index follows the turns (reset, restore)
            self._lexical.add(turns[len(self._lexical)].text)
        cosines = forest.node_similarities(q, cosine_map)[1]
        contents = forest.matrices()[1]
        relevance = fused_relevance(
            contents, q, self._lexical, query, lexical_weight=LEXICAL_WEIGHT, cosines=cosines
        )
        signal = shape_signal(relevance, sharpness=SHARPNESS, neighbour_weight=NEIGHBOUR_WEIGHT)
        scored = relevance, kadane_dial(signal, tau=TUNED_TAU).selected
        self._last = (key, scored)
        return scored

    def recalled(
        self, forest: Forest, plan: Plan, query: str, relevance: np.ndarray, found: Sequence[int]
    ) -> tuple[dict[int, list[int]], list[str]]:
        """Earlier topics that come back verbatim: ``{tree: its turns to show}`` and why, one line each.

        ``found`` are the turns KadaneDial finds in the shaped ``relevance`` (:meth:`scored`);
        each topic holding one is scored by its best such turn. The best topic comes back, and
        every other whose score is at least ``ratio`` of it, at most ``topics`` in all; each
        with the turns of its node list within ``window`` of its best turn (a short topic: all
        of it). A topic joined to others by follow-on openings
        (:meth:`~ctxmgmt.strategies.forest.Forest.linked_trees`) comes back with them, as one
        node list in turn order. A query that returns to the plan's tree (a topic switch, or a
        branch switch or new branch) also brings back that tree's newest path; a pointer at the
        latest answer ("your last response") brings back the current path.
        """
        if not self.topics or not forest.nodes:
            return {}, []
        best: dict[int, int] = {}
        for i in found:
            tree = forest.nodes[i].tree
            if tree not in best or relevance[i] > relevance[best[tree]]:
                best[tree] = i
        ranked = sorted(best, key=lambda t: (-relevance[best[t]], t))
        top = float(relevance[best[ranked[0]]]) if ranked else 0.0
        chosen = [t for t in ranked if relevance[best[t]] >= self.ratio * top][: self.topics]
        out: dict[int, set[int]] = {}
        lines: list[str] = []
        for t in chosen:
            linked = forest.linked_trees(t)
            nodes = (
                sorted(i for u in linked for i in forest.trees[u].nodes)
                if len(linked) > 1
                else forest.trees[t].nodes
            )
            k = nodes.index(best[t])
            for i in nodes[max(0, k - self.window) : k + self.window + 1]:
                out.setdefault(forest.nodes[i].tree, set()).add(i)
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
            out.setdefault(plan.tree, set()).update(forest.path(forest.trees[plan.tree].current))
            lines.append(f"the query returns to topic {plan.tree + 1}: its newest path comes back")
        pointer = has_cue(query, ANAPHORA_CUES)
        if pointer and forest.active is not None and forest.current is not None:
            out.setdefault(forest.active, set()).update(forest.path(forest.current))
            lines.append(f"pointer at the latest answer ({pointer!r}): the current path comes back")
        return {t: sorted(ids) for t, ids in out.items()}, lines
