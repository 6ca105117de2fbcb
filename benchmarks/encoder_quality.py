"""Quality of each memory with each encoder on the dev data (the figures of docs/encoders.md).

Run: ``python benchmarks/encoder_quality.py [--data ../shared/data] [--encoders minilm,static]
[--memory KadaneDialMemory ...] [--cache /tmp/vectors.npz] [--json out.json]``; ``--encoders mixed``:
MiniLM's turn vectors with the static encoder's question vectors (:class:`MixedEmbedder`)

For every encoder and memory (KadaneDialMemory, TopicThreadMemory, DiscourseTreeMemory, embedded
defaults otherwise), replays LoCoMo dev and MT-Bench+ dev as ``ctxmgmt bench`` does
(``ctxmgmt.app.bench.runner.run_memory``: every turn added, then every question selected with no
budget) and reports evidence recall, answer containment and token ratio; for
DiscourseTreeMemory also the embedded decider's topic-shift detection on TIAGE dev (Pk,
boundary F1; ``benchmarks/discourse_tree.py``'s protocol). ``--cache`` keeps MiniLM's vectors on
disk between runs (by text), so comparing settings does not re-embed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from ctxmgmt.app.bench.data import load_dialogues  # noqa: E402
from ctxmgmt.app.bench.runner import run_memory  # noqa: E402
from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder  # noqa: E402
from ctxmgmt.components.static_embedder import StaticEmbedder  # noqa: E402
from ctxmgmt.scoring.vectors import normalise  # noqa: E402
from ctxmgmt.strategies import DiscourseTreeStrategy, KadaneDialStrategy, TopicThreadStrategy  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
MEMORIES: dict[str, Any] = {
    "KadaneDialMemory": KadaneDialStrategy,
    "TopicThreadMemory": TopicThreadStrategy,
    "DiscourseTreeMemory": DiscourseTreeStrategy,
}


class CachedEmbedder:
    """An encoder with a text -> vector cache (optionally kept on disk); named as the encoder."""

    def __init__(self, inner: Any, path: Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        self.cache: dict[str, np.ndarray] = {}
        self.seconds = 0.0
        if path is not None and path.exists():
            with np.load(path) as data:
                self.cache = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if self.key(t) not in self.cache]
        if missing:
            start = time.perf_counter()
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[self.key(text)] = vector
            self.seconds += time.perf_counter() - start
        return normalise(np.vstack([self.cache[self.key(t)] for t in texts]))

    def save(self) -> None:
        if self.path is not None and self.cache:
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vectors=np.vstack([self.cache[k] for k in keys]))


class MixedEmbedder:
    """Turns embedded by ``documents`` (MiniLM), questions by ``queries`` (the static encoder).

    ``--encoders mixed``: how much of the static encoder's loss is its question vectors, were
    every turn's vector MiniLM's (the static model is fitted into MiniLM's space).
    """

    def __init__(self, documents: CachedEmbedder, queries: Any) -> None:
        self.documents, self.queries = documents, queries

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.documents.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(np.asarray(self.queries.embed([text])))[0]


def encoder(name: str) -> Any:
    if name == "minilm":
        return SentenceTransformerEmbedder()
    if name == "static":
        return StaticEmbedder()
    if name.startswith("static:"):  # static:ARRAYS.npz[,TOKENIZER.json]
        paths = name.split(":", 1)[1].split(",")
        return StaticEmbedder(*paths)
    raise SystemExit(f"unknown encoder {name!r}")


def discourse_module() -> Any:
    path = Path(__file__).with_name("discourse_tree.py")
    spec = importlib.util.spec_from_file_location("discourse_tree_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiage(data: Path, embedder: CachedEmbedder, params: dict[str, Any]) -> dict[str, float]:
    bench = discourse_module()
    dev = bench.load_tiage(data / "tiage_dev.json")
    return bench.score(dev, [bench.decider_shifts(t, embedder, params) for t, _ in dev])


def measure(
    data: Path,
    name: str,
    factory: Callable[[], Any],
    embedder: CachedEmbedder,
    files: Sequence[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for file in files:
        dialogues = load_dialogues(data / file)
        summary = run_memory(name, factory, dialogues).summary()
        out[file] = {
            k: round(summary[k], 4)
            for k in ("evidence_recall", "answer_containment", "token_ratio", "add_ms_p50", "select_ms_p50")
            if summary[k] is not None and summary[k] == summary[k]  # no NaN (no answers to contain)
        }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--encoders",
        default="minilm,static",
        help="comma-separated: minilm, static, static:PATH, mixed",
    )
    parser.add_argument("--memory", action="append", help="only this memory (repeatable)")
    parser.add_argument("--files", default="locomo_dev.json,mtbenchplus_dev.json")
    parser.add_argument("--no-tiage", action="store_true", help="skip TIAGE topic shifts")
    parser.add_argument("--cache", type=Path, default=None, help="npz file keeping MiniLM's vectors")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass
    files = [f for f in args.files.split(",") if f]
    result: dict[str, Any] = {"load_average": os.getloadavg()}
    for enc in args.encoders.split(","):
        minilm = enc in ("minilm", "mixed")
        embedder = CachedEmbedder(encoder("minilm" if minilm else enc), args.cache if minilm else None)
        component: Any = embedder if enc != "mixed" else MixedEmbedder(embedder, StaticEmbedder())
        for memory, cls in MEMORIES.items():
            if args.memory and memory not in args.memory:
                continue

            def factory(cls: Any = cls, component: Any = component) -> Any:
                return cls(embedder=component)

            row = measure(args.data, memory, factory, embedder, files)
            if memory == "DiscourseTreeMemory" and not args.no_tiage:
                from ctxmgmt.components.decider import EmbeddedDecider

                d = EmbeddedDecider()
                params = {"theta_topic": d.theta_topic, "theta_switch": d.theta_switch}
                row["tiage_dev"] = {k: round(v, 4) for k, v in tiage(args.data, embedder, params).items()}
            result[f"{memory} / {enc}"] = row
            print(f"{memory} / {enc}: {json.dumps(row)}", flush=True)
        result[f"encode seconds / {enc}"] = round(embedder.seconds, 2)
        embedder.save()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
