"""TopicThreadMemory on LoCoMo dev, side by side with KadaneDialMemory in the same run.

Run: ``python benchmarks/topic_thread.py [--data ../shared/data/locomo_dev.json] [--ratio 0.12]
[--json out.json]``.

Both memories replay each dialogue turn by turn (each ``add`` timed) and answer its
questions with ``select(question, budget=floor(ratio * history tokens))``, so both stay
within the same token ratio. Reported per memory: evidence recall (gold turns present
verbatim), answer containment (gold answer string anywhere in the context, summaries
included), mean token ratio, per-turn ``add`` overhead p50/p95 (embedded compressor, no LLM)
and per-query ``select`` p50. For TopicThreadMemory also the slot count over the
conversation: slots at 25/50/75/100% of each dialogue and the fitted exponent ``b`` of
``slots ~ turns^b`` (b < 1: sub-linear growth).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from ctxmgmt.app.bench.data import Dialogue, load_locomo  # noqa: E402
from ctxmgmt.app.bench.metrics import answer_contained, evidence_recall, mean, percentile  # noqa: E402
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy  # noqa: E402
from ctxmgmt.strategies.topic_thread import TopicThreadStrategy  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"


def growth_exponent(counts: list[int]) -> float:
    """Least-squares slope of log(slots) against log(turns) over the conversation."""
    x = np.log(np.arange(1, len(counts) + 1, dtype=np.float64))
    y = np.log(np.maximum(np.asarray(counts, dtype=np.float64), 1.0))
    if len(counts) < 2:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])


def run(name: str, factory, dialogues: list[Dialogue], ratio: float) -> dict:
    add_ms: list[float] = []
    select_ms: list[float] = []
    recalls: list[float | None] = []
    contained: list[float | None] = []
    ratios: list[float] = []
    growth: list[dict] = []
    for dialogue in dialogues:
        strategy = factory()
        for turn in dialogue.turns:
            start = time.perf_counter()
            strategy.add(turn)
            add_ms.append((time.perf_counter() - start) * 1000)
        budget = max(1, math.floor(ratio * strategy.total_tokens))
        for question in dialogue.questions:
            start = time.perf_counter()
            context = strategy.select(question.text, budget=budget)
            select_ms.append((time.perf_counter() - start) * 1000)
            recalls.append(evidence_recall(question.evidence, context.turn_indices))
            hit = answer_contained(question.answer, context.text())
            contained.append(None if hit is None else float(hit))
            ratios.append(context.tokens / strategy.total_tokens)
        if isinstance(strategy, TopicThreadStrategy):
            counts = strategy.slot_growth
            n = len(counts)
            growth.append(
                {
                    "dialogue": dialogue.id,
                    "turns": n,
                    "slots_at_25_50_75_100pct": [
                        counts[max(0, math.ceil(n * q) - 1)] for q in (0.25, 0.5, 0.75, 1)
                    ],
                    "exponent": round(growth_exponent(counts), 3),
                    "events": strategy.counts,
                }
            )
    out = {
        "memory": name,
        "questions": len(recalls),
        "evidence_recall": round(mean(recalls), 4),
        "answer_containment": round(mean(contained), 4),
        "token_ratio": round(mean(ratios), 4),
        "max_token_ratio": round(max(ratios), 4),
        "add_ms_p50": round(percentile(add_ms, 50), 2),
        "add_ms_p95": round(percentile(add_ms, 95), 2),
        "select_ms_p50": round(percentile(select_ms, 50), 2),
    }
    if growth:
        out["slot_growth"] = growth
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--ratio", type=float, default=0.12, help="token budget / history tokens")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--limit", type=int, default=None, help="first N dialogues only")
    args = parser.parse_args(argv)
    dialogues = load_locomo(args.data)[: args.limit]
    KadaneDialStrategy().embedder.embed(["warm up"])
    results = [
        run("KadaneDialMemory", KadaneDialStrategy, dialogues, args.ratio),
        run("TopicThreadMemory", TopicThreadStrategy, dialogues, args.ratio),
    ]
    report = {"data": args.data, "ratio": args.ratio, "results": results}
    text = json.dumps(report, indent=2)
    print(text)  # noqa: T201
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
