"""``SWinSummaryMiddleware``: agent middleware that sends a running summary plus the recent turns."""

from __future__ import annotations

from ctxmgmt.strategies.swin import SWinStrategy
from langchain_ctxmgmt._middleware import StrategyMiddleware


class SWinSummaryMiddleware(StrategyMiddleware, strategy=SWinStrategy):
    """SWin sliding-window summarisation as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are brought into the
    SWin memory (each window of ``window`` turns, overlapping by ``overlap``, is summarised
    once) and the model receives the system prompt, the memory as one framed memory
    message (a ``HumanMessage`` by default, ``memory_role``),
    the recent turns verbatim and the turn in progress (with its tool calls and results).
    The selection replaces ``request.messages`` for that call only: the agent state keeps
    the full history (unlike ``SummarizationMiddleware``, which deletes it).

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import SWinSummaryMiddleware
        >>> middleware = SWinSummaryMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        self.strategy.flush()
