"""SentenceTransformerEmbedder's settings, name and declared dimension, read without loading a model.

The vectors themselves are tested with the real MiniLM in ``test_frozen_encoder.py`` and
``test_onnx_encoder.py`` (``model`` tests).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ctxmgmt import ConfigurationError
from ctxmgmt.components import sentence_transformer_embedder as module
from ctxmgmt.components.sentence_transformer_embedder import (
    BACKENDS,
    BUNDLED_MODEL,
    SentenceTransformerEmbedder,
)


def test_embedder_batch_size_is_validated() -> None:
    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder(batch_size=0)
    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder(batch_size=True)


def test_a_bad_backend_is_a_configuration_error() -> None:
    assert BACKENDS == ("torch", "onnx")
    with pytest.raises(ConfigurationError, match="backend must be one of torch, onnx"):
        SentenceTransformerEmbedder(backend="int8")


def test_both_backends_are_named_by_the_model_alone() -> None:
    assert SentenceTransformerEmbedder().name == f"sentence-transformers:{BUNDLED_MODEL}"
    assert SentenceTransformerEmbedder(backend="onnx").name == SentenceTransformerEmbedder().name
    assert SentenceTransformerEmbedder("/models/mine").name == "sentence-transformers:/models/mine"


def test_encoders_not_in_use_are_none_and_no_texts_load_nothing() -> None:
    plain = SentenceTransformerEmbedder(frozen=False)
    assert plain.frozen_encoder is None and plain.onnx_encoder is None
    assert plain.embed([]).shape == (0, 0)


def test_the_bundled_dimension_is_read_from_the_folder_without_torch() -> None:
    torch_loaded = "torch" in sys.modules
    assert SentenceTransformerEmbedder().dimension == 384
    assert ("torch" in sys.modules) == torch_loaded


def write_model_folder(folder: Path, kinds: list[str], dimension: int = 12) -> str:
    """A sentence-transformers folder layout: modules.json and the pooling config."""
    modules = [
        {"idx": k, "name": str(k), "path": f"{k}_{kind}", "type": f"sentence_transformers.models.{kind}"}
        for k, kind in enumerate(kinds)
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    for entry in modules:
        (folder / entry["path"]).mkdir()
    pooling = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
    (folder / pooling / "config.json").write_text(json.dumps({"word_embedding_dimension": dimension}))
    return str(folder)


def test_a_folder_declares_its_pooling_dimension_only_when_nothing_changes_it(tmp_path: Path) -> None:
    for name, kinds, expected in [
        ("plain", ["Transformer", "Pooling"], 12),
        ("normalised", ["Transformer", "Pooling", "Normalize"], 12),
        ("dense", ["Transformer", "Pooling", "Dense"], None),
    ]:
        folder = tmp_path / name
        folder.mkdir()
        assert SentenceTransformerEmbedder(write_model_folder(folder, kinds)).dimension == expected
    assert SentenceTransformerEmbedder(str(tmp_path / "missing")).dimension is None


def test_a_forked_child_gets_a_new_model_lock_and_one_torch_thread(monkeypatch) -> None:
    threads: list[int] = []
    fake_torch = type("FakeTorch", (), {"set_num_threads": staticmethod(threads.append)})()
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    lock = module._MODEL_LOCK
    monkeypatch.setattr(module, "_MODEL_LOCK", lock)  # the original comes back after the test
    module._after_fork_in_child()
    assert module._MODEL_LOCK is not lock and not module._MODEL_LOCK.locked()
    assert threads == [1]
