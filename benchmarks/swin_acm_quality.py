"""SWin, ACM and the structure memories' fast twins with chosen parameters, beside top-k BM25.

Run: ``python benchmarks/swin_acm_quality.py DATA [--budget 4000] [--every 3] [--set swin:NAME=VALUE]``.
Replays each dialogue of ``DATA`` (LoCoMo, MT-Bench+ or LongMemEval, as ``ctxmgmt bench``
loads them) through :func:`ctxmgmt.app.bench.runner.run_memory` (a dated question is added as a
user turn first, as ``ctxmgmt bench`` does) for these rows (``--only`` picks some):

- ``swin``: ``SWinStrategy`` with the ``--set swin:...`` parameters (defaults otherwise);
- ``acm``: ``ACMStrategy`` with the ``--set acm:...`` parameters; with ``--budget`` its
  cascade runs at that budget (``token_budget=--budget``, as the LlamaIndex ``token_limit`` and
  LangChain ``max_token_limit`` feed it);
- ``acm2000``: ``ACMStrategy`` at its default cascade budget selected at ``--budget`` (what
  ``ctxmgmt bench --budget`` measures);
- ``bm25``: top-k BM25 turns (needs ``--budget``; the issue 34 baseline);
- ``dt``, ``tt``: ``DiscourseTreeStrategy`` / ``TopicThreadStrategy`` with the ``--set dt:...`` /
  ``--set tt:...`` parameters (MiniLM: slow on LongMemEval);
- ``dt_twin``, ``tt_twin``: their fast twins (``Strategy.fast_twin`` given the bundled MiniLM for
  the questions, as a conversation builds them), which answer a history asked at once;
  ``--twin-decider-shift X`` raises every similarity threshold of DiscourseTree's twin's decider
  by ``X`` (an experiment: the static encoder's cosines run higher than MiniLM's).

Without ``--budget`` the memories choose their own size (``ctxmgmt bench`` without
``--budget``). Prints evidence recall, session recall, answer containment (``_abs`` items
and answers of 3 characters or fewer excluded, as ``ctxmgmt bench``) and mean context tokens,
overall and answer containment per question category. ``--every k`` takes every k-th
dialogue (on LongMemEval, sorted by question type, a stratified subset).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ctxmgmt.app.bench.baselines import TopKBM25Strategy  # noqa: E402
from ctxmgmt.app.bench.data import load_dialogues  # noqa: E402
from ctxmgmt.app.bench.runner import run_memory  # noqa: E402
from ctxmgmt.components.decider import SHIFT_FEATURES, SHIFT_MODEL, EmbeddedDecider  # noqa: E402
from ctxmgmt.components.decider.embedded import THETA_SWITCH, THETA_TOPIC, THETA_UNRELATED  # noqa: E402
from ctxmgmt.components.embedder import default_embedder  # noqa: E402
from ctxmgmt.strategies import ACMStrategy, DiscourseTreeStrategy, SWinStrategy, TopicThreadStrategy  # noqa: E402
from ctxmgmt.strategies.base import Strategy  # noqa: E402


def shifted(twin: DiscourseTreeStrategy, shift: float) -> DiscourseTreeStrategy:
    """``twin`` with a decider whose similarity thresholds (and shift-model means) are ``shift`` higher."""
    if shift:
        similarities = {SHIFT_FEATURES.index(f) for f in ("centroid", "recent", "best", "window", "other")}
        model = dict(SHIFT_MODEL)
        model["mean"] = [m + shift * (i in similarities) for i, m in enumerate(SHIFT_MODEL["mean"])]
        twin.decider = EmbeddedDecider(
            theta_topic=THETA_TOPIC + shift,
            theta_switch=THETA_SWITCH + shift,
            theta_unrelated=THETA_UNRELATED + shift,
            shift_model=model,
        )
    return twin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data")
    parser.add_argument("--items", type=int, default=0, help="first N dialogues (after --every)")
    parser.add_argument("--every", type=int, default=1, help="every k-th dialogue")
    parser.add_argument("--budget", type=int, default=0, help="fixed budget per question (0: none)")
    parser.add_argument(
        "--only", action="append", help="only these rows (swin, acm, acm2000, bm25, dt, dt_twin, tt, tt_twin)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="MEMORY:NAME=VALUE")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--twin-decider-shift", type=float, default=0.0, help="see the module docstring")
    args = parser.parse_args()
    params: dict[str, dict[str, Any]] = {"swin": {}, "acm": {}, "dt": {}, "tt": {}}
    for item in args.set:
        owner, _, pair = item.partition(":")
        name, _, value = pair.partition("=")
        params[owner][name] = json.loads(value)
    dialogues = load_dialogues(Path(args.data))[:: args.every]
    if args.items:
        dialogues = dialogues[: args.items]
    b = args.budget or None
    acm_params = {**({"token_budget": b} if b else {}), **params["acm"]}
    rows: dict[str, tuple[str, Callable[[], Strategy]]] = {
        "swin": ("SWinSummaryBuffer", lambda: SWinStrategy(**params["swin"])),
        "acm": ("ACMTieredBuffer", lambda: ACMStrategy(**acm_params)),
        "acm2000": ("ACMTieredBuffer (token_budget=2000)", lambda: ACMStrategy(**params["acm"])),
        "bm25": ("top-k BM25 turns", TopKBM25Strategy),
        "dt": ("DiscourseTreeMemory", lambda: DiscourseTreeStrategy(**params["dt"])),
        "dt_twin": (
            "DiscourseTree's fast twin",
            lambda: shifted(
                DiscourseTreeStrategy(**params["dt"]).fast_twin(default_embedder()), args.twin_decider_shift
            ),
        ),
        "tt": ("TopicThreadMemory", lambda: TopicThreadStrategy(**params["tt"])),
        "tt_twin": (
            "TopicThread's fast twin",
            lambda: TopicThreadStrategy(**params["tt"]).fast_twin(default_embedder()),
        ),
    }
    chosen = args.only or (list(rows) if b else ["swin", "acm"])
    budgets = {d.id: [b] * len(d.questions) for d in dialogues} if b else None
    out: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/swin_acm_quality.py", *sys.argv[1:]]),
        "dialogues": len(dialogues),
        "load": os.getloadavg()[0],
    }
    print(f"{len(dialogues)} dialogues, budget {b}, params {params}, load {os.getloadavg()[0]:.2f}")
    print(f"{'memory':36} {'evidence':>8} {'session':>8} {'answer':>7} {'tokens':>7} {'s':>6}")
    per_type: dict[str, dict[str, float]] = {}
    for key in chosen:
        name, factory = rows[key]
        start = time.perf_counter()
        mode = "question" if b else "none"
        result = run_memory(name, factory, dialogues, budgets=budgets, budget_mode=mode)
        seconds = time.perf_counter() - start
        s = result.summary()
        s["mean_tokens"] = sum(q.tokens for q in result.questions) / max(1, len(result.questions))
        session = s.get("session_recall")
        print(
            f"{name:36} {s['evidence_recall']:8.3f} "
            f"{session if isinstance(session, float) and not math.isnan(session) else float('nan'):8.3f} "
            f"{s['answer_containment']:7.3f} {s['mean_tokens']:7.0f} {seconds:6.0f}"
        )
        out[key] = s
        per_type[name] = {c: v["answer_containment"] for c, v in result.by_category().items()}
    categories = sorted({c for v in per_type.values() for c in v})
    print("\nanswer containment by category")
    print(f"{'memory':36} " + " ".join(f"{c[:12]:>12}" for c in categories))
    for name, values in per_type.items():
        print(f"{name:36} " + " ".join(f"{values.get(c, float('nan')):12.3f}" for c in categories))
    out["by_category"] = per_type
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
