"""``ACMTieredMiddleware``: agent middleware that sends ACM's verbatim / summary / entity tiers."""

from __future__ import annotations

from ctxmgmt import ACMStrategy
from langchain_ctxmgmt._middleware import StrategyMiddleware


class ACMTieredMiddleware(StrategyMiddleware, strategy=ACMStrategy):
    """ACM adaptive context management as an ``AgentMiddleware`` for ``create_agent``.

    Before every model call the completed turns of the agent state go through ACM's cascade
    (each turn is summarised at most once and reduced to entities at most once) and the model
    receives the system prompt, the entity tier and the summarised tier as framed memory
    messages (``HumanMessage`` s by default, ``memory_role``),
    any turns recalled because the last human message mentions their entities, the newest
    turns verbatim and the turn in progress (with its tool calls and results), never more
    than ``max_tokens``. The selection replaces ``request.messages`` for that call only: the
    agent state keeps the full history.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import ACMTieredMiddleware
        >>> middleware = ACMTieredMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """
