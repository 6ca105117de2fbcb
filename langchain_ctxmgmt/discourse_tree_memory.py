"""``DiscourseTreeMemory``: classic LangChain memory over a forest of topic trees (Context-Agent)."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.components.decider import THETA_FORK
from ctxmgmt.components.summarizer import as_summarizer
from ctxmgmt.strategies.discourse_tree import (
    CANDIDATES,
    RECENT_TURNS,
    SUMMARY_ITEMS,
    SUMMARY_WORDS,
    DiscourseTreeStrategy,
)
from langchain_ctxmgmt._base import CtxMgmtMemory
from langchain_ctxmgmt._llm import resolve_decider


class DiscourseTreeMemory(CtxMgmtMemory):
    r"""Context-Agent's discourse trees as a classic ``BaseMemory`` (``langchain_classic``).

    Each saved turn becomes a node of a topic tree. For each query the memory decides whether
    it continues the active topic, returns to an earlier one or starts a new one, and whether
    it branches off an earlier turn or goes back to a side branch; ``load_memory_variables``
    then returns one ``SystemMessage`` summarising the other topics and side branches (string
    form: a ``System:`` line) followed by the active path (the turns of the current thread)
    verbatim, within ``max_token_limit``. The full history stays in ``chat_memory`` /
    :attr:`messages`.

    With the default embedded decider there is no LLM call; with ``llm=`` (any LangChain
    ``BaseChatModel``) up to two small JSON decisions per query (an unusable answer falls
    back to the embedded decider).

    Attributes:
        theta_fork: Cosine a fork node needs before a branch decision is asked; 0.35.
        candidates: Nodes shown to the branch decider; default 3.
        summary_items: Most node summaries per topic or branch summary; default 8.
        summary_words: Longest node summary of the default summariser, in words; default 8.
        recent_turns: Newest turns always returned verbatim even off the active path; 0.
        llm: A LangChain chat model that makes the topic and branch decisions; None = the
            embedded decider.
        decider: Any ctxmgmt Decider or ``prompt -> text`` callable (instead of ``llm``).
        summarizer: Any ctxmgmt Summarizer or ``prompt -> text`` callable for node summaries;
            None = the offline ``BriefSummarizer``.

    The shared fields (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
    ``human_prefix``, ``ai_prefix``, ``max_token_limit``, ``embedder``, ``token_counter``,
    ``chat_memory``) are described on :class:`~langchain_ctxmgmt._base.CtxMgmtMemory`.

    Example:
        >>> from langchain_ctxmgmt import DiscourseTreeMemory
        >>> memory = DiscourseTreeMemory(max_token_limit=2000)  # doctest: +SKIP
        >>> memory.save_context({"input": "Plan a trip to Rome."}, {"output": "Sure!"})  # doctest: +SKIP
        >>> print(memory.tree.explain())  # doctest: +SKIP
    """

    theta_fork: float = THETA_FORK
    candidates: int = CANDIDATES
    summary_items: int = SUMMARY_ITEMS
    summary_words: int = SUMMARY_WORDS
    recent_turns: int = RECENT_TURNS
    llm: Any = None
    decider: Any = None
    summarizer: Any = None

    def _make_strategy(self) -> Strategy:
        return DiscourseTreeStrategy(
            embedder=self.embedder,
            token_counter=self.token_counter,
            decider=resolve_decider(self.llm, self.decider),
            summarizer=None if self.summarizer is None else as_summarizer(self.summarizer),
            theta_fork=self.theta_fork,
            candidates=self.candidates,
            summary_items=self.summary_items,
            summary_words=self.summary_words,
            recent_turns=self.recent_turns,
        )

    @property
    def tree(self) -> DiscourseTreeStrategy:
        """The DiscourseTreeStrategy (forest, decisions, ``explain()`` text tree)."""
        strategy = self.strategy
        assert isinstance(strategy, DiscourseTreeStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the decider and the summariser so far."""
        return self.tree.llm_calls
