"""KadaneDial (``--memory``: DiscourseTree, TopicThread too) against top-k MiniLM and BM25.

Tuning KadaneDial on LongMemEval (issue 34) replays ~15,000 long turns per pass; embedding them
with MiniLM takes most of a ``ctxmgmt bench`` run. This script runs the same replay
(:func:`ctxmgmt.app.bench.runner.run_all`: every turn added, a dated question added as a user turn,
then ``select``) for KadaneDial and the equal-token baselines only, with one MiniLM whose
vectors are kept in an SQLite file (``--cache``, default ``/tmp/ctxmgmt_kd_cache.sqlite``), so
the second run of a variant embeds only the texts it has not seen. Vectors of a batch come from
``SentenceTransformer.encode`` (float32), those of a single new text from the frozen float16
graph; they agree within 5e-4 in cosine (``components/frozen_encoder.py``).

Usage::

    python benchmarks/kadanedial_dev.py ../shared/data/longmemeval_s_dev.json.gz --budget 4000
    python benchmarks/kadanedial_dev.py ../shared/data/locomo_dev.json --set tau=0.5
    python benchmarks/kadanedial_dev.py DATA --items 0:20 --no-baselines --json out.json
    python benchmarks/kadanedial_dev.py DATA --budget 4000 --memory DiscourseTree --memory TopicThread

``--set NAME=VALUE`` passes a KadaneDial parameter (repeatable). With ``--budget`` every row
gets that budget; without it the baselines get KadaneDial's tokens per question (equal tokens).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from ctxmgmt.app.bench.baselines import Baseline, LastKStrategy, TopKBM25Strategy, TopKDenseStrategy  # noqa: E402
from ctxmgmt.app.bench.data import Dialogue, load_dialogues  # noqa: E402
from ctxmgmt.app.bench.runner import MemoryResult, run_all  # noqa: E402
from ctxmgmt.components.embedder import default_embedder  # noqa: E402
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy  # noqa: E402
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy  # noqa: E402
from ctxmgmt.strategies.topic_thread import TopicThreadStrategy  # noqa: E402

DEFAULT_CACHE = "/tmp/ctxmgmt_kd_cache.sqlite"
OTHERS = {"DiscourseTree": DiscourseTreeStrategy, "TopicThread": TopicThreadStrategy}
"""Other embedding memories ``--memory`` adds, each with its defaults and the cached MiniLM."""


class DiskCachedEmbedder:
    """The bundled MiniLM with its vectors kept in SQLite, keyed by the SHA-1 of the text."""

    def __init__(self, path: str) -> None:
        self.base = default_embedder()
        self.name = self.base.name
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, b BLOB)")
        self.embedded = 0

    @property
    def dimension(self) -> int | None:
        return self.base.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for k, b in self.db.execute(f"SELECT k, b FROM v WHERE k IN ({marks})", chunk):
                found[k] = np.frombuffer(b, dtype=np.float32)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            vectors = self.base.embed([text_of[k] for k in missing])
            self.embedded += len(missing)
            rows = [
                (k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(missing, vectors, strict=True)
            ]
            self.db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
            self.db.commit()
            found.update((k, np.asarray(v, dtype=np.float32)) for k, v in zip(missing, vectors, strict=True))
        return np.stack([found[k] for k in keys])


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"none": None, "true": True, "false": False}.get(text.lower(), text)


def warm(
    embedder: DiskCachedEmbedder, dialogues: Sequence[Dialogue], params: dict[str, Any], *, dense: bool
) -> None:
    """Embed every text the rows will ask for in large batches (fills the disk cache)."""
    strategy = KadaneDialStrategy(embedder=embedder, **params)
    for dialogue in dialogues:
        strategy.prepare(dialogue.turns)
        if dense:
            embedder.embed([t.text for t in dialogue.turns])  # top-k dense's whole-turn vectors


def table(results: Sequence[MemoryResult], *, categories: bool) -> str:
    lines = []
    head = f"{'row':<40} {'evid':>6} {'sess':>6} {'ans':>6} {'tokens':>7} {'ratio':>7} {'sel p50':>8}"
    lines.append(head)
    for r in results:
        s = r.summary()
        tokens = np.mean([q.tokens for q in r.questions]) if r.questions else 0
        lines.append(
            f"{r.memory:<40} {s['evidence_recall']:6.3f} {s['session_recall']:6.3f} "
            f"{s['answer_containment']:6.3f} {tokens:7.0f} {s['token_ratio']:7.3f} {s['select_ms_p50']:8.1f}"
        )
    if categories:
        cats = sorted({q.category for r in results for q in r.questions})
        lines.append("")
        lines.append(f"{'evidence / session recall':<40} " + " ".join(f"{c[:14]:>14}" for c in cats))
        for r in results:
            by = r.by_category()
            cells = [f"{by[c]['evidence_recall']:.2f}/{by[c]['session_recall']:.2f}" for c in cats]
            lines.append(f"{r.memory:<40} " + " ".join(f"{c:>14}" for c in cells))
        lines.append(f"{'questions':<40} " + " ".join(f"{by[c]['questions']:>14.0f}" for c in cats))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data")
    parser.add_argument("--budget", type=int)
    parser.add_argument("--items", default="", help="START:END[:STEP] slice of the dialogues")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL:NAME=VALUE,...")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--last-k", action="store_true", help="also the last-k row")
    parser.add_argument(
        "--no-dense", action="store_true", help="no top-k MiniLM row (its whole-turn vectors)"
    )
    parser.add_argument(
        "--memory",
        action="append",
        default=[],
        choices=sorted(OTHERS),
        help="also this memory, with its defaults and the cached MiniLM (repeatable)",
    )
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    dialogues = load_dialogues(args.data)
    if args.items:
        parts = [int(p) if p else None for p in args.items.split(":")]
        dialogues = dialogues[slice(*parts)]
    params = {k: _value(v) for k, _, v in (s.partition("=") for s in args.set)}
    embedder = DiskCachedEmbedder(args.cache)
    started = time.perf_counter()
    warm(embedder, dialogues, params, dense=not (args.no_baselines or args.no_dense))
    warm_s = time.perf_counter() - started

    memories: dict[str, Any] = {"KadaneDial": lambda: KadaneDialStrategy(embedder=embedder, **params)}
    for spec in args.variant:
        label, _, body = spec.partition(":")
        extra = {k: _value(v) for k, _, v in (p.partition("=") for p in body.split(",") if p)}
        merged = {**params, **extra}
        memories[f"KadaneDial {label}"] = lambda merged=merged: KadaneDialStrategy(
            embedder=embedder, **merged
        )
    for name in args.memory:
        memories[name] = lambda cls=OTHERS[name]: cls(embedder=embedder)
    rows: list[Baseline] = []
    if not args.no_baselines:
        rows = [
            Baseline("top-k dense (MiniLM)", lambda: TopKDenseStrategy(embedder=embedder)),
            Baseline("top-k BM25", TopKBM25Strategy),
        ]
        if args.no_dense:
            rows = rows[1:]
        if args.last_k:
            rows.insert(0, Baseline("last-k", LastKStrategy))
    results = run_all(dialogues, memories=memories, baselines=rows, full_history=False, budget=args.budget)
    total_s = time.perf_counter() - started
    questions = sum(len(d.questions) for d in dialogues)
    print(
        f"{args.data} items {args.items or 'all'} ({len(dialogues)} dialogues, {questions} questions), "
        f"budget {args.budget}, params {params}; warm {warm_s:.0f} s, total {total_s:.0f} s, "
        f"embedded {embedder.embedded}, load {os.getloadavg()[0]:.1f}"
    )
    print(table(results, categories=True))
    if args.json:
        payload = {
            "command": " ".join(sys.argv),
            "params": params,
            "load": os.getloadavg(),
            "rows": [
                {
                    "summary": r.summary(),
                    "by_category": r.by_category(),
                    "questions": [vars(q) for q in r.questions],
                }
                for r in results
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
