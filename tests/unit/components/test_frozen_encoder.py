"""FrozenEncoder: a mean-pooling model as a frozen TorchScript graph with float16 Linear weights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ctxmgmt.components.frozen_encoder import (
    HALF_WEIGHTS_TOLERANCE,
    FrozenEncoder,
    frozen_encoder_for,
    with_half_weights,
)

torch = pytest.importorskip("torch")


class SpaceTokenizer:
    """Splits on spaces; a word's id is 100 times its length; pads with id 0 (mask 0)."""

    def __call__(self, batch: Sequence[str], **options: Any) -> dict[str, np.ndarray]:
        words = [t.split()[: options["max_length"]] for t in batch]
        width = max(len(w) for w in words)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, text_words in enumerate(words):
            ids[row, : len(text_words)] = [100 * len(w) for w in text_words]
            mask[row, : len(text_words)] = 1
        return {"input_ids": ids, "attention_mask": mask}


class TinyTransformer(torch.nn.Module):
    """An embedding table and one Linear layer: hidden states of shape (batch, tokens, 8)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding = torch.nn.Embedding(2000, 8)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, input_ids: Any, attention_mask: Any, return_dict: bool = False) -> tuple[Any]:
        return (self.linear(self.embedding(input_ids)),)


class TinyModel(list):
    """What the encoders read of a sentence-transformers model: ``[0].auto_model``, tokenizer, length."""

    def __init__(self) -> None:
        super().__init__([type("Transformer", (), {"auto_model": TinyTransformer().eval()})()])
        self.tokenizer = SpaceTokenizer()
        self.max_seq_length = 16


def eager_vectors(model: TinyModel, texts: list[str]) -> np.ndarray:
    """Mean-pooled hidden states of the eager model, one text at a time."""
    rows = []
    for text in texts:
        ids = torch.tensor([[100 * len(w) for w in text.split()]])
        with torch.no_grad():
            hidden = model[0].auto_model(input_ids=ids, attention_mask=torch.ones_like(ids))[0]
        rows.append(hidden[0].mean(0).numpy())
    return np.vstack(rows)


TEXTS = ["a bb ccc", "dddd", "ee f gg hhh iiii jj"]


def test_the_graph_with_float32_weights_gives_the_eager_models_vectors() -> None:
    model = TinyModel()
    frozen = FrozenEncoder(model, half_weights=False)
    assert not frozen.half_weights
    np.testing.assert_allclose(frozen.encode(TEXTS, batch_size=2), eager_vectors(model, TEXTS), atol=1e-5)


def test_float16_weights_stay_close_and_a_vector_does_not_depend_on_its_batch() -> None:
    model = TinyModel()
    frozen = FrozenEncoder(model)
    together = frozen.encode(TEXTS, batch_size=8)
    np.testing.assert_allclose(together, eager_vectors(model, TEXTS), atol=1e-2)
    for k, text in enumerate(TEXTS):
        np.testing.assert_allclose(frozen.encode([text], batch_size=8)[0], together[k], atol=1e-6)


def test_half_weights_keep_float32_activations() -> None:
    torch.manual_seed(1)
    layer = torch.nn.Sequential(torch.nn.Linear(16, 4))
    half = with_half_weights(layer)
    if half is None:
        pytest.skip("no float16 linear kernel on this machine")
    x = torch.randn(3, 16)
    with torch.no_grad():
        out = half(x)
        assert out.dtype == torch.float32
        np.testing.assert_allclose(out.numpy(), layer(x).numpy(), atol=1e-2)
    assert 0 < HALF_WEIGHTS_TOLERANCE < 1e-3


def test_frozen_encoder_is_skipped_for_non_mean_pooling_models() -> None:
    def module(name: str, config: dict[str, str]) -> object:
        return type(name, (), {"get_config_dict": lambda self: config})()

    cls_pooled = [module("Transformer", {}), module("Pooling", {"pooling_mode": "cls"})]
    assert frozen_encoder_for(cls_pooled) is None


def test_frozen_graph_matches_sentence_transformers_encode(default_embedder) -> None:
    """The frozen TorchScript path (calls of up to 8 texts, float16 weights) gives encode's vectors."""
    from ctxmgmt.components.sentence_transformer_embedder import FROZEN_MAX_TEXTS, SentenceTransformerEmbedder

    texts = ["I adopted a cat last week.", "Where did we go hiking in May, and with whom?", "ok"]
    assert default_embedder.frozen_encoder is not None
    assert default_embedder.frozen_encoder.half_weights  # this machine has the float16 kernel
    fast = default_embedder.embed(texts)
    plain = SentenceTransformerEmbedder(frozen=False).embed(texts)
    assert fast.shape == plain.shape == (3, 384)
    np.testing.assert_allclose(fast, plain, atol=HALF_WEIGHTS_TOLERANCE)
    assert (fast * plain).sum(axis=1).min() > 0.99999
    one = default_embedder.embed(texts[1:2])
    np.testing.assert_allclose(one[0], fast[1], atol=1e-6)  # a text's vector does not depend on its batch
    many = default_embedder.embed(texts * FROZEN_MAX_TEXTS)  # a large batch goes through encode
    np.testing.assert_allclose(many[:3], plain, atol=1e-5)
