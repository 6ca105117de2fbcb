"""The ONNX Runtime backend of the default embedder.

It must give the torch backend's vectors (within 1e-5 of ``encode``'s, within the float16
weights' tolerance of the frozen graph's; any batch size, from any thread) so that states stored
by either backend stay usable with the other, and a strategy built on it must select what the
default selects.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ctxmgmt import ComponentError, KadaneDialStrategy, Message
from ctxmgmt.components.frozen_encoder import HALF_WEIGHTS_TOLERANCE
from ctxmgmt.components.onnx_encoder import OnnxEncoder
from ctxmgmt.components.sentence_transformer_embedder import FROZEN_MAX_TEXTS, SentenceTransformerEmbedder
from ctxmgmt.messages.history import group_turns

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

TEXTS = [
    "I adopted a cat last week.",
    "Where did we go hiking in May, and with whom?",
    "ok",
    "My sister's wedding is in Lisbon next spring; we are booking the flights tonight.",
]


@pytest.fixture(scope="session")
def onnx_embedder() -> SentenceTransformerEmbedder:
    """The bundled MiniLM run by ONNX Runtime, built once per session."""
    embedder = SentenceTransformerEmbedder(backend="onnx")
    embedder.embed(["warm up"])
    return embedder


def test_vectors_match_the_torch_backend_for_small_and_large_calls(default_embedder, onnx_embedder) -> None:
    small = onnx_embedder.embed(TEXTS)
    assert small.shape == (4, 384) and small.dtype == np.float32
    np.testing.assert_allclose(small, SentenceTransformerEmbedder(frozen=False).embed(TEXTS), atol=1e-5)
    # torch's small calls run the frozen graph with float16 weights
    np.testing.assert_allclose(small, default_embedder.embed(TEXTS), atol=HALF_WEIGHTS_TOLERANCE)
    many = TEXTS * FROZEN_MAX_TEXTS  # past the frozen graph's limit: torch uses encode
    np.testing.assert_allclose(onnx_embedder.embed(many), default_embedder.embed(many), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-6)


def test_concurrent_calls_give_the_serial_vectors(onnx_embedder) -> None:
    serial = [onnx_embedder.embed([text]) for text in TEXTS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda text: onnx_embedder.embed([text]), TEXTS * 3))
    for k, vectors in enumerate(parallel):
        np.testing.assert_allclose(vectors, serial[k % len(TEXTS)], atol=1e-6)


def test_a_strategy_selects_the_same_turns_and_stores_the_same_config(
    default_embedder, onnx_embedder
) -> None:
    history = []
    for user, reply in [
        ("I adopted a cat called Miso last week.", "Congratulations! How is Miso settling in?"),
        ("We are planning a hiking trip to the Dolomites in May.", "Lovely. Which trails?"),
        ("My sister's wedding is in Lisbon next spring.", "Have you booked the flights?"),
        ("The new job starts on Monday, a bakery in Porto.", "Good luck with the early mornings!"),
    ]:
        history += [Message("user", user), Message("assistant", reply)]
    turns = group_turns(history)
    chosen = []
    for embedder in (default_embedder, onnx_embedder):
        strategy = KadaneDialStrategy(embedder=embedder)
        strategy.add_many(turns)
        context = strategy.select("What is my cat's name?", budget=60)
        chosen.append(context.turn_indices)
    assert chosen[0] == chosen[1]
    assert 0 in chosen[0] and len(chosen[0]) < len(turns)  # the cat turn, within a tight budget
    # Both backends are recorded alike, so a state stored by one is restored by the other.
    torch_config = KadaneDialStrategy(embedder=default_embedder).stored_config()
    assert KadaneDialStrategy(embedder=onnx_embedder).stored_config() == torch_config


def test_without_onnxruntime_the_error_names_the_extra(monkeypatch) -> None:
    """The backend's check, before any model is read (the bad backend name and non-mean-pooling
    models are tested in ``test_sentence_transformer_embedder.py`` and ``test_pooling_encoder.py``)."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    with pytest.raises(ComponentError, match=r"pip install 'ctxmgmt\[onnx\]'"):
        OnnxEncoder(model=None)
