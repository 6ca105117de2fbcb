"""The offline decider: embedding similarities, cue phrases and a fitted topic-shift model.

:class:`EmbeddedDecider` decides from the similarities the strategy puts in its views and from
cue phrases ("back to", "instead", "by the way"); no LLM call. Its topic decision reads a
logistic shift model (:data:`SHIFT_MODEL`, fitted on TIAGE train over :data:`SHIFT_FEATURES`;
``python benchmarks/discourse_tree.py --fit`` refits it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxmgmt.components.decider.decisions import BranchDecision, NodeView, TopicDecision, TopicView
from ctxmgmt.messages.exceptions import ConfigurationError

THETA_SIM = 0.6
"""Similarity at which a query belongs to an existing topic tree; 0.6 per Context-Agent 4.1 (Qwen3
embeddings). With the bundled MiniLM the tuned default of :class:`EmbeddedDecider` is lower."""
THETA_TOPIC = 0.3
"""Tuned (TIAGE train) similarity to the active tree at or above which the topic continues (MiniLM)."""
THETA_SWITCH = 0.45
"""Tuned similarity to another tree at or above which the query switches to it (MiniLM)."""
SWITCH_MARGIN = 0.1
"""How much more similar another tree must be than the active one to switch away from it."""
THETA_FORK = 0.35
"""Similarity a fork node needs for the branch filter to fire (MiniLM; Context-Agent 3.3 step 3);
the default of ``DiscourseTreeConfig.theta_fork`` (the filter is the strategy's, not a decider's)."""
BRANCH_MARGIN = 0.15
"""How much more similar the fork node must be than the current node to branch without a cue."""
THETA_SHIFT = 0.25
"""Shift probability at or above which the active topic ends (tuned for boundary F1 on TIAGE train)."""

THETA_UNRELATED = 0.1
"""Active-tree score below which a query leaves the topic whatever the shift model says, unless
it is a follow-up (MT-Bench+ dev: an instruction such as "Write a function ..." after a maths
question can read as a continuation to a model fitted on chit-chat)."""

SHIFT_FEATURES: tuple[str, ...] = (
    "centroid",
    "recent",
    "best",
    "window",
    "log_nodes",
    "other",
    "question",
    "log_words",
    "after_question",
)
"""Inputs of the topic-shift model, in order (see :meth:`EmbeddedDecider.shift_features`)."""

SHIFT_MODEL: dict[str, Any] = {
    "mean": [0.3421, 0.3128, 0.368, 0.3391, 1.3221, 0.1927, 0.2886, 2.5555, 0.312],
    "scale": [0.1483, 0.1732, 0.1594, 0.1529, 0.5224, 0.1772, 0.4531, 0.3014, 0.4633],
    "weights": [0.05, -0.484, -0.253, -0.259, 0.064, 0.099, 0.717, 0.174, -0.346],
    "bias": -1.745,
}
"""Logistic model of "this query starts a new topic" over standardised :data:`SHIFT_FEATURES`.

Fitted on TIAGE train (300 PersonaChat dialogues; the 4,224 utterances after the first that are
neither follow-ups nor new-topic cues) with the gold segments as the forest and the bundled MiniLM:
``python benchmarks/discourse_tree.py --fit`` prints it."""

SHORT_QUERY_WORDS = 4
"""Queries this short (in words) that name no other topic continue the current one ("Why?")."""

RETURN_CUES: tuple[str, ...] = (
    "back to",
    "go back",
    "going back",
    "as i said",
    "as i mentioned",
    "like i said",
    "you said",
    "you mentioned",
    "we discussed",
    "we talked about",
    "earlier",
    "previously",
    "before that",
    "return to",
    "returning to",
    "again about",
)
"""Phrases that announce a return to something said before (switch topic or branch)."""
ALTERNATIVE_CUES: tuple[str, ...] = (
    "instead",
    "alternatively",
    "rather than",
    "what if",
    "other option",
    "another option",
    "different approach",
    "on second thought",
    "scratch that",
)
"""Phrases that open an alternative to an earlier point (create a branch at the fork)."""
NEW_TOPIC_CUES: tuple[str, ...] = (
    "new topic",
    "change the subject",
    "changing the subject",
    "different topic",
    "unrelated",
    "something else",
    "by the way",
    "on another note",
    "switching gears",
    "different question",
)
"""Phrases that announce a new topic."""
FOLLOW_UP_CUES: tuple[str, ...] = (
    "and ",
    "also",
    "why",
    "how so",
    "what about",
    "how about",
    "can you elaborate",
    "tell me more",
    "more detail",
    "continue",
    "go on",
    "it ",
    "that ",
    "this ",
    "they ",
    "those ",
    "these ",
    "then ",
    "so ",
    "ok",
    "thanks",
    "thank you",
    "yes",
    "no",
)
"""Openings of a follow-up to the current turn (only trusted for short queries)."""
ANAPHORA_CUES: tuple[str, ...] = (
    "your previous",
    "your last",
    "your answer",
    "your response",
    "your reply",
    "previous response",
    "previous answer",
    "the above",
    "you just said",
    "you just wrote",
)
"""Phrases that point at the latest answer: the query continues the current topic."""
REFERENCE_CUES: tuple[str, ...] = (
    "your previous",
    "your earlier",
    "your last",
    "your own",
    "your answer",
    "your answers",
    "your response",
    "your reply",
    "your solution",
    "your example",
    "your examples",
    "your explanation",
    "your suggestion",
    "your suggestions",
    "your proposal",
    "your design",
    "your code",
    "your function",
    "your email",
    "your story",
    "your thought process",
    "again",
    "the same",
    "above",
    "rewrite",
    "rephrase",
    "reformulate",
    "i asked",
    "did i ask",
)
"""Phrases that work on something already said ("your solution", "do the same task again",
"what did I ask"): a query of at most :data:`REFERENCE_QUERY_WORDS` words holding one, or an
ordinal reference to an item of a list (:data:`ORDINAL_REFERENCE`: "the 2nd film"), is a
follow-up. "your" alone is no cue: in chit-chat it asks about the other person ("your
favorite movie"; TIAGE train), while an assistant's output is named ("your previous answer")."""
ORDINAL_REFERENCE = re.compile(
    r"\b\d+(?:st|nd|rd|th)\b|\bthe (?:first|second|third|fourth|fifth|last) (?!time\b)[a-z]+"
)
"""An ordinal pointing at an item of an earlier list ("the 2nd film", "the first example",
"1st function"; not "the first time"): rare in TIAGE chit-chat (17 of 11,000 utterances)."""
REFERENCE_QUERY_WORDS = 25
"""Longest query (in words) that a reference cue makes a follow-up (MT-Bench+ dev: follow-ups
such as "What are the key disadvantages of your solution?" are short; new tasks are long)."""


def has_cue(text: str, cues: Sequence[str]) -> str | None:
    """The first cue phrase found in ``text`` (case-insensitive, on word boundaries), or None."""
    lowered = " " + re.sub(r"\s+", " ", text.lower()) + " "
    for cue in cues:
        if re.search(r"(?<![a-z])" + re.escape(cue.strip()) + r"(?![a-z])", lowered):
            return cue.strip()
    return None


def _opens_with(text: str, cues: Sequence[str]) -> str | None:
    """The cue ``text`` opens with, as whole words ("no" opens "No, ..." but not "Now ...")."""
    lowered = re.sub(r"\s+", " ", text.lower()).strip() + " "
    for cue in cues:
        if re.match(re.escape(cue.strip()) + r"(?![a-z])", lowered):
            return cue.strip()
    return None


def _check_shift_model(model: Mapping[str, Any]) -> dict[str, Any]:
    n = len(SHIFT_FEATURES)
    try:
        out: dict[str, Any] = {key: [float(v) for v in model[key]] for key in ("mean", "scale", "weights")}
        out["bias"] = float(model["bias"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"shift_model needs mean, scale, weights and bias: {exc}") from exc
    if any(len(out[key]) != n for key in ("mean", "scale", "weights")):
        raise ConfigurationError(f"shift_model mean, scale and weights need {n} values each")
    values = [*out["mean"], *out["scale"], *out["weights"], out["bias"]]
    if not all(math.isfinite(v) for v in values) or min(out["scale"]) <= 0:
        raise ConfigurationError("shift_model values must be finite and every scale > 0")
    return out


def _check_number(label: str, value: Any, low: float = -1.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"{label} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ConfigurationError(f"{label} must be in [{low}, {high}], got {value!r}")
    return float(value)


class EmbeddedDecider:
    """Offline decider: thresholds on embedding similarity plus cue phrases (zero LLM calls).

    Topic decision (the score of a tree is the highest of its centroid, current-node and
    best-node cosine with the query):

    1. no tree yet: create;
    2. a new-topic cue ("by the way", "new topic", ...) and no other tree >= ``theta_switch``:
       create;
    3. a return cue ("back to", "as I said", ...) and another tree >= ``theta_topic`` that
       beats the active one: switch to the best such tree;
    4. another tree >= ``theta_switch`` beating the active tree by ``switch_margin``: switch;
    5. a follow-up (a pointer at the latest answer such as "your previous response"; a
       short query: at most 4 words, or up to 8 opening with "and", "it", "what about", ...;
       or up to 25 words working on something said, "your", "again", "rewrite", ...) and no
       new-topic cue: continue;
    6. the shift model's probability that the query starts a new topic is below
       ``theta_shift`` and the active tree scores >= ``theta_unrelated``: continue. The model
       (:data:`SHIFT_MODEL`, a logistic regression fitted on TIAGE train) reads the active
       tree's cosines (centroid, current node, best node, last 3 nodes), its size, the best
       other tree, whether the query is a question, its length, and whether the previous
       query was a question. With ``shift_model=None``: continue when the
       active tree scores >= ``theta_topic``;
    7. another tree >= ``theta_switch``: switch; otherwise create.

    Branch decision (asked only when the strategy's filter fires: the fork node is relevant
    and off the current branch or an ancestor of the current node):

    * fork on another branch and (a return cue, or fork similarity >= current node's +
      ``branch_margin``): switch to the fork's branch;
    * fork an ancestor, a return cue, and a side-branch candidate within ``branch_margin`` of
      the fork: switch to that candidate's branch ("back to the hotels" after a detour);
    * fork an ancestor and (an alternative cue such as "instead", or fork similarity >=
      current node's + ``branch_margin``): create a branch at the fork;
    * otherwise continue.

    Args:
        theta_topic: Continue threshold on the active tree's score; 0.3 (tuned on TIAGE
            train with MiniLM; the paper's single theta_sim=0.6 is for Qwen3 embeddings).
        theta_switch: Switch threshold on another tree's score; 0.45 (tuned likewise).
        switch_margin: Lead another tree needs over the active tree to switch; 0.1.
        branch_margin: Lead the fork node needs over the current node to branch without a
            cue; 0.15.
        theta_shift: Shift probability at or above which the active topic ends; 0.25 (tuned
            for boundary F1 on TIAGE train).
        theta_unrelated: Active-tree score below which the shift model is overruled and the
            topic ends (unless the query is a follow-up); 0.1 (TIAGE train F1; MT-Bench+ dev).
        shift_model: ``{"mean", "scale", "weights", "bias"}`` over :data:`SHIFT_FEATURES`;
            default :data:`SHIFT_MODEL`. None uses the ``theta_topic`` rule instead.

    Example:
        >>> d = EmbeddedDecider()
        >>> d.decide_topic("hello", []).action
        'create'
    """

    uses_llm = False

    def __init__(
        self,
        *,
        theta_topic: float = THETA_TOPIC,
        theta_switch: float = THETA_SWITCH,
        switch_margin: float = SWITCH_MARGIN,
        branch_margin: float = BRANCH_MARGIN,
        theta_shift: float = THETA_SHIFT,
        theta_unrelated: float = THETA_UNRELATED,
        shift_model: Mapping[str, Any] | None = SHIFT_MODEL,
    ) -> None:
        self.theta_topic = _check_number("theta_topic", theta_topic)
        self.theta_switch = _check_number("theta_switch", theta_switch)
        self.switch_margin = _check_number("switch_margin", switch_margin, 0.0, 2.0)
        self.branch_margin = _check_number("branch_margin", branch_margin, 0.0, 2.0)
        self.theta_shift = _check_number("theta_shift", theta_shift, 0.0, 1.0)
        self.theta_unrelated = _check_number("theta_unrelated", theta_unrelated)
        self.shift_model = None if shift_model is None else _check_shift_model(shift_model)

    def shift_features(self, query: str, active: TopicView, others: Sequence[TopicView]) -> list[float]:
        """The shift model's inputs (:data:`SHIFT_FEATURES`) for ``query`` against the active tree."""
        words = len(query.split())
        return [
            active.similarity,
            active.recent,
            active.best,
            active.recent if active.window is None else active.window,
            math.log1p(active.nodes),
            max((t.score for t in others), default=0.0),
            float("?" in query),
            math.log1p(words),
            float("?" in active.last_query),
        ]

    def shift_probability(self, query: str, active: TopicView, others: Sequence[TopicView]) -> float:
        """Probability (0-1) that ``query`` leaves the active topic, by the shift model."""
        model = self.shift_model if self.shift_model is not None else SHIFT_MODEL
        x = self.shift_features(query, active, others)
        logit = model["bias"] + sum(
            w * (v - m) / sd
            for v, m, sd, w in zip(x, model["mean"], model["scale"], model["weights"], strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, logit))))

    def is_follow_up(self, query: str) -> str | None:
        """The follow-up cue of a query ("Why?", "and the second one?", "shorten your answer"), or None."""
        words = query.split()
        if not words:
            return "empty query"
        pointer = has_cue(query, ANAPHORA_CUES)
        if pointer:
            return pointer
        cue = _opens_with(query, FOLLOW_UP_CUES)
        if len(words) <= SHORT_QUERY_WORDS:
            return cue or f"short query ({len(words)} words)"
        if cue and len(words) <= 2 * SHORT_QUERY_WORDS:
            return cue
        if len(words) <= REFERENCE_QUERY_WORDS:
            ordinal = ORDINAL_REFERENCE.search(query.lower())
            return has_cue(query, REFERENCE_CUES) or (ordinal.group(0) if ordinal else None)
        return None

    def decide_topic(self, query: str, topics: Sequence[TopicView]) -> TopicDecision:
        """Topic decision by the rules in the class docstring."""
        if not topics:
            return TopicDecision("create", None, "first query: no topic tree yet")
        active = next((t for t in topics if t.active), None)
        others = sorted((t for t in topics if not t.active), key=lambda t: (-t.score, t.id))
        best = others[0] if others else None
        a_score = active.score if active is not None else -1.0
        new_cue = has_cue(query, NEW_TOPIC_CUES)
        if new_cue and (best is None or best.score < self.theta_switch):
            return TopicDecision("create", None, f"new-topic cue {new_cue!r}")
        back = has_cue(query, RETURN_CUES)
        if back and best is not None and best.score >= self.theta_topic and best.score > a_score:
            return TopicDecision(
                "switch", best.id, f"return cue {back!r}; topic {best.id} scores {best.score:.2f}"
            )
        if (
            best is not None
            and best.score >= self.theta_switch
            and best.score >= a_score + self.switch_margin
        ):
            return TopicDecision(
                "switch",
                best.id,
                f"topic {best.id} scores {best.score:.2f} >= {self.theta_switch:g}, "
                f"active {a_score:.2f} + margin {self.switch_margin:g}",
            )
        follow = None if new_cue else self.is_follow_up(query)
        if active is not None and follow:
            return TopicDecision("continue", active.id, f"follow-up ({follow})")
        why = f"no topic scores >= {self.theta_topic:g}"
        if active is not None and self.shift_model is not None and not new_cue:
            p = self.shift_probability(query, active, others)
            why = (
                f"shift probability {p:.2f} >= {self.theta_shift:g}"
                if p >= self.theta_shift
                else f"active topic scores < {self.theta_unrelated:g}"
            )
            if p < self.theta_shift and a_score >= self.theta_unrelated:
                return TopicDecision(
                    "continue",
                    active.id,
                    f"shift probability {p:.2f} < {self.theta_shift:g}, active topic scores {a_score:.2f}",
                )
        elif active is not None and self.shift_model is None:
            if a_score >= self.theta_topic:
                return TopicDecision(
                    "continue", active.id, f"active topic scores {a_score:.2f} >= {self.theta_topic:g}"
                )
        if best is not None and best.score >= self.theta_switch:
            return TopicDecision("switch", best.id, f"topic {best.id} scores {best.score:.2f}")
        return TopicDecision(
            "create",
            None,
            f"{why} (active {a_score:.2f}, best other {best.score if best else float('nan'):.2f})",
        )

    def decide_branch(
        self, query: str, path: Sequence[NodeView], fork: NodeView, candidates: Sequence[NodeView]
    ) -> BranchDecision:
        """Branch decision by the rules in the class docstring."""
        current = path[-1].similarity if path else -1.0
        lead = fork.similarity - current
        if not fork.on_path:
            back = has_cue(query, RETURN_CUES)
            if back or lead >= self.branch_margin:
                why = f"return cue {back!r}" if back else f"fork leads current node by {lead:.2f}"
                return BranchDecision("switch_branch", fork.id, f"{why}; back to branch {fork.branch}")
            return BranchDecision("continue", None, f"fork on branch {fork.branch} leads by only {lead:.2f}")
        back = has_cue(query, RETURN_CUES)
        side = [
            n for n in candidates if not n.on_path and n.similarity >= fork.similarity - self.branch_margin
        ]
        if back and side:
            return BranchDecision(
                "switch_branch", side[0].id, f"return cue {back!r}; side node {side[0].id} close to the fork"
            )
        alternative = has_cue(query, ALTERNATIVE_CUES)
        if alternative or lead >= self.branch_margin:
            why = f"alternative cue {alternative!r}" if alternative else f"fork leads by {lead:.2f}"
            return BranchDecision("create_branch", fork.id, f"{why}; new branch at node {fork.id}")
        return BranchDecision("continue", None, f"ancestor {fork.id} leads by only {lead:.2f}")
