"""Store keys: composing a session's identity and bounding what a backend files (``ctxmgmt.store.keys``)."""

from __future__ import annotations

import pytest

from ctxmgmt.store.keys import HASHED, MAX_KEY_BYTES, bounded_key, compose_key, key_part, shown_key


def test_key_parts_escape_only_percent_and_colon() -> None:
    assert key_part("v2:alice%") == "v2%3Aalice%25"
    assert key_part("plain-id_1 é") == "plain-id_1 é"


def test_composed_keys_are_one_to_one_on_tuples_of_parts() -> None:
    assert compose_key("kadanedial", "block", "facts", "v2:alice") != compose_key(
        "kadanedial", "block", "facts:v2", "alice"
    )
    assert compose_key("a%3A", "b") != compose_key("a:", "b")


def test_plain_parts_give_the_plain_join_earlier_versions_stored() -> None:
    assert compose_key("kadanedial", "classic", "u1") == "kadanedial:classic:u1"


def test_a_short_text_key_is_filed_as_it_is() -> None:
    key = "k" * MAX_KEY_BYTES
    assert bounded_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "k" * (MAX_KEY_BYTES + 1),
        "é" * (MAX_KEY_BYTES // 2 + 1),
        "nul\x00inside",
        "lone \udc80",
        HASHED + "abc",
    ],
)
def test_long_unstorable_or_marker_keys_are_filed_as_a_digest(key) -> None:
    filed = bounded_key(key)
    assert filed.startswith(HASHED) and len(filed) == len(HASHED) + 64
    assert bounded_key(key) == filed  # the same key always files under the same digest


def test_distinct_long_keys_get_distinct_digests() -> None:
    assert bounded_key("a" * 2_000) != bounded_key("a" * 2_001)


def test_shown_keys_are_cut_for_logs() -> None:
    assert shown_key("short") == "short"
    assert shown_key("x" * 500, limit=10) == "x" * 10 + "...(500 chars)"
