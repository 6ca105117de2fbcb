"""``DiscourseTreeMiddleware``: agent middleware that sends the active thread plus topic summaries."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from langchain_ctxmgmt._middleware import StrategyMiddleware


class DiscourseTreeMiddleware(StrategyMiddleware, strategy=DiscourseTreeStrategy):
    """Context-Agent's discourse trees as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state are placed in a forest of
    topic trees, the last human message is placed too (topic decision, fork point, branch
    decision), and the model receives the system prompt, one framed memory message (a
    ``HumanMessage`` by default) summarising
    the other topics and side branches, the active path verbatim and the turn in progress
    (with its tool calls and results). The selection replaces ``request.messages`` for that
    call only: the agent state keeps the full history. Calls of one turn (a tool loop) see
    the same placement: it is made once per query.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import DiscourseTreeMiddleware
        >>> middleware = DiscourseTreeMiddleware(max_tokens=4000)  # doctest: +SKIP
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """
