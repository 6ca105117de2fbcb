"""The word measures summaries are scored and deduplicated by."""

from __future__ import annotations

import math

import pytest

from ctxmgmt.components.summary_words import (
    SENTENCE_END,
    content_words,
    jaccard,
    numbers,
    salience,
    specific_terms,
    specifics,
)


def test_specifics_counts_names_numbers_and_dates():
    assert specifics("I met Alice in Paris on 3 May.") == 4
    assert specifics("it was fine and nothing happened") == 0
    assert specifics("I think so.") == 0  # "I" and a sentence start are not names


def test_salience_grows_with_specifics_and_reinforcement():
    plain, named = salience("it was fine"), salience("Alice met Bob in Paris")
    assert plain == 0 and 0 < named < 1
    assert salience("Alice met Bob in Paris", 2) > named


def test_specific_terms_are_names_numbers_and_dates_in_order_with_repeats():
    text = "I met Alice in Paris on 3 May. Then Alice left on Monday, 2023-05-08."
    assert specific_terms(text) == ["Alice", "Paris", "3", "May", "Alice", "Monday", "2023-05-08"]
    assert specific_terms("Yesterday I'm fine. I'll call Bob tomorrow.") == ["Yesterday", "Bob", "tomorrow"]


def test_salience_is_one_minus_exp_of_a_third_of_specifics_and_reinforcements():
    assert salience("I met Alice and Bob in Paris") == pytest.approx(1 - math.exp(-1.0))  # 3 specifics
    assert salience("it was fine", reinforcements=-5) == 0.0  # negative reinforcements count as none


def test_content_words_are_stemmed_without_stop_words():
    words = content_words("The cats were running to the park")
    assert "the" not in words and "to" not in words
    assert content_words("cats") == content_words("cat")  # one stem


def test_numbers_are_digit_runs():
    assert numbers("3 boxes in 2023, 1.5 kg") == {"3", "2023", "1", "5"}
    assert numbers("no digits") == set()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [({"a", "b"}, {"b", "c"}, 1 / 3), ({"a"}, {"a"}, 1.0), ({"a"}, set(), 0.0), (set(), set(), 0.0)],
)
def test_jaccard_is_shared_over_union(a, b, expected):
    assert jaccard(a, b) == pytest.approx(expected)


def test_a_sentence_ends_at_a_stop_mark_before_the_next_text():
    assert SENTENCE_END.split("One. Two! Three? four") == ["One.", "Two!", "Three?", "four"]
    assert SENTENCE_END.split("3.5 kg. Done") == ["3.5 kg.", "Done"]  # no space: no end
