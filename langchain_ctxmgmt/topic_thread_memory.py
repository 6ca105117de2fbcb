"""``TopicThreadMemory``: classic LangChain memory over C-DIC's revisable per-thread memory."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.strategies.topic_thread import (
    ALPHA,
    KEEP_LAST,
    MAX_SLOT_TURNS,
    MAX_SLOTS,
    STATE_ITEMS,
    TAU,
    TOP_K,
    VERBATIM_TURNS,
    TopicThreadStrategy,
)
from langchain_ctxmgmt._base import CtxMgmtMemory
from langchain_ctxmgmt._llm import resolve_summarizer


def build_topic_thread(params: Any, summarizer: Any) -> TopicThreadStrategy:
    """A TopicThreadStrategy from a memory's or a middleware's attributes."""
    return TopicThreadStrategy(
        embedder=params.embedder,
        summarizer=summarizer,
        token_counter=params.token_counter,
        tau=params.tau,
        alpha=params.alpha,
        max_slot_turns=params.max_slot_turns,
        max_slots=params.max_slots,
        state_items=params.state_items,
        top_k=params.top_k,
        verbatim_turns=params.verbatim_turns,
        keep_last=params.keep_last,
    )


class TopicThreadMemory(CtxMgmtMemory):
    r"""C-DIC topic-thread memory as a classic ``BaseMemory`` (``langchain_classic``).

    Each saved turn is written back into a memory of topic threads: if no thread scores at
    least ``tau`` (``cos(turn, thread) * exp(-alpha * turns since the thread was last
    retrieved)``) a new thread is opened, otherwise the best thread is revised (its compressed
    state is updated with the turn by the summariser). ``load_memory_variables`` retrieves
    the threads scoring above ``tau`` for the input (else the best one) and returns their
    compressed states (one ``SystemMessage`` each; string form: ``System:`` lines), their
    most relevant turns verbatim and the newest turn, within ``max_token_limit``. The full
    history stays in ``chat_memory`` / :attr:`messages`.

    No LLM call with the default extractive compressor; with ``llm=`` (any LangChain
    ``BaseChatModel``) one call per saved turn (plus re-compressions).

    Attributes:
        tau: Score threshold for retrieval and insert-vs-revise (mean-centred cosine); 0.25.
        alpha: Recency decay per turn since a thread was last retrieved; 0.002.
        max_slot_turns: Turns a thread may cover before it is split; 40.
        max_slots: Most threads (the two most similar merge above it); 64.
        state_items: Items of a thread's compressed state before re-compression; 8.
        top_k: Most threads retrieved per input; 6.
        verbatim_turns: Most verbatim turns returned per thread; 8.
        keep_last: Newest turns always returned verbatim; 1.
        llm: A LangChain chat model to compress with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).

    The shared fields (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
    ``human_prefix``, ``ai_prefix``, ``max_token_limit``, ``embedder``, ``token_counter``,
    ``chat_memory``) are described on :class:`~langchain_ctxmgmt._base.CtxMgmtMemory`.

    Example:
        >>> from langchain_ctxmgmt import TopicThreadMemory
        >>> memory = TopicThreadMemory(max_token_limit=1000)  # bundled embedder, loaded on first use
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})  # doctest: +SKIP
        >>> print(memory.explain())  # doctest: +SKIP
    """

    tau: float = TAU
    alpha: float = ALPHA
    max_slot_turns: int = MAX_SLOT_TURNS
    max_slots: int = MAX_SLOTS
    state_items: int = STATE_ITEMS
    top_k: int = TOP_K
    verbatim_turns: int = VERBATIM_TURNS
    keep_last: int = KEEP_LAST
    llm: Any = None
    summarizer: Any = None

    def _make_strategy(self) -> Strategy:
        return build_topic_thread(self, resolve_summarizer(self.llm, self.summarizer))

    @property
    def threads(self) -> TopicThreadStrategy:
        """The TopicThreadStrategy (slots, write-back log, slot growth)."""
        strategy = self.strategy
        assert isinstance(strategy, TopicThreadStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the compressor so far."""
        return self.threads.llm_calls
