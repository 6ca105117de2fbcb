"""Token accounting of messages and turns, and budget checks (``ctxmgmt.components.budget``)."""

from __future__ import annotations

import pytest

from ctxmgmt.components.budget import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    IMAGE_TOKENS,
    MEDIA_TOKENS,
    VIDEO_TOKENS,
    check_budget,
    media_block_tokens,
    message_tokens,
    messages_tokens,
    turn_tokens,
)
from ctxmgmt.components.tokens import (
    MESSAGE_OVERHEAD,
    CachedTokenCounter,
    CallableTokenCounter,
    TiktokenCounter,
)
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.tool_args import bound_call
from ctxmgmt.messages.types import Message, Turn

WORDS = CallableTokenCounter(lambda text: len(text.split()))
"""One token per whitespace-separated word."""


def test_media_tokens_are_estimated_per_block_and_configurable() -> None:
    assert MEDIA_TOKENS == {
        "image": IMAGE_TOKENS,
        "audio": AUDIO_TOKENS,
        "video": VIDEO_TOKENS,
        "file": FILE_TOKENS,
    }
    words = CallableTokenCounter(lambda text: len(text.split()))
    base = message_tokens(words, Message("user", "look"))
    every = Message("user", "look", media=("image", "audio", "video", "file"))
    assert message_tokens(words, every) == base + sum(MEDIA_TOKENS.values())
    custom = CachedTokenCounter(
        CallableTokenCounter(lambda text: len(text.split()), media_tokens={"image": 10})
    )
    assert message_tokens(custom, every) == base + 10 + AUDIO_TOKENS + VIDEO_TOKENS + FILE_TOKENS
    assert TiktokenCounter(media_tokens={"video": 0}).media_tokens == {"video": 0}
    for bad in ({"hologram": 1}, {"image": -1}, {"image": 1.5}, [("image", 1)]):
        with pytest.raises(ConfigurationError):
            TiktokenCounter(media_tokens=bad)


def test_a_message_is_its_text_plus_the_overhead() -> None:
    assert message_tokens(WORDS, Message("user", "three little words")) == 3 + MESSAGE_OVERHEAD


def test_an_unknown_media_kind_counts_as_a_file() -> None:
    assert media_block_tokens(WORDS, "hologram") == FILE_TOKENS
    assert media_block_tokens(WORDS, "image") == IMAGE_TOKENS


def test_tool_calls_count_as_their_json() -> None:
    call = {"id": "c1", "name": "search", "args": {"q": "cheap flights to Lisbon"}}
    with_call = Message("assistant", "", tool_calls=(call,))
    assert message_tokens(WORDS, with_call) > message_tokens(WORDS, Message("assistant", "x"))


def test_a_cut_tool_call_still_weighs_its_whole_arguments() -> None:
    chars = CallableTokenCounter(len)
    call = {"id": "c1", "name": "upload", "args": {"data": "y" * 200_000}}
    cut = bound_call(call)
    assert cut is not call  # the arguments were cut
    whole = message_tokens(chars, Message("assistant", "", tool_calls=(call,)))
    estimated = message_tokens(chars, Message("assistant", "", tool_calls=(cut,)))
    assert estimated == pytest.approx(whole, rel=0.01)


def test_messages_and_turns_sum_their_messages() -> None:
    messages = (Message("user", "a b"), Message("assistant", "c d e"))
    assert messages_tokens(WORDS, messages) == 5 + 2 * MESSAGE_OVERHEAD
    assert turn_tokens(WORDS, Turn(0, messages)) == messages_tokens(WORDS, messages)
    assert messages_tokens(WORDS, []) == 0


def test_check_budget() -> None:
    assert check_budget(None) is None
    assert check_budget(1) == 1
    with pytest.raises(ConfigurationError, match="max_tokens"):
        check_budget(0, name="max_tokens")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, False, "100", 10.0])
def test_a_budget_must_be_a_positive_whole_number(bad) -> None:
    with pytest.raises(ConfigurationError, match="positive number of tokens"):
        check_budget(bad)
