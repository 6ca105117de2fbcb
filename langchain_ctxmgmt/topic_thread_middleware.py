"""``TopicThreadMiddleware``: agent middleware that sends retrieved topic threads (C-DIC)."""

from __future__ import annotations

from ctxmgmt import TopicThreadStrategy
from langchain_ctxmgmt._middleware import StrategyMiddleware


class TopicThreadMiddleware(StrategyMiddleware, strategy=TopicThreadStrategy):
    """C-DIC topic-thread memory as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are written back into the
    thread memory (insert a thread on a topic shift, else revise the best one) and the model
    receives the system prompt, the compressed states of the threads retrieved for the last
    human message (one framed memory message each, a
    ``HumanMessage`` by default), their most relevant turns verbatim, the
    newest turn and the turn in progress (with its tool calls and results). The selection
    replaces ``request.messages`` for that call only: the agent state keeps the full history.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import TopicThreadMiddleware
        >>> middleware = TopicThreadMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """
