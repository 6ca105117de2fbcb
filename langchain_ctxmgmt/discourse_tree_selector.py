"""``DiscourseTreeSelector``: a ``Runnable`` for LCEL chains, ``pre_model_hook`` and ``StateGraph`` nodes."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from langchain_ctxmgmt._selector import StrategySelector


class DiscourseTreeSelector(StrategySelector, strategy=DiscourseTreeStrategy):
    """Context-Agent discourse trees as a ``Runnable``: the active thread verbatim, the rest summarised.

    Each turn is placed in a forest of topic trees; the active path comes back verbatim and the
    other topics and branches as one framed summary.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ctxmgmt import DiscourseTreeSelector
        >>> selector = DiscourseTreeSelector(max_tokens=4000)
        >>> chain = selector | model  # doctest: +SKIP
        >>> create_react_agent(model, tools, pre_model_hook=selector)  # doctest: +SKIP
    """
