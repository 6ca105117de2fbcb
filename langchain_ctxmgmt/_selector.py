"""The selector base: a ``Runnable`` that selects what the model sees, for LCEL and LangGraph.

``KadaneDialSelector()`` is what ``trim_messages(...)`` is, with a method behind it: put it in
a chain (``selector | model``), give it to ``create_react_agent(pre_model_hook=...)``, or add it
to your own ``StateGraph`` as a node. Each call makes one call into the thread's
:class:`ctxmgmt.session.conversation.Conversation` (the thread is the run's ``thread_id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig

from ctxmgmt import InvalidMessageError
from ctxmgmt.adapter.offload import run_blocking_for
from langchain_ctxmgmt._configured import ThreadSelection, thread_id_of

LLM_INPUT_KEY = "llm_input_messages"
"""Where a graph state's selection goes: the key ``create_react_agent``'s model node reads."""


class StrategySelector(ThreadSelection, Runnable[Any, Any]):  # type: ignore[misc]  # name: a property
    """A ``Runnable`` over a ctxmgmt Strategy: messages in, the selected messages out.

    Input and output:
        - a list of messages (or a prompt value, or message-like tuples and dicts): returns the
          selected messages, so ``prompt | selector | model`` sends the model the selection;
        - a graph state (a mapping or object with ``messages``): returns
          ``{"llm_input_messages": selected}``, which makes the selector a
          ``create_react_agent(pre_model_hook=...)`` as is (the state keeps the whole history)
          and a ``StateGraph`` node whose state has an ``llm_input_messages`` key.

    The query is the last human message; system messages come first and the turn in progress
    (the human message and any tool calls and results after it) is always sent whole, so a
    tool result never loses its call. Media blocks travel with their messages. The selection
    is the caller's own message objects (ids and metadata kept), plus framed memory messages
    for summaries and entity lists.

    Keyword arguments: ``max_tokens``, ``token_counter``, ``store``, ``max_sessions``,
    ``progress``, ``name`` (see :class:`langchain_ctxmgmt._configured.ThreadSelection`) and the
    strategy's parameters and components (listed below). Without ``store=``, a thread's derived
    state goes to the graph's store (``compile(store=...)``, ``create_react_agent(store=...)``)
    when there is one.

    Budget: ``max_tokens`` counts what the selector returns. ``create_react_agent`` adds its
    ``prompt`` after the hook, so leave room for it there (or put the system message in the
    state's messages, where it is counted and always kept first).

    Conversations: each LangGraph thread (``config["configurable"]["thread_id"]``) has its own
    :class:`ctxmgmt.session.conversation.Conversation`; a call without a ``thread_id`` uses
    ``"default"``. ``invoke`` and ``ainvoke`` both work; ``ainvoke`` selects on a pooled thread.
    """

    surface = "selector"

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The selection for ``input``: messages -> messages, a state -> ``{"llm_input_messages": ...}``.

        Raises:
            BudgetExceededError: system messages plus the turn in progress exceed ``max_tokens``.
            InvalidMessageError: the input holds no messages, or a message cannot be used.
        """
        return self._call_with_config(self._select_input, input, config, run_type="prompt")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async :meth:`invoke`: selects on a pooled thread (:mod:`ctxmgmt.adapter.offload`)."""
        return await self._acall_with_config(self._aselect_input, input, config, run_type="prompt")

    async def _aselect_input(self, input: Any, run_manager: Any, config: RunnableConfig) -> Any:
        stored = self.store is not None or _graph_store(config) is not None
        return await run_blocking_for(stored)(self._select_input, input, run_manager, config)

    def _select_input(self, input: Any, run_manager: Any, config: RunnableConfig) -> Any:
        del run_manager  # no callbacks of its own: the selection shows as this run's output
        messages, is_state = _messages_of(input)
        selected = self._select_in_thread(messages, thread_id_of(config), _graph_store(config)).messages
        return {LLM_INPUT_KEY: selected} if is_state else selected


def _messages_of(value: Any) -> tuple[list[BaseMessage], bool]:
    """(the messages of ``value``, whether it is a graph state)."""
    if isinstance(value, PromptValue):
        return value.to_messages(), False
    if isinstance(value, Mapping) or (hasattr(value, "messages") and not isinstance(value, str)):
        messages = value.get("messages") if isinstance(value, Mapping) else value.messages
        if messages is None:
            raise InvalidMessageError("the graph state has no 'messages'")
        return _as_messages(messages), True
    return _as_messages(value), False


def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidMessageError(
            "a selector takes a list of messages or a graph state with 'messages', "
            f"got {type(value).__name__}"
        )
    if all(isinstance(m, BaseMessage) for m in value):
        return list(value)
    try:
        return convert_to_messages(value)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InvalidMessageError(f"cannot read the selector's input as messages: {exc}") from exc


def _graph_store(config: Any) -> Any:
    """The store of the graph running this call (None outside a graph or without one)."""
    del config  # the graph's store is reached through the run's context
    try:
        from langgraph.config import get_store

        return get_store()
    except (RuntimeError, KeyError, ImportError):  # not inside a graph run
        return None
