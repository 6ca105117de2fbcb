"""DiscourseTreeMemory: Context-Agent's forest of topic trees as a LlamaIndex chat memory."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from llamaindex_ctxmgmt._base import StrategyMemory


class DiscourseTreeMemory(StrategyMemory, strategy=DiscourseTreeStrategy):
    """Chat memory that sends the current thread verbatim and the rest of the conversation summarised.

    Every completed turn becomes a node of a forest of topic trees (Context-Agent). For the
    query (``input`` if given, else the newest user message) the memory decides whether it
    continues the active topic, returns to an earlier one or starts a new one, and whether it
    branches off an earlier turn or goes back to a side branch. :meth:`get` returns the system
    messages, one framed memory message (user role by default) summarising the other topics
    and side branches, the active
    path (the turns of the current thread) and the turn in progress, within ``token_limit``.
    The chat store keeps every message (:meth:`get_all` is lossless).

    With the default embedded decider there is no LLM call; with ``llm=`` (any LlamaIndex
    ``LLM``) up to two small JSON decisions per new query (an unusable answer falls back to
    the embedded decider). ``from_defaults(llm=...)`` also sizes ``token_limit`` from the
    LLM's context window.

    Example:
        >>> from llama_index.core.chat_engine import SimpleChatEngine
        >>> from llama_index.core.llms import MockLLM
        >>> from llamaindex_ctxmgmt import DiscourseTreeMemory
        >>> memory = DiscourseTreeMemory.from_defaults(token_limit=2000)
        >>> engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
        >>> engine.chat("Plan a trip to Rome.")  # doctest: +SKIP
        >>> memory.strategy.render_html("forest.html")  # doctest: +SKIP
    """
