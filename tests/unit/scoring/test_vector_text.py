"""What a turn's vector stands for (``ctxmgmt.scoring.vector_text``) and KadaneDial's use of it."""

from __future__ import annotations

from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.scoring.vector_text import WINDOW_CHARS, vector_text
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy

LONG_REPLY = "Here is a long answer about many things. " * 60


def long_turn(index: int = 0, user: str = "My dog is a beagle named Rex.") -> Turn:
    return Turn(index, (Message("user", user, timestamp="2023/05/30"), Message("assistant", LONG_REPLY)))


def test_a_short_turn_is_embedded_whole() -> None:
    turn = Turn(0, (Message("user", "hi", name="Ann"), Message("assistant", "hello", name="Bob")))
    assert vector_text(turn) == turn.text


def test_a_long_turn_is_embedded_as_its_user_message_with_its_date() -> None:
    turn = long_turn()
    assert len(turn.text) > WINDOW_CHARS
    assert vector_text(turn) == "[2023/05/30] user: My dog is a beagle named Rex."
    assert vector_text(turn, None) == turn.text
    assert vector_text(turn, 10 * len(turn.text)) == turn.text


def test_a_long_turn_without_user_text_is_embedded_whole() -> None:
    turn = Turn(0, (Message("assistant", LONG_REPLY),))
    assert vector_text(turn) == turn.text


def test_kadanedial_embeds_what_vector_text_gives(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    turns = [long_turn(0), long_turn(1, "I bought a red bike."), Turn(2, (Message("user", "ok"),))]
    strategy.add_many(turns)
    expected = hashing_embedder.embed([vector_text(t) for t in turns])
    assert (abs(strategy.matrix - expected) < 1e-6).all()
    whole = KadaneDialStrategy(embedder=hashing_embedder, window_chars=None)
    whole.add_many(turns)
    assert (abs(whole.matrix - hashing_embedder.embed([t.text for t in turns])) < 1e-6).all()


def test_restored_state_keeps_the_user_message_vectors(hashing_embedder) -> None:
    strategy = KadaneDialStrategy(embedder=hashing_embedder)
    strategy.add_many([long_turn(0), long_turn(1, "I bought a red bike.")])
    restored = KadaneDialStrategy(embedder=hashing_embedder)
    restored.load_state(strategy.to_state())
    calls = len(hashing_embedder.calls)
    restored.add(long_turn(2, "My sister likes yellow."))
    assert (restored.matrix[:2] == strategy.matrix).all()
    assert hashing_embedder.calls[calls] == 1  # only the new turn was embedded
