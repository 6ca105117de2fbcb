"""``ACMTieredSelector``: a ``Runnable`` for LCEL chains, ``pre_model_hook`` and ``StateGraph`` nodes."""

from __future__ import annotations

from ctxmgmt import ACMStrategy
from langchain_ctxmgmt._selector import StrategySelector


class ACMTieredSelector(StrategySelector, strategy=ACMStrategy):
    """ACM tiers as a ``Runnable``: entities, summaries and the newest turns verbatim, within a budget.

    Older turns cascade from verbatim to summaries to named entities when the budget is tight.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ctxmgmt import ACMTieredSelector
        >>> selector = ACMTieredSelector(max_tokens=4000)
        >>> chain = selector | model  # doctest: +SKIP
        >>> create_react_agent(model, tools, pre_model_hook=selector)  # doctest: +SKIP
    """
