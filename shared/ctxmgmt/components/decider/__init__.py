"""Deciders of the discourse tree: where a new query goes in the forest of topic trees.

- :mod:`~ctxmgmt.components.decider.decisions`: what a decider sees (:class:`TopicView`,
  :class:`NodeView`) and decides (:class:`TopicDecision`, :class:`BranchDecision`), and the
  :class:`Decider` protocol.
- :mod:`~ctxmgmt.components.decider.embedded`: :class:`EmbeddedDecider`, the offline default
  (similarity thresholds, cue phrases, the fitted topic-shift model :data:`SHIFT_MODEL`).
- :mod:`~ctxmgmt.components.decider.llm`: :class:`LLMDecider` (any ``prompt -> text``
  callable, with its prompts :data:`TOPIC_PROMPT` and :data:`BRANCH_PROMPT`) and
  :func:`as_decider`.

Every public name of the three modules is importable from here.
"""

from ctxmgmt.components.decider.decisions import (
    BranchAction,
    BranchDecision,
    Decider,
    NodeView,
    TopicAction,
    TopicDecision,
    TopicView,
)
from ctxmgmt.components.decider.embedded import (
    ALTERNATIVE_CUES,
    ANAPHORA_CUES,
    BRANCH_MARGIN,
    FOLLOW_UP_CUES,
    NEW_TOPIC_CUES,
    REFERENCE_CUES,
    REFERENCE_QUERY_WORDS,
    RETURN_CUES,
    SHIFT_FEATURES,
    SHIFT_MODEL,
    SHORT_QUERY_WORDS,
    SWITCH_MARGIN,
    THETA_FORK,
    THETA_SHIFT,
    THETA_SIM,
    THETA_SWITCH,
    THETA_TOPIC,
    THETA_UNRELATED,
    EmbeddedDecider,
    has_cue,
)
from ctxmgmt.components.decider.llm import (
    BRANCH_FIELDS,
    BRANCH_PROMPT,
    TOPIC_FIELDS,
    TOPIC_PROMPT,
    LLMDecider,
    as_decider,
    check_decision_prompt,
    parse_decision,
)

__all__ = [
    "ALTERNATIVE_CUES",
    "ANAPHORA_CUES",
    "BRANCH_FIELDS",
    "BRANCH_MARGIN",
    "BRANCH_PROMPT",
    "FOLLOW_UP_CUES",
    "NEW_TOPIC_CUES",
    "REFERENCE_CUES",
    "REFERENCE_QUERY_WORDS",
    "RETURN_CUES",
    "SHIFT_FEATURES",
    "SHIFT_MODEL",
    "SHORT_QUERY_WORDS",
    "SWITCH_MARGIN",
    "THETA_FORK",
    "THETA_SHIFT",
    "THETA_SIM",
    "THETA_SWITCH",
    "THETA_TOPIC",
    "THETA_UNRELATED",
    "TOPIC_FIELDS",
    "TOPIC_PROMPT",
    "BranchAction",
    "BranchDecision",
    "Decider",
    "EmbeddedDecider",
    "LLMDecider",
    "NodeView",
    "TopicAction",
    "TopicDecision",
    "TopicView",
    "as_decider",
    "check_decision_prompt",
    "has_cue",
    "parse_decision",
]
