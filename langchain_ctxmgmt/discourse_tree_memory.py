"""``DiscourseTreeMemory``: classic LangChain memory over a forest of topic trees (Context-Agent)."""

from __future__ import annotations

from ctxmgmt import DiscourseTreeStrategy
from langchain_ctxmgmt._base import StrategyMemory


class DiscourseTreeMemory(StrategyMemory, strategy=DiscourseTreeStrategy):
    """Context-Agent's discourse trees as a classic ``BaseMemory`` (``langchain_classic``).

    Each saved turn becomes a node of a topic tree. For each query the memory decides whether
    it continues the active topic, returns to an earlier one or starts a new one, and whether
    it branches off an earlier turn or goes back to a side branch; ``load_memory_variables``
    then returns one framed memory message (a ``HumanMessage`` by default) summarising the
    other topics and side branches, followed by the active path (the turns of the current
    thread) verbatim, within ``max_token_limit``. The full history stays in ``chat_memory`` /
    :attr:`messages`.

    With the default embedded decider there is no LLM call; with ``llm=`` (any LangChain
    ``BaseChatModel``) up to two small JSON decisions per query (an unusable answer falls
    back to the embedded decider).

    Example:
        >>> from langchain_ctxmgmt import DiscourseTreeMemory
        >>> memory = DiscourseTreeMemory(max_token_limit=2000)  # doctest: +SKIP
        >>> memory.save_context({"input": "Plan a trip to Rome."}, {"output": "Sure!"})  # doctest: +SKIP
        >>> print(memory.tree.explain())  # doctest: +SKIP
    """
