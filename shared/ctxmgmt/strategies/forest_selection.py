"""What a discourse-tree context shows for a plan (Context-Agent 3.3 step 4), within a budget.

- :func:`summary_sections`: the other topics and side branches, one summary section each.
- :func:`summary_text`: the summary block's text, with each section's key terms.
- :class:`ForestSelection`: the active path, the recalled and recent turns and the sections
  kept, cut to the caps and the budget, with the reasons :meth:`DiscourseTreeStrategy.select
  <ctxmgmt.strategies.discourse_tree.DiscourseTreeStrategy.select>` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxmgmt.components.decider import TopicDecision
from ctxmgmt.components.summarizer import specific_terms
from ctxmgmt.messages.context import span_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.relevance import best_above_mean
from ctxmgmt.strategies.forest import Forest
from ctxmgmt.strategies.forest_records import Plan, Section

__all__ = [
    "HEADER",
    "ForestSelection",
    "decision_lines",
    "first_query_details",
    "key_terms",
    "summary_sections",
    "summary_text",
]

HEADER = "Summaries of the other topics and branches of this conversation:"
"""First line of the summary block."""


def summary_sections(forest: Forest, plan: Plan, sims: np.ndarray, shown: set[int]) -> list[Section]:
    """A plan's summary sections in layout order: the other topics, then the active topic's side branches.

    ``sims`` is the query's cosine with every node's turn; a topic or branch all of whose
    turns are in ``shown`` (verbatim) gets no section.
    """
    on_path = set(forest.path(plan.parent) if plan.tree is not None else [])
    sections: list[Section] = []
    for tree in forest.trees:
        if tree.id == plan.tree or shown.issuperset(tree.nodes):
            continue
        text, ids = forest.tree_parts(tree).summary
        best = round(float(sims[ids].max()), 4)
        sections.append(Section("topic", tree.id, None, text, ids, best, members=tuple(tree.nodes)))
    if plan.tree is None:
        return sections
    for branch in forest.branches:
        if branch.tree != plan.tree:
            continue
        off = [i for i in branch.nodes if i not in on_path]
        if not off or shown.issuperset(off):
            continue
        text, ids = forest.summary_of(off)
        after = forest.nodes[off[0]].parent
        best = round(float(sims[ids].max()), 4)
        sections.append(Section("branch", plan.tree, branch.id, text, ids, best, after, members=tuple(off)))
    return sections


def key_terms(
    section: Section, body: str, turns: Sequence[Turn], cache: dict[int, list[str]], limit: int
) -> list[str]:
    """Names, numbers and dates of ``section``'s turns not already in ``body`` (at most ``limit``).

    ``cache`` keeps each turn's terms (turn index -> terms) from one summary to the next.
    """
    found: list[str] = []
    for i in section.members or section.turns:
        terms = cache.get(i)
        if terms is None:
            terms = cache[i] = [t for m in turns[i].messages for t in specific_terms(m.text)]
        for term in terms:
            if term not in found and term not in body:
                found.append(term)
                if len(found) == limit:
                    return found
    return found


def summary_text(
    forest: Forest,
    sections: Sequence[Section],
    turns: Sequence[Turn],
    cache: dict[int, list[str]],
    limit: int,
) -> str:
    """The summary block: :data:`HEADER`, then one line per section with up to ``limit`` key terms."""
    lines = [HEADER]
    for s in sections:
        body = "; ".join(forest.nodes[i].summary.rstrip(" .;") for i in s.turns)
        terms = key_terms(s, body, turns, cache, limit) if limit else []
        if terms:
            body += f" [names, numbers, dates: {', '.join(terms)}]"
        if s.kind == "topic":
            lines.append(f"- Topic {s.tree + 1} (turns {span_label(s.turns, ', ')}): {body}")
        else:
            where = f"after turn {s.after}" if s.after is not None else "at the start"
            lines.append(f"- Side branch of this topic {where} (turns {span_label(s.turns, ', ')}): {body}")
    return "\n".join(lines)


def first_query_details(query: str) -> dict[str, Any]:
    """The ``details`` of a context selected before any turn: the query starts the first topic."""
    first = TopicDecision("create", None, "first query: no topic tree yet")
    return {
        "plan": {"query": query, "topic": first.to_dict(), "tree": None, "parent": None},
        "path": [],
        "recalled": {},
        "explain": ["no turns yet: the query starts the first topic"],
    }


def decision_lines(plan: Plan) -> list[str]:
    """The plan's decisions, one line each, and the node the query follows."""
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


@dataclass
class ForestSelection:
    """What one context shows: verbatim turns and summary sections, and what was cut and why.

    Attributes:
        plan: The query's plan.
        relevance: Every turn's relevance to the query (zeros without recall).
        path: The active path (root to the node the query follows; empty for a new topic).
        recalled: Recalled topics' turns by tree (:meth:`.forest_recall.ForestRecall.recalled`).
        recall_lines: Why each came back.
        recent: The newest turns shown although off the path (``recent_turns``).
        sections: Every summary section, in layout order (:func:`summary_sections`).
        kept: The sections in the summary block.
        verbatim: The turns shown verbatim, in turn order.
        capped: Sections left out because the verbatim turns span several topics (``summary_share``).
        dropped_sections: Sections dropped for the budget.
        dropped_turns: Turns dropped for the budget.
    """

    plan: Plan
    relevance: np.ndarray
    path: list[int]
    recalled: dict[int, list[int]]
    recall_lines: list[str]
    recent: list[int]
    sections: list[Section]
    kept: list[Section]
    verbatim: list[int]
    capped: list[Section] = field(default_factory=list)
    dropped_sections: list[Section] = field(default_factory=list)
    dropped_turns: list[int] = field(default_factory=list)
    user_only: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        forest: Forest,
        plan: Plan,
        recalled: tuple[dict[int, list[int]], list[str]],
        sims: np.ndarray,
        relevance: np.ndarray,
        *,
        turns: int,
        recent_turns: int,
    ) -> ForestSelection:
        """Every turn and section ``plan`` could show, every section kept.

        Its path, the ``recalled`` turns (``ForestRecall.recalled``), the newest
        ``recent_turns`` of ``turns`` and the summary sections (``sims``: the query's cosine with every turn;
        ``relevance``: every turn's, which recalled turns the budget drops first).
        """
        path = forest.path(plan.parent) if plan.tree is not None else []
        extra = {i for ids in recalled[0].values() for i in ids} - set(path)
        recent = [i for i in range(max(0, turns - recent_turns), turns) if i not in path]
        sections = summary_sections(forest, plan, sims, set(path) | extra | set(recent))
        verbatim = sorted(set(path) | set(recent) | extra)
        return cls(
            plan, relevance, path, recalled[0], recalled[1], recent, sections, list(sections), verbatim
        )

    @property
    def extra(self) -> set[int]:
        """Recalled turns off the active path."""
        return {i for ids in self.recalled.values() for i in ids} - set(self.path)

    @property
    def in_view(self) -> set[int]:
        """Trees whose turns are shown verbatim: the recalled ones and the plan's (when it has a path)."""
        shown = self.plan.tree if self.path else None  # a path only where the plan has a tree
        return set(self.recalled) | (set() if shown is None else {shown})

    def keep_most_similar(self, limit: int | None) -> None:
        """Keep at most ``limit`` sections, the most similar to the query, in layout order (None: all)."""
        if limit is None or len(self.kept) <= limit:
            return
        top = sorted(self.kept, key=lambda s: (-s.similarity, s.tree, -1 if s.branch is None else s.branch))
        chosen = set(map(id, top[:limit]))
        self.kept = [s for s in self.kept if id(s) in chosen]

    def cap(self, share: float | None, verbatim_tokens: int, total_tokens: int) -> None:
        """Leave the summaries out when verbatim turns of several topics pass ``share`` of the history."""
        if (
            share is not None
            and self.kept
            and len(self.in_view) > 1
            and verbatim_tokens > share * total_tokens
        ):
            self.capped, self.kept = self.kept, []

    def fit(
        self,
        budget: int,
        summary_tokens: Callable[[Sequence[Section]], int],
        tokens_of: Callable[[Sequence[int]], int],
    ) -> int:
        """Cut to ``budget`` tokens; returns the tokens of what is left (summary and verbatim turns).

        The least similar sections go first, then recalled turns (least ``relevance`` first),
        then the oldest path turns.
        """
        spare = sorted(
            self.extra - set(self.recent), key=lambda i: (self.relevance[i], -i)
        )  # least relevant first
        while True:
            used = summary_tokens(self.kept) + tokens_of(self.verbatim)
            if not (self.kept or self.verbatim) or used <= budget:
                return used
            if self.kept:
                victim = min(self.kept, key=lambda s: (s.similarity, -len(s.turns)))
                self.kept.remove(victim)
                self.dropped_sections.append(victim)
            elif spare:
                turn = spare.pop(0)
                self.verbatim.remove(turn)
                self.dropped_turns.append(turn)
            else:
                self.dropped_turns.append(self.verbatim.pop(0))

    def fill_user_parts(self, room: int, user_part: Callable[[int], int | None], ranks: int) -> None:
        """Spend ``room`` tokens on the user message(s) of the most relevant long turns not shown.

        Candidates: the ``ranks`` most relevant turns above the mean relevance that are not
        verbatim and have a user part to send alone (``user_part``: its tokens, else None), most
        relevant first, each if it fits (:attr:`user_only`).
        """
        if room <= 0:
            return
        shown = set(self.verbatim)
        for i in best_above_mean(self.relevance, ranks):
            if i in shown:
                continue
            part = user_part(i)
            if part is not None and part <= room:
                self.user_only[i] = part
                room -= part

    def summary_reason(self) -> str:
        """The summary block's reason: how many topics and side branches it holds."""
        topics = sum(s.kind == "topic" for s in self.kept)
        branches = sum(s.kind == "branch" for s in self.kept)
        return f"{topics} other topics and {branches} side branches, summarised"

    def run_reason(self, run: Sequence[int], forest: Forest, recent_turns: int) -> str:
        """Why the contiguous ``run`` of verbatim turns is shown."""
        on_path = set(self.path)
        if self.plan.tree is not None and any(i in on_path for i in run):
            why = f"active path of topic {self.plan.tree + 1}, branch {forest.nodes[run[-1]].branch}"
            return why + (", with recalled turns" if any(i not in on_path for i in run) else "")
        tree_of = {i: t for t, ids in self.recalled.items() for i in ids}
        if run[0] in tree_of:
            return f"recalled from topic {tree_of[run[0]] + 1}"
        return f"one of the last {recent_turns} turns"

    def drawn(self) -> tuple[list[int], set[int]]:
        """(the trees, the turns) the explanation draws: those in the context."""
        trees = {self.plan.tree, *self.recalled, *(s.tree for s in self.kept)} - {None}
        turns = {*self.verbatim, *self.path, *(i for s in self.kept for i in s.turns)}
        return sorted(t for t in trees if t is not None), turns

    def cut_lines(self, share: float | None) -> list[str]:
        """What the caps and the budget left out, one line each."""
        lines: list[str] = []
        if self.dropped_sections:
            dropped = "; ".join(
                f"{s.kind} {s.tree + 1 if s.kind == 'topic' else s.branch} (cosine {s.similarity:.2f})"
                for s in self.dropped_sections
            )
            lines.append(f"dropped for the budget: {dropped}")
        if self.dropped_turns:
            lines.append(f"dropped for the budget: turns {sorted(self.dropped_turns)}")
        if self.user_only:
            lines.append(
                f"user message alone, reply left out, with the budget left: turns {sorted(self.user_only)}"
            )
        if self.capped:
            lines.append(
                f"summaries of {len(self.capped)} topics and branches left out: the verbatim turns span "
                f"{len(self.in_view)} topics and pass {share:g} of the history's tokens"
            )
        return lines

    def explain(self, forest: Forest, share: float | None) -> list[str]:
        """The explanation: the decisions, why topics came back, the part of ``forest`` shown, the cuts.

        ``share`` is the ``summary_share`` the summaries were capped by.
        """
        trees, turns = self.drawn()
        drawing = forest.text(self.plan, trees=trees, turns=turns)
        return [*decision_lines(self.plan), *self.recall_lines, *drawing.splitlines(), *self.cut_lines(share)]

    def details(
        self, forest: Forest, llm_calls: int, share: float | None, *, explain: bool = True
    ) -> dict[str, Any]:
        """The context's ``details``: the plan, the topic scores, what is shown and cut, the counts.

        ``llm_calls`` is the strategy's count; ``share`` the ``summary_share`` (:meth:`explain`).
        ``explain=False`` leaves the explanation (the drawn forest) out.
        """
        described = self.plan.to_dict()
        scores = described.pop("scores")
        return {
            "plan": described,
            "topic_scores": scores,
            "path": self.path,
            "recalled": {str(t): ids for t, ids in self.recalled.items()},
            "sections": [s.details() for s in self.sections],
            "dropped_sections": [s.details() for s in self.dropped_sections],
            "capped_sections": [s.details() for s in self.capped],
            "dropped_turns": self.dropped_turns,
            "trees": len(forest.trees),
            "branches": len(forest.branches),
            "llm_calls": llm_calls,
            **({"explain": self.explain(forest, share)} if explain else {}),
        }
