"""What one question's embedding costs, encoder by encoder: the floor under a memory's ``get``.

Run: ``python benchmarks/query_encoder.py [--calls 60] [--json out.json]``

Every memory that embeds (KadaneDial, TopicThread, DiscourseTree) embeds the question on its
``get`` path (KadaneDial twice: the question and its focused form), so no ``get`` is faster than
one query embedding. Timed here, p50 / p95 over ``--calls`` short LoCoMo-style questions (12-16
word pieces), each encoder loaded and warmed first:

- ``minilm``: the default embedder (``SentenceTransformerEmbedder().embed``; torch, its threads);
- ``minilm-onnx-1t`` / ``minilm-onnx``: the same model exported to ONNX and run by ONNX Runtime
  with 1 intra-op thread / torch's thread count (``session.run`` only: tokenisation excluded);
- ``minilm-int8-1t``: that ONNX graph with its weights quantised to int8
  (``onnxruntime.quantization.quantize_dynamic``), 1 thread (``session.run`` only);
- ``static``: the shipped static encoder (tokenisation and pooling; no torch).

Nothing else should run meanwhile; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = [
    "What did Caroline research after the support group meeting?",
    "When did Melanie paint a sunrise with her kids?",
    "What is Jon's favourite hobby these days and why?",
    "Where did Gina say she would open her dance studio?",
]


def timed(fn: Callable[[str], Any], calls: int) -> dict[str, float]:
    """p50 / p95 milliseconds of ``fn`` over ``calls`` questions (after one warm-up call)."""
    fn(QUESTIONS[0])
    times = []
    for k in range(calls):
        start = time.perf_counter()
        fn(QUESTIONS[k % len(QUESTIONS)])
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"p50_ms": round(times[len(times) // 2], 2), "p95_ms": round(times[int(len(times) * 0.95)], 2)}


def onnx_sessions() -> dict[str, Callable[[str], Any]]:
    """ONNX Runtime sessions of the bundled MiniLM: float32 (1 thread, torch's) and int8 (1 thread)."""
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ctxmgmt.components import sentence_transformer_embedder
    from ctxmgmt.components.onnx_encoder import export_onnx

    model = sentence_transformer_embedder._load_sentence_transformer(
        sentence_transformer_embedder.bundled_minilm_path()
    )
    tokenizer = model.tokenizer
    folder = Path(tempfile.mkdtemp())
    (folder / "f32.onnx").write_bytes(export_onnx(model))
    quantize_dynamic(str(folder / "f32.onnx"), str(folder / "int8.onnx"), weight_type=QuantType.QInt8)

    def session(path: Path, threads: int) -> Callable[[str], Any]:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        run = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run
        encoded = {q: tokenizer(q, return_tensors="np") for q in QUESTIONS}

        def embed(question: str) -> Any:
            batch = encoded[question]
            ids = np.asarray(batch["input_ids"], dtype=np.int64)
            return run(None, {"ids": ids, "mask": np.asarray(batch["attention_mask"], dtype=np.int64)})

        return embed

    return {
        "minilm-onnx-1t": session(folder / "f32.onnx", 1),
        "minilm-onnx": session(folder / "f32.onnx", torch.get_num_threads()),
        "minilm-int8-1t": session(folder / "int8.onnx", 1),
    }


def main() -> None:
    """Time every encoder and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--json")
    args = parser.parse_args()
    from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder
    from ctxmgmt.components.static_embedder import StaticEmbedder

    minilm, static = SentenceTransformerEmbedder(), StaticEmbedder()
    encoders: dict[str, Callable[[str], Any]] = {
        "minilm": lambda q: minilm.embed([q]),
        **onnx_sessions(),
        "static": lambda q: static.embed([q]),
    }
    rows = []
    for name, fn in encoders.items():
        rows.append({"encoder": name, **timed(fn, args.calls)})
        print(json.dumps(rows[-1]))  # noqa: T201
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")  # noqa: T201
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
