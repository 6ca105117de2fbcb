"""How fast the bundled MiniLM can embed on this machine at best: a compute floor, against measured.

Run: ``python benchmarks/encoder_floor.py [--turns 1000] [--data demo|locomo] [--repeats 5]
[--json encoder_floor.json]``.

Embedding is most of a cold start (every stored turn) and of an ``add`` (one new turn). This
script asks whether a faster implementation could meet a time target, by bounding what any
float32 implementation of the model must spend:

- **work**: the multiply-adds of the transformer for each text, from its token count and the
  model's configuration: per layer and token, the four attention projections (4 d^2), the
  feed-forward pair (2 d f) and the attention products over the text (2 L d for a text of L
  tokens); two floating-point operations per multiply-add. Embedding lookups, layer norms,
  softmax and GELU are left out, so the floor is low.
- **throughput**: the best float32 GFLOP/s that torch's matrix multiply reaches on this
  machine, with its default threads, at the model's own shapes (a batch of 64 texts of the
  median length against each projection), best of ``--repeats`` runs.
- **floor** = work / throughput, for the whole conversation (a cold start, padding ignored)
  and for one turn of median length (an ``add``), beside the measured time of the default
  embedder (``SentenceTransformerEmbedder().embed``: batches of 64 through
  ``SentenceTransformer.encode`` for the conversation, the frozen float16-weight graph for one
  turn, p50 of ``--repeats`` calls).

Texts: ``demo`` (default) is the conversation ``benchmarks/adapter_overhead.py`` and
``scaling.py`` use (the shipped demo repeated with numbered copies); ``locomo`` is the turns of
the LoCoMo dev dialogues one after another (``../shared/data/locomo_dev.json``). A turn's text is
what KadaneDial and TopicThread embed (``Turn.text``). Nothing else should run meanwhile; the
load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encoder import p50_ms  # noqa: E402  (the scripts next to this one)
from scaling import conversation  # noqa: E402

from ctxmgmt.app.bench.data import load_locomo  # noqa: E402
from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder  # noqa: E402

BATCH = 64
"""Texts per forward pass of the default embedder's batches."""


def texts_of(data: str, turns: int, locomo: str) -> list[str]:
    """The turn texts of ``turns`` turns of ``data`` (``demo`` or ``locomo``)."""
    if data == "demo":
        return [t.text for t in conversation(turns)]
    texts = [t.text for dialogue in load_locomo(locomo) for t in dialogue.turns]
    return (texts * (turns // len(texts) + 1))[:turns]


def flops(tokens: int, config: Any) -> float:
    """Floating-point operations of the transformer for one text of ``tokens`` tokens (see above)."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_token = 4 * d * d + 2 * d * f + 2 * tokens * d
    return 2.0 * layers * tokens * per_token


def matmul_gflops(rows: int, config: Any, repeats: int) -> float:
    """Best float32 GFLOP/s of torch's matmul on (rows x d) @ (d x 3d), (d x f) and (f x d)."""
    d, f = config.hidden_size, config.intermediate_size
    shapes = [(rows, d, 3 * d), (rows, d, f), (rows, f, d)]
    pairs = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in shapes]
    work = sum(2.0 * m * k * n for m, k, n in shapes)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first run warms up
            start = time.perf_counter()
            for a, b in pairs:
                torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
    return work / best / 1e9


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="turns of the conversation (default 1000)")
    parser.add_argument("--data", choices=("demo", "locomo"), default="demo")
    parser.add_argument("--locomo", default="../shared/data/locomo_dev.json", help="LoCoMo dev file")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each timing (default 5)")
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    embedder = SentenceTransformerEmbedder()
    model = embedder.model
    config = model[0].auto_model.config
    texts = texts_of(args.data, args.turns, args.locomo)
    limit = int(model.max_seq_length)
    tokens = [min(len(ids), limit) for ids in model.tokenizer(texts)["input_ids"]]
    median_tokens = int(statistics.median(tokens))
    one_turn = texts[min(range(len(texts)), key=lambda i: abs(tokens[i] - median_tokens))]
    load_before = os.getloadavg()[0]

    gflops = matmul_gflops(BATCH * median_tokens, config, args.repeats)
    work_all = sum(flops(n, config) for n in tokens)
    work_one = flops(median_tokens, config)
    start = time.perf_counter()
    embedder.embed(texts)
    measured_all = time.perf_counter() - start
    measured_one = p50_ms(embedder.embed, [one_turn], max(args.repeats, 10))

    figures = {
        "data": args.data,
        "turns": len(texts),
        "tokens_median": median_tokens,
        "tokens_total": sum(tokens),
        "torch_threads": torch.get_num_threads(),
        "matmul_gflops": round(gflops, 1),
        "gflop_per_turn_median": round(work_one / 1e9, 3),
        "conversation_floor_s": round(work_all / gflops / 1e9, 2),
        "conversation_measured_s": round(measured_all, 2),
        "turn_floor_ms": round(work_one / gflops / 1e6, 2),
        "turn_measured_p50_ms": round(measured_one, 2),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    print(
        f"{figures['turns']} {args.data} turns, {median_tokens} tokens median "
        f"({figures['tokens_total']} in all); torch threads {figures['torch_threads']}; "
        f"load average {load_before:.2f}"
    )
    print(f"float32 matmul at the model's shapes: {gflops:.1f} GFLOP/s (best of {args.repeats})")
    print(f"{'':34s} {'floor':>10s} {'measured':>10s}")
    print(
        f"{'embed the conversation (cold)':34s} {figures['conversation_floor_s']:9.2f}s "
        f"{figures['conversation_measured_s']:9.2f}s"
    )
    print(
        f"{'embed one median turn (add)':34s} {figures['turn_floor_ms']:8.2f}ms "
        f"{figures['turn_measured_p50_ms']:8.2f}ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    main()
