"""The ``create_agent`` middleware base: an ``AgentMiddleware`` over any ctxmgmt Strategy.

Each middleware is a declaration, ``class X(StrategyMiddleware, strategy=S)``: its keyword
arguments come from the strategy's config (:mod:`ctxmgmt.adapter.kit`) and
:class:`~langchain_ctxmgmt._configured.ThreadSelection`. Each model call makes one
call into the thread's :class:`ctxmgmt.session.conversation.Conversation`; messages cross with the
LangChain codec (:data:`langchain_ctxmgmt._convert.CODEC`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage

from ctxmgmt.adapter.offload import run_blocking_for
from ctxmgmt.messages.context import Context
from ctxmgmt.session.codec import Selection
from langchain_ctxmgmt._configured import ThreadSelection, thread_id_of


class StrategyMiddleware(ThreadSelection, AgentMiddleware):
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

    Keyword arguments: ``max_tokens``, ``token_counter``, ``store``, ``max_sessions``,
    ``progress``, ``name`` (see :class:`langchain_ctxmgmt._configured.ThreadSelection`) and the
    strategy's parameters and components (listed below).

    Conversations: each LangGraph thread (the run's ``thread_id``) has its own
    :class:`ctxmgmt.session.conversation.Conversation` (strategy, converted history, lock); a run
    without a ``thread_id`` (no checkpointer) uses the conversation ``"default"``. The
    middleware itself holds configuration only, so one instance serves many threads at once.

    Attributes:
        last_context: The :class:`ctxmgmt.Context` of the most recent model call (of the thread
            used last); ``conversation(thread_id).last_context`` is that of one thread.
    """

    surface = "middleware"

    def select_messages(self, request: ModelRequest) -> list[BaseMessage]:
        """The messages to send for ``request`` (original objects, chronological).

        Raises:
            BudgetExceededError: The system message and the turn in progress alone exceed
                ``max_tokens``.
            InvalidMessageError: A message has no text content or is of an unknown type.
        """
        return self._select(request).messages

    def _select(self, request: ModelRequest) -> Selection[BaseMessage]:
        system = request.system_message
        originals: list[BaseMessage] = [system] if system is not None else []
        originals.extend(request.messages)
        runtime = request.runtime
        thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
        selection = self._select_in_thread(
            originals,
            thread_id_of(None) if thread is None else str(thread),
            getattr(runtime, "store", None),
        )
        return Selection([m for m in selection.messages if m is not system], selection.context)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        """Call the model with the selected messages (this call only); the reply carries the receipt."""
        selection = self._select(request)
        return _with_receipt(handler(request.override(messages=selection.messages)), selection.context)  # type: ignore[arg-type]

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`: selects on a pooled thread (:mod:`ctxmgmt.adapter.offload`)."""
        stored = self.store is not None or getattr(request.runtime, "store", None) is not None
        selection = await run_blocking_for(stored)(self._select, request)
        return _with_receipt(await handler(request.override(messages=selection.messages)), selection.context)  # type: ignore[arg-type]


def _with_receipt(response: ModelResponse | AIMessage, context: Context) -> ModelResponse | AIMessage:
    """``response`` with the context's receipt in its AI messages' ``response_metadata["ctxmgmt"]``.

    The receipt (:meth:`ctxmgmt.Context.receipt`) is what a caller or a trace sees of the
    selection, e.g. that it was partial while a long history was still being derived.
    """
    messages = [response] if isinstance(response, AIMessage) else getattr(response, "result", [])
    for message in messages:
        if isinstance(message, AIMessage):
            message.response_metadata["ctxmgmt"] = context.receipt()
    return response
