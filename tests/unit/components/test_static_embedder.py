"""The shipped static encoder: offline numpy loading, vectors, and its identity in stored states."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxmgmt import ComponentError, ConfigurationError, KadaneDialStrategy, Message
from ctxmgmt.app.testing import StatePool
from ctxmgmt.components import StaticEmbedder
from ctxmgmt.components.embedder import as_embedder
from ctxmgmt.components.static_embedder import (
    MAX_TOKENS,
    PROJECTIONS,
    STATIC_MODEL,
    arrays_sha256,
    load_projection,
    load_static_model,
    shipped_model_paths,
    static_embedder,
)
from ctxmgmt.messages.history import group_turns
from ctxmgmt.store import SQLiteStore

pytest.importorskip("tokenizers", reason="the local extra is not installed")

TEXTS = [
    "I adopted a cat last week.",
    "My new kitten sleeps on my keyboard.",
    "The quarterly tax return is due in April.",
    "Where did we go hiking in May, and with whom?",
    "We hiked in the Alps with my brother in spring.",
    "Can you fix the memory leak in my Python service?",
]


@pytest.fixture(scope="session")
def static() -> StaticEmbedder:
    """The shipped static encoder, loaded once per session."""
    embedder = StaticEmbedder()
    embedder.embed(["warm up"])
    return embedder


def conversation(n: int) -> list:
    messages = []
    for i in range(n):
        messages += [
            Message("user", f"Turn {i}: my cat number {i} likes fish and the vet visit {i % 5} in Lisbon."),
            Message("assistant", f"Noted {i}."),
        ]
    return group_turns(messages)


def test_loads_offline_without_torch_in_a_fresh_process() -> None:
    root = Path(__file__).resolve().parents[3]
    code = (
        "import sys\n"
        "from ctxmgmt.components import StaticEmbedder\n"
        "v = StaticEmbedder().embed(['hello there'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{root / 'shared'}{os.pathsep}{root}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_shape_dtype_norm_and_degenerate_texts(static) -> None:
    vectors = static.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert static.embed([]).shape == (0, 0)
    odd = static.embed(["", "   ", "ok"])
    assert not odd[0].any() and not odd[1].any()  # no token: a zero row, as normalise keeps it
    assert np.linalg.norm(odd[2]) == pytest.approx(1.0, abs=1e-5)
    long = static.embed(["word " * 5000])  # past the 512 pooled tokens: still one finite row
    assert np.isfinite(long).all() and long.shape == (1, 384)


def test_deterministic_alone_in_a_batch_and_across_instances(static) -> None:
    batch = static.embed(TEXTS)
    for k, text in enumerate(TEXTS):
        np.testing.assert_array_equal(static.embed([text])[0], batch[k])
    np.testing.assert_array_equal(StaticEmbedder().embed(TEXTS), batch)


def test_cosines_agree_with_minilm_on_a_few_sentences(static, default_embedder) -> None:
    s, m = static.embed(TEXTS), default_embedder.embed(TEXTS)
    # the vectors live in MiniLM's space: each is close to MiniLM's own vector of the text
    assert ((s * m).sum(axis=1) > 0.5).all()
    sims_s, sims_m = s @ s.T, m @ m.T
    upper = np.triu_indices(len(TEXTS), 1)
    assert np.corrcoef(sims_s[upper], sims_m[upper])[0, 1] > 0.7
    # the cat sentences and the hiking sentences are each other's nearest neighbours, as with MiniLM
    for a, b in ((0, 1), (3, 4)):
        for sims in (sims_s, sims_m):
            assert int(np.argsort(-sims[a])[1]) == b and int(np.argsort(-sims[b])[1]) == a


def test_named_by_a_digest_of_its_weights(static) -> None:
    model = load_static_model()
    assert static.name == f"{STATIC_MODEL}@{model.digest}"
    assert model.config["sha256"].startswith(model.digest)  # the build script's digest
    assert model.digest == arrays_sha256(model.table, model.scales, model.projection, model.bias)[:12]
    table, scales = np.array([[1, -2]], dtype=np.int8), np.array([0.5], dtype=np.float32)
    assert arrays_sha256(table, scales) == hashlib.sha256(table.tobytes() + scales.tobytes()).hexdigest()
    assert as_embedder("static") is as_embedder("static")
    assert isinstance(as_embedder("static"), StaticEmbedder)
    with pytest.raises(ConfigurationError, match="minilm, static"):
        as_embedder("bert")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "128", None])
def test_max_tokens_must_be_a_positive_integer(bad) -> None:
    with pytest.raises(ConfigurationError, match="max_tokens must be an int >= 1"):
        StaticEmbedder(max_tokens=bad)


def test_another_max_tokens_is_named_and_cached_apart(static) -> None:
    assert static_embedder() is static_embedder(MAX_TOKENS)
    assert static_embedder(128) is static_embedder(128) and static_embedder(128).max_tokens == 128
    assert static_embedder(128).name == f"{static.name}/128"


def test_the_turns_projection_maps_the_same_pooled_vectors_another_way(static) -> None:
    turns = static_embedder(projection="turns")
    assert PROJECTIONS == ("utterances", "turns") and turns is static_embedder(MAX_TOKENS, "turns")
    projection = load_projection()
    assert turns.name == f"{static.name}+turns@{projection.digest}"
    assert projection.config["sha256"].startswith(projection.digest)  # the fitting script's digest
    assert projection.config["model"] == static.name  # fitted on this build's pooled vectors
    weights, bias = projection.arrays
    assert weights.shape == (static.model.table.shape[1], 384) and bias.shape == (384,)
    vectors = turns.embed(TEXTS + [""])
    assert vectors.shape == (len(TEXTS) + 1, 384) and not vectors[-1].any()
    assert np.allclose(np.linalg.norm(vectors[:-1], axis=1), 1.0, atol=1e-3)
    pooled, _ = static.model.pooled(TEXTS)
    expected = pooled @ weights + bias
    assert np.allclose(vectors[:-1], expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-5)
    assert not np.allclose(vectors[:-1], static.embed(TEXTS), atol=1e-2)  # not the model's own map
    cat, kitten, tax = vectors[:3]
    assert cat @ kitten > cat @ tax


@pytest.mark.parametrize("bad", ["turn", "", None, 1])
def test_an_unknown_projection_is_a_configuration_error(bad) -> None:
    with pytest.raises(ConfigurationError, match="projection must be one of"):
        StaticEmbedder(projection=bad)


def test_a_missing_projection_file_is_a_component_error(tmp_path) -> None:
    with pytest.raises(ComponentError, match="cannot read the static projection"):
        load_projection(tmp_path / "none.npz")
    (tmp_path / "bad.npz").write_bytes(b"not an npz")
    with pytest.raises(ComponentError, match="cannot read the static projection"):
        load_projection(tmp_path / "bad.npz")
    np.savez(tmp_path / "shapes.npz", projection=np.zeros((4, 3)), bias=np.zeros(2), config=np.array("{}"))
    with pytest.raises(ComponentError, match="inconsistent array shapes"):
        load_projection(tmp_path / "shapes.npz")


def test_missing_model_files_are_component_errors(tmp_path) -> None:
    with pytest.raises(ComponentError, match="cannot read the static model"):
        StaticEmbedder(tmp_path / "none.npz").embed(["x"])


def test_state_names_its_encoder_and_never_mixes_with_another(static, tmp_path, caplog) -> None:
    turns = conversation(12)
    minilm_named = KadaneDialStrategy(embedder=as_embedder(None)).stored_config()["built_with"]
    assert KadaneDialStrategy(embedder="static").stored_config()["built_with"]["embedder"] == static.name
    assert minilm_named["embedder"] != static.name
    path = tmp_path / "s.db"
    StatePool(lambda: KadaneDialStrategy(embedder=static), store=SQLiteStore(path)).get("a").sync(turns)

    # the same encoder restores the stored vectors
    with caplog.at_level(logging.WARNING):
        same = StatePool(lambda: KadaneDialStrategy(embedder=static), store=SQLiteStore(path)).get("a")
        same.sync(turns)
    assert "rebuilding" not in caplog.text

    # another build of the static model (other weights, hence another digest) rebuilds
    arrays, tokenizer = shipped_model_paths()
    with np.load(arrays) as data:
        changed = {k: data[k] for k in data.files}
    changed["bias"] = changed["bias"] + np.float32(0.01)
    np.savez(tmp_path / "other.npz", **changed)
    other = StaticEmbedder(tmp_path / "other.npz", tokenizer)
    assert other.name != static.name
    with caplog.at_level(logging.WARNING):
        rebuilt = StatePool(lambda: KadaneDialStrategy(embedder=other), store=SQLiteStore(path)).get("a")
        rebuilt.sync(turns)
    assert "rebuilding" in caplog.text
    np.testing.assert_allclose(rebuilt.strategy.matrix, other.embed([t.text for t in turns]), atol=1e-6)
