"""Token counting the LlamaIndex way: a ``tokenizer_fn`` (``str -> list``) and a ctxmgmt TokenCounter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxmgmt.components.tokens import TokenCounter, as_token_counter
from ctxmgmt.exceptions import BudgetExceededError, ConfigurationError


class TokenizerCounter:
    """TokenCounter over a LlamaIndex ``tokenizer_fn`` (``str -> list of tokens``)."""

    def __init__(self, fn: Callable[[str], Sequence[Any]]) -> None:
        self.fn = fn

    def count(self, text: str) -> int:
        """Number of tokens ``fn`` returns for ``text``."""
        return len(self.fn(text))


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
    """One source of truth for token counts: (core counter, LlamaIndex tokenizer_fn)."""
    if token_counter is None and tokenizer_fn is not None:
        if not callable(tokenizer_fn):
            raise ConfigurationError(f"tokenizer_fn must be callable, got {tokenizer_fn!r}")
        return TokenizerCounter(tokenizer_fn), tokenizer_fn
    counter = as_token_counter(token_counter)
    return counter, tokenizer_fn if tokenizer_fn is not None else CounterTokenizer(counter)


def room_after(initial_token_count: Any, token_limit: int) -> int:
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
