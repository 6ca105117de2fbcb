"""Mean pooling over a sentence-transformers model's hidden states, batched like ``encode``.

The base of the frozen TorchScript encoder (:mod:`ctxmgmt.components.frozen_encoder`) and
the ONNX Runtime one (:mod:`ctxmgmt.components.onnx_encoder`); torch is imported only by the
functions that build a graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def is_mean_pooling(model: Any) -> bool:
    """Whether ``model`` is (Transformer, mean Pooling[, Normalize]), which the encoders here run."""
    try:
        modules = list(model)
        pooling = modules[1].get_config_dict().get("pooling_mode") if len(modules) > 1 else None
    except Exception:  # not a sentence-transformers pipeline we can read
        return False
    kinds = [type(m).__name__ for m in modules]
    return kinds[:2] == ["Transformer", "Pooling"] and pooling == "mean" and kinds[2:] in ([], ["Normalize"])


def hidden_states_module(model: Any) -> Any:
    """``(ids, mask) -> last hidden states`` of a sentence-transformers model's transformer."""
    import torch

    encoder = model[0].auto_model

    class _Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.encoder(input_ids=ids, attention_mask=mask, return_dict=False)[0]

    return _Hidden().eval()


def example_batch() -> tuple[Any, Any]:
    """A padded (ids, mask) example batch, so a traced or exported graph takes any shape and mask."""
    import torch

    ids = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return ids, mask


class PoolingEncoder:
    """Mean pooling over a hidden-states function, batched like ``SentenceTransformer.encode``.

    Texts are sorted by length and batched; longer texts are truncated at the model's
    ``max_seq_length``. Subclasses provide :meth:`_hidden` (float32, (batch, tokens, dim)).
    """

    def __init__(self, model: Any) -> None:
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length)

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Mean-pooled vectors of ``texts`` (not normalised), in their order; shape (len(texts), dim)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows: list[np.ndarray] = []
        for k in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[k : k + batch_size]]
            enc = self.tokenizer(
                batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
            )
            mask = np.asarray(enc["attention_mask"], dtype=np.int64)
            hidden = self._hidden(np.asarray(enc["input_ids"], dtype=np.int64), mask)
            weights = mask[..., None].astype(hidden.dtype)
            rows.append((hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None))
        stacked = np.concatenate(rows)
        out = np.empty_like(stacked)
        out[order] = stacked
        return out
