"""``KadaneDialMiddleware``: agent middleware that sends the model only the relevant spans."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy
from langchain_ctxmgmt._middleware import StrategyMiddleware


class KadaneDialMiddleware(StrategyMiddleware, strategy=KadaneDialStrategy):
    """DYCP KadaneDial selection as an ``AgentMiddleware`` for ``langchain.agents.create_agent``.

    Before every model call the completed turns of the agent state are scored against the
    last human message and KadaneDial keeps the contiguous relevant spans, chronologically;
    the turn in progress (with its tool calls and results) is always sent. The selection
    replaces ``request.messages`` for that call only: the agent state, and a checkpointer,
    keep the full history. Turns are embedded once (content-keyed cache), so repeated calls
    only embed the new turns and the query. No extra LLM call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_ctxmgmt import KadaneDialMiddleware
        >>> middleware = KadaneDialMiddleware(max_tokens=4000)
        >>> agent = create_agent("openai:gpt-4o-mini", tools=[], middleware=[middleware])  # doctest: +SKIP
    """
