"""PassageRecall: passages of older turns, their scores, and the recalled block within a cap."""

from __future__ import annotations

from ctxmgmt import Message, Turn
from ctxmgmt.strategies.swin import SWinStrategy
from ctxmgmt.strategies.swin_recall import (
    LONG_MESSAGE,
    MIN_RECALL_TOKENS,
    PASSAGE_WORDS,
    RECALL_HEADER,
    TURN_WEIGHT,
    PassageRecall,
    brief_flags,
    passages,
    pieces,
)
from tests.helpers import words


def test_pieces_are_sentences_and_list_items_without_markers():
    text = "Hi. I adopted a dog last week. He is a Golden Retriever named Max!\n- **first** item here\n"
    text += "1) second item there"
    assert pieces(text) == [
        "I adopted a dog last week.",
        "He is a Golden Retriever named Max!",
        "first item here",
        "second item there",
    ]


def test_a_long_sentence_is_cut_into_pieces_and_short_tails_go():
    long = " ".join(f"w{k}" for k in range(PASSAGE_WORDS * 2 + 2))
    out = pieces(long)
    assert [len(p.split()) for p in out] == [PASSAGE_WORDS, PASSAGE_WORDS]  # the 2-word tail is too short
    assert out[0].split()[0] == "w0" and out[1].split()[0] == f"w{PASSAGE_WORDS}"


def test_passages_carry_speaker_and_date():
    turn = Turn(
        3,
        (
            Message("user", "I adopted a dog last week.", timestamp="2023/05/25 (Thu) 23:07", name="Ann"),
            Message("assistant", "", media=("image",)),  # no text: no passage
            Message("assistant", "That is lovely news indeed."),
        ),
    )
    assert passages(turn) == [
        "Ann (25 May 2023): I adopted a dog last week.",
        "assistant: That is lovely news indeed.",
    ]


def filled() -> PassageRecall:
    recall = PassageRecall()
    recall.add(
        [
            Turn(0, (Message("user", "My dog Max is a Golden Retriever. We walk every day."),)),
            Turn(1, (Message("user", "The weather in Lyon was rainy all week long."),)),
            Turn(2, (Message("user", "I cooked a large pot of soup for dinner tonight."),)),
        ]
    )
    return recall


def test_every_passage_is_indexed_with_its_turn():
    recall = filled()
    assert len(recall) == 4
    assert recall.turns == [0, 0, 1, 2]
    assert recall.lines[1] == "user: We walk every day."


def test_a_passage_of_a_matching_turn_scores_even_without_a_shared_word():
    scores = filled().scores("What breed is Max?")
    assert scores[0] > scores[1] > 0  # the second passage inherits its turn's score
    assert scores[2] == scores[3] == 0


def test_the_block_holds_the_best_passages_oldest_first_within_the_cap():
    strategy = SWinStrategy(token_counter=words)
    recall = filled()
    block = recall.block(strategy, "What breed is my dog Max?", shown=set(), cap=200)
    assert block is not None and block.kind == "summary" and block.turns == (0,)
    assert block.text.splitlines() == [
        RECALL_HEADER,
        "- user: My dog Max is a Golden Retriever.",
        "- user: We walk every day.",
    ]
    assert block.tokens <= 200 and block.tokens == strategy.memory_tokens(block.text)
    assert block.reason == "recalled: 2 passages of older turns that match the query"


def test_no_block_for_shown_turns_a_small_cap_a_blank_query_or_no_match():
    strategy = SWinStrategy(token_counter=words)
    recall = filled()
    assert recall.block(strategy, "What breed is Max?", shown={0}, cap=200) is None
    assert recall.block(strategy, "What breed is Max?", shown=set(), cap=MIN_RECALL_TOKENS - 1) is None
    assert recall.block(strategy, "   ", shown=set(), cap=200) is None
    assert recall.block(strategy, "quantum chromodynamics", shown=set(), cap=200) is None
    assert PassageRecall().block(strategy, "Max", shown=set(), cap=200) is None


def test_the_block_never_exceeds_its_cap():
    strategy = SWinStrategy(token_counter=words)
    recall = PassageRecall()
    recall.add(
        [
            Turn(k, (Message("user", f"Max the dog fetched ball number {k} in the park today."),))
            for k in range(30)
        ]
    )
    cap = strategy.memory_tokens(RECALL_HEADER) + 25
    block = recall.block(strategy, "What did Max the dog fetch?", shown=set(), cap=cap)
    assert block is not None and block.tokens <= cap
    assert list(block.turns) == sorted(block.turns)


def test_a_brief_message_beside_a_long_one_is_flagged():
    assert brief_flags([["q"], ["a"] * LONG_MESSAGE]) == [True, False]
    assert brief_flags([["q"], ["a"] * (LONG_MESSAGE - 1)]) == [False, False]  # no long message
    assert brief_flags([["a"] * LONG_MESSAGE, []]) == [False, True]
    assert brief_flags([["a"] * LONG_MESSAGE, ["b"] * LONG_MESSAGE]) == [False, False]
    assert brief_flags([]) == []


def test_the_users_words_beside_a_long_reply_outrank_the_replys_matching_sentences():
    reply = " ".join(f"Sentence {k} says a dog of any breed needs a collar." for k in range(LONG_MESSAGE))
    recall = PassageRecall()
    recall.add(
        [
            Turn(
                0,
                (
                    Message("user", "Which collar suits a Golden Retriever like Max?"),
                    Message("assistant", reply),
                ),
            ),
            Turn(1, (Message("user", "The weather in Lyon was rainy all week long."),)),
        ]
    )
    assert recall.brief == [True] + [False] * LONG_MESSAGE + [False]
    scores = recall.scores("What breed is my dog?")
    assert scores[0] > max(scores[1 : LONG_MESSAGE + 1])  # no shared word, yet first
    assert scores[-1] == 0


def test_turns_without_a_long_message_score_as_before():
    recall = filled()  # short messages only: no passage is brief beside a long one
    assert recall.brief == [False] * 4
    scores = recall.scores("What breed is Max?")
    turn = recall._turn_index.scores("What breed is Max?")
    own = recall._passage_index.scores("What breed is Max?")
    expected = own / own.max() + TURN_WEIGHT * turn[[0, 0, 1, 2]] / turn.max()
    assert list(scores) == list(expected)
