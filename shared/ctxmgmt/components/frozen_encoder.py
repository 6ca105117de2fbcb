"""A mean-pooling sentence-transformers model run as a frozen TorchScript graph with float16 weights."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from ctxmgmt.components.pooling_encoder import (
    PoolingEncoder,
    example_batch,
    hidden_states_module,
    is_mean_pooling,
)

logger = logging.getLogger(__name__)


HALF_WEIGHTS_TOLERANCE = 5e-4
"""Largest difference, per vector component, between the frozen graph's vectors (float16
weights) and ``SentenceTransformer.encode``'s: measured at most 1.4e-4 over the 1,065 LoCoMo dev
turn texts and the demo's, cosine >= 0.99999 (``python benchmarks/encoder.py``)."""


def with_half_weights(module: Any) -> Any | None:
    """A copy of ``module`` whose Linear layers keep float16 weights and compute in float32.

    A call of a few short texts reads every weight once: in float16 the transformer's weights
    (42 MB in float32 for MiniLM) halve and fit the CPU's cache (32 MB of L3 on the machine
    measured), which about halves a query's latency on 2 cores; activations stay float32, so a
    text's vector does not depend on the texts batched with it. None where the runtime has no
    float16 linear kernel.
    """
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao's notice about moving to torchao
            return torch.ao.quantization.quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.float16)
    except Exception as exc:  # no fbgemm/x86 float16 kernel: keep float32 weights
        logger.warning("float16 weights unavailable (%s); the frozen encoder keeps float32 weights", exc)
        return None


class FrozenEncoder(PoolingEncoder):
    """A mean-pooling sentence-transformers model run as a frozen TorchScript graph.

    Its Linear layers keep float16 weights (:func:`with_half_weights`; float32 where the
    runtime lacks the kernel). The vectors are ``SentenceTransformer.encode``'s within
    :data:`HALF_WEIGHTS_TOLERANCE` at a fraction of the latency for short texts on CPU: eager
    PyTorch spends ~7 ms per call in Python dispatch, which a frozen graph skips, and half the
    weights stay in the CPU's cache (a query: 3.4 ms, against 7.6 ms with float32 weights and
    19.9 ms through ``encode``; ``python benchmarks/encoder.py`` on 2 cores).
    """

    def __init__(self, model: Any, *, half_weights: bool = True) -> None:
        import torch

        super().__init__(model)
        self._torch = torch
        hidden = hidden_states_module(model)
        half = with_half_weights(hidden) if half_weights else None
        self.half_weights = half is not None
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(half if half is not None else hidden, example_batch(), strict=False)
            self.graph = torch.jit.optimize_for_inference(torch.jit.freeze(traced))

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            return self.graph(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()


def frozen_encoder_for(model: Any) -> FrozenEncoder | None:
    """A frozen encoder for a (Transformer, mean Pooling[, Normalize]) model, else None."""
    if not is_mean_pooling(model):
        return None
    try:
        return FrozenEncoder(model)
    except Exception as exc:  # any tracing problem: keep the plain encode path
        logger.warning("TorchScript encoder unavailable (%s); using sentence-transformers encode", exc)
        return None
