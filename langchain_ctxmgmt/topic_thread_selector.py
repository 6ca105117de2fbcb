"""``TopicThreadSelector``: a ``Runnable`` for LCEL chains, ``pre_model_hook`` and ``StateGraph`` nodes."""

from __future__ import annotations

from ctxmgmt import TopicThreadStrategy
from langchain_ctxmgmt._selector import StrategySelector


class TopicThreadSelector(StrategySelector, strategy=TopicThreadStrategy):
    """C-DIC topic threads as a ``Runnable``: the threads relevant to the last message.

    Turns are written into topic-thread slots; the slots relevant to the last human message come
    back as compressed states with their most relevant turns.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ctxmgmt import TopicThreadSelector
        >>> selector = TopicThreadSelector(max_tokens=4000)
        >>> chain = selector | model  # doctest: +SKIP
        >>> create_react_agent(model, tools, pre_model_hook=selector)  # doctest: +SKIP
    """
