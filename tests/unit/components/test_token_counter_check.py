"""Configured token counters are checked; unusable figures are refused with the reason."""

from __future__ import annotations

import functools

import pytest

from ctxmgmt.components.tokens import (
    PROBE_TEXT,
    CallableTokenCounter,
    MessageListCounter,
    TiktokenCounter,
    TokenizerCounter,
    as_token_counter,
    check_token_counter,
    default_token_counter,
)
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.strategies.swin import SWinStrategy


def words(text: str) -> int:
    return len(text.split())


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
