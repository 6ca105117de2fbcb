"""The default embedder's backends side by side: vectors, build time and speed.

Run: ``python benchmarks/encoder.py [--data ../shared/data/locomo_dev.json] [--repeats 30]``.

In one process, on the bundled all-MiniLM-L6-v2 with torch's default thread count:

- vectors: cosine of each backend's vector to the float model's (``SentenceTransformer.encode``)
  over every LoCoMo dev turn text, min and mean, and the largest difference of a component
  (the default frozen graph keeps float16 Linear weights); for int8 dynamic quantisation (measured,
  not offered) also how far a text's vector moves when it is embedded alone instead of in a
  batch of 64 (activations are quantised per batch);
- build: seconds to build each backend once (trace and freeze, export and load, quantise);
- speed: p50 ms of a query (one short text) and of a turn (one text of about 120 tokens),
  and turns/s over 1,000 LoCoMo turns in batches of 64.

Speed depends on the machine's load: the script prints the load average beside it.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ctxmgmt.app.bench.data import load_locomo  # noqa: E402
from ctxmgmt.components.frozen_encoder import FrozenEncoder  # noqa: E402
from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder  # noqa: E402
from ctxmgmt.scoring.vectors import normalise  # noqa: E402

QUERY = "What did Caroline research for her adoption plans?"
BATCH = 64


def cosines(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Min and mean row cosine of two unit-row matrices."""
    rows = (normalise(a) * normalise(b)).sum(1)
    return float(rows.min()), float(rows.mean())


def p50_ms(encode: Callable[[list[str]], Any], texts: list[str], repeats: int) -> float:
    encode(texts)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        encode(texts)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def turns_per_second(encode: Callable[[list[str]], Any], texts: Sequence[str]) -> float:
    start = time.perf_counter()
    encode(list(texts))
    return len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/locomo_dev.json")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per p50 (default 30)")
    args = parser.parse_args()

    texts = [turn.text for dialogue in load_locomo(args.data) for turn in dialogue.turns]
    float_embedder = SentenceTransformerEmbedder()
    model = float_embedder.model
    tokens = [len(model.tokenizer(t)["input_ids"]) for t in texts]
    turn = texts[int(np.argmin([abs(n - 120) for n in tokens]))]
    print(
        f"{len(texts)} LoCoMo dev turn texts, {statistics.median(tokens):.0f} tokens median; "
        f"torch threads {torch.get_num_threads()}"
    )

    builds: dict[str, float] = {}
    start = time.perf_counter()
    frozen = FrozenEncoder(model)
    builds["torch (frozen graph, float16 weights)"] = time.perf_counter() - start
    start = time.perf_counter()
    frozen32 = FrozenEncoder(model, half_weights=False)
    builds["torch (frozen graph, float32 weights)"] = time.perf_counter() - start
    onnx_embedder = SentenceTransformerEmbedder(backend="onnx")
    start = time.perf_counter()
    onnx = onnx_embedder.onnx_encoder
    builds["onnx"] = time.perf_counter() - start
    assert onnx is not None
    start = time.perf_counter()
    quantised_model = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(
            quantised_model[0].auto_model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
        int8 = FrozenEncoder(quantised_model, half_weights=False)
    builds["int8 dynamic (frozen graph)"] = time.perf_counter() - start

    reference = model.encode(texts, batch_size=BATCH, convert_to_numpy=True)
    encoders: dict[str, Callable[[list[str]], np.ndarray]] = {
        "torch (frozen graph, float16 weights)": lambda batch: frozen.encode(batch, BATCH),
        "torch (frozen graph, float32 weights)": lambda batch: frozen32.encode(batch, BATCH),
        "torch encode": lambda batch: model.encode(batch, batch_size=BATCH, convert_to_numpy=True),
        "onnx": lambda batch: onnx.encode(batch, BATCH),
        "int8 dynamic (frozen graph)": lambda batch: int8.encode(batch, BATCH),
    }
    print("\nvectors against the float model (over every turn text): cosine min / mean, max abs difference")
    for name, encode in encoders.items():
        vectors = encode(texts)
        low, mean = cosines(vectors, reference)
        largest = float(np.abs(normalise(vectors) - normalise(reference)).max())
        print(f"  {name:38s} {low:.6f} / {mean:.6f}  {largest:.1e}")
    alone = np.vstack([int8.encode([t], BATCH) for t in texts[:200]])
    low, mean = cosines(alone, int8.encode(texts[:200], BATCH))
    print(f"  int8 alone vs batched (200)  {low:.6f} / {mean:.6f}")

    print("\nbuild once per process, s")
    for name, seconds in builds.items():
        print(f"  {name:38s} {seconds:.1f}")

    thousand = texts[:1000]
    print(f"\nspeed (load average {os.getloadavg()[0]:.2f}): query p50 ms, turn p50 ms, turns/s over 1,000")
    for name, encode in encoders.items():
        query_ms = p50_ms(encode, [QUERY], args.repeats)
        turn_ms = p50_ms(encode, [turn], args.repeats)
        rate = turns_per_second(encode, thousand)
        print(f"  {name:38s} {query_ms:7.1f} {turn_ms:7.1f} {rate:7.0f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
