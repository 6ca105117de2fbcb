"""``TopicThreadMemory``: classic LangChain memory over C-DIC's revisable per-thread memory."""

from __future__ import annotations

from ctxmgmt import TopicThreadStrategy
from langchain_ctxmgmt._base import StrategyMemory


class TopicThreadMemory(StrategyMemory, strategy=TopicThreadStrategy):
    """C-DIC topic-thread memory as a classic ``BaseMemory`` (``langchain_classic``).

    Each saved turn is written back into a memory of topic threads: if no thread scores at
    least ``tau`` (``cos(turn, thread) * exp(-alpha * turns since the thread was last
    retrieved)``) a new thread is opened, otherwise the best thread is revised (its compressed
    state is updated with the turn by the summariser). ``load_memory_variables`` retrieves
    the threads scoring above ``tau`` for the input (else the best one) and returns their
    compressed states (one framed memory message each, a ``HumanMessage`` by default), their
    most relevant turns verbatim and the newest turn, within ``max_token_limit``. The full
    history stays in ``chat_memory`` / :attr:`messages`.

    No LLM call with the default extractive compressor; with ``llm=`` (any LangChain
    ``BaseChatModel``) one call per saved turn (plus re-compressions).

    Example:
        >>> from langchain_ctxmgmt import TopicThreadMemory
        >>> memory = TopicThreadMemory(max_token_limit=1000)  # bundled embedder, loaded on first use
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})  # doctest: +SKIP
        >>> print(memory.explain())  # doctest: +SKIP
    """
