"""``SWinSummarySelector``: a ``Runnable`` for LCEL chains, ``pre_model_hook`` and ``StateGraph`` nodes."""

from __future__ import annotations

from ctxmgmt.strategies.swin import SWinStrategy
from langchain_ctxmgmt._selector import StrategySelector


class SWinSummarySelector(StrategySelector, strategy=SWinStrategy):
    """SWin sliding-window summarisation as a ``Runnable``: a running summary plus the recent turns.

    Each window of ``window`` turns (overlapping by ``overlap``) is summarised once into a running
    memory, sent as one framed memory message before the recent turns.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ctxmgmt import SWinSummarySelector
        >>> selector = SWinSummarySelector(max_tokens=4000)
        >>> chain = selector | model  # doctest: +SKIP
        >>> create_react_agent(model, tools, pre_model_hook=selector)  # doctest: +SKIP
    """
