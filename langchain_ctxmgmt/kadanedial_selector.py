"""``KadaneDialSelector``: a ``Runnable`` for LCEL chains, ``pre_model_hook`` and ``StateGraph`` nodes."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy
from langchain_ctxmgmt._selector import StrategySelector


class KadaneDialSelector(StrategySelector, strategy=KadaneDialStrategy):
    """DYCP KadaneDial selection as a ``Runnable``: the relevant spans of the history, chronologically.

    The completed turns are scored against the last human message and KadaneDial keeps the
    contiguous relevant spans; no extra LLM call.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ctxmgmt import KadaneDialSelector
        >>> selector = KadaneDialSelector(max_tokens=4000)
        >>> chain = selector | model  # doctest: +SKIP
        >>> create_react_agent(model, tools, pre_model_hook=selector)  # doctest: +SKIP
    """
