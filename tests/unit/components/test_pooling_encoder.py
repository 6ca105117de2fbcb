"""PoolingEncoder (mean pooling, batched by length) and is_mean_pooling, without a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.pooling_encoder import PoolingEncoder, is_mean_pooling


class WordTokenizer:
    """Splits on spaces; a word's id is its length; pads with id 0 (mask 0)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, batch: Sequence[str], **options: Any) -> dict[str, np.ndarray]:
        self.batches.append(list(batch))
        words = [t.split()[: options["max_length"]] for t in batch]
        width = max(len(w) for w in words)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, text_words in enumerate(words):
            ids[row, : len(text_words)] = [len(w) for w in text_words]
            mask[row, : len(text_words)] = 1
        return {"input_ids": ids, "attention_mask": mask}


class WordLengthEncoder(PoolingEncoder):
    """Each token's hidden state is (its id, 1): the pooled vector is (mean word length, 1)."""

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.stack([ids.astype(np.float32), np.ones(ids.shape, dtype=np.float32)], axis=-1)


def encoder(max_length: int = 128) -> WordLengthEncoder:
    model = type("Model", (), {"tokenizer": WordTokenizer(), "max_seq_length": max_length})()
    return WordLengthEncoder(model)


def test_vectors_are_the_mean_over_real_tokens_not_padding() -> None:
    out = encoder().encode(["a bbb", "cc", "dddd dddd dddd"], batch_size=8)
    np.testing.assert_allclose(out, [[2.0, 1.0], [2.0, 1.0], [4.0, 1.0]])


def test_texts_are_batched_shortest_first_and_come_back_in_their_order() -> None:
    pooled = encoder()
    texts = ["a much longer text here", "hi", "mid size one"]
    out = pooled.encode(texts, batch_size=2)
    assert pooled.tokenizer.batches == [["hi", "mid size one"], ["a much longer text here"]]
    np.testing.assert_allclose(out[:, 0], [np.mean([1, 4, 6, 4, 4]), 2.0, np.mean([3, 4, 3])])


def test_a_text_is_cut_at_the_models_max_seq_length() -> None:
    out = encoder(max_length=1).encode(["a bbbbb"], batch_size=8)
    np.testing.assert_allclose(out, [[1.0, 1.0]])


def module(name: str, config: dict[str, str]) -> object:
    return type(name, (), {"get_config_dict": lambda self: config})()


def test_only_transformer_then_mean_pooling_then_at_most_normalize_qualifies() -> None:
    transformer, mean = module("Transformer", {}), module("Pooling", {"pooling_mode": "mean"})
    assert is_mean_pooling([transformer, mean])
    assert is_mean_pooling([transformer, mean, module("Normalize", {})])
    assert not is_mean_pooling([transformer, module("Pooling", {"pooling_mode": "cls"})])
    assert not is_mean_pooling([transformer, mean, module("Dense", {})])
    assert not is_mean_pooling([transformer])
    assert not is_mean_pooling(42)  # not a pipeline at all
