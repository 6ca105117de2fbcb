"""DiscourseTreeMemory benchmark: topic-shift detection, MT-Bench+ evidence recall, overhead.

Run: ``python benchmarks/discourse_tree.py [--data ../shared/data] [--tune] [--json out.json]
[--only tiage|mtbench]``;
``--fit`` instead refits the embedded decider's shift model on ``tiage_train.json`` (gold
segments as the forest) and prints it (``ctxmgmt.components.decider.SHIFT_MODEL``).

1. **Topic shifts (TIAGE)**: every utterance of a TIAGE dialogue is selected for (the
   decision) and then added as one node, as in a chat; a topic decision ``create`` or
   ``switch`` of the embedded decider is a predicted shift.
   Pk (lower is better; k = half the mean reference segment length per dialogue, windows
   pooled over dialogues) and boundary F1 (exact positions, pooled) on ``tiage_dev.json``,
   next to a TextTiling-style baseline measured in the same run: cosine of the mean
   embedding of the ``k`` utterances before and after each gap, depth scores, a boundary
   where the depth is >= a threshold. ``--tune`` grid-searches both methods' parameters on
   ``tiage_train.json`` (boundary F1) and reports dev with the tuned values; without it the
   decider's defaults and the baseline's tuned values are used.
2. **MT-Bench+** (``mtbenchplus_dev.json``): replay each dialogue, then select for the final
   probe with no budget. Evidence recall counts a gold turn (a turn of a topic the probe names)
   only when its text is in the context verbatim; ``summary_credit_recall`` beside it also
   counts a gold turn whose node summary is in the summary block. Token ratio: context / full
   history, same counter. ``by_probe_type`` gives both recalls and the token ratio per probe
   type (conjunction, continuation, retrospection) for DiscourseTree, faithful DiscourseTree
   (``from_paper``), faithful KadaneDial and KadaneDial, measured in the same run.
3. **Overhead**: wall time per turn of ``select(query)`` + ``add(turn)`` (the memory's own
   work in a chat; no LLM) while replaying MT-Bench+, p50 and p95, default embedder on one
   torch thread; then the same replay with every vector cached (the tree's own work), and
   the machine's load average (the figures depend on it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from ctxmgmt import Message, Turn  # noqa: E402
from ctxmgmt.app.bench.data import Dialogue, load_mtbenchplus  # noqa: E402
from ctxmgmt.app.bench.metrics import percentile  # noqa: E402
from ctxmgmt.app.testing import CachingEmbedder  # noqa: E402
from ctxmgmt.components.decider import NEW_TOPIC_CUES, EmbeddedDecider, TopicView, has_cue  # noqa: E402
from ctxmgmt.components.embedder import default_embedder  # noqa: E402
from ctxmgmt.scoring.vectors import normalise  # noqa: E402
from ctxmgmt.strategies.base import Strategy  # noqa: E402
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy  # noqa: E402
from ctxmgmt.strategies.forest import WINDOW_NODES  # noqa: E402
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


class CachedEmbedder(CachingEmbedder):
    """The default embedder with a text -> vector cache (tuning re-reads the same utterances).

    Rows are scaled to unit length once more after the cache, as when the tuned figures were
    measured.
    """

    def __init__(self) -> None:
        super().__init__(default_embedder())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return normalise(super().embed(texts))


class FirstWords:
    """A cheap node summariser for the segmentation runs (node summaries do not affect decisions)."""

    uses_llm = False

    def summarize(self, previous: Sequence[str], window_text: str) -> list[str]:
        return [window_text[:80]]


# -- TIAGE --------------------------------------------------------------------------------
def load_tiage(path: Path) -> list[tuple[list[str], set[int]]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for utterances in raw.values():
        texts = [u[0].strip() or "..." for u in utterances]
        shifts = {i for i, u in enumerate(utterances) if i > 0 and str(u[1]) == "1"}
        out.append((texts, shifts))
    return out


def decider_shifts(texts: list[str], embedder: CachedEmbedder, params: dict[str, float]) -> set[int]:
    strategy = DiscourseTreeStrategy(
        embedder=embedder,
        decider=EmbeddedDecider(**params),
        summarizer=FirstWords(),
        token_counter=lambda t: len(t.split()),
    )
    for i, text in enumerate(texts):  # as in a chat: the query is decided on, then its turn added
        strategy.select(text)
        strategy.add(Turn(i, (Message("user", text),)))
    return {d.node for d in strategy.decisions if d.node > 0 and d.topic in ("create", "switch")}


def texttiling_shifts(texts: list[str], embedder: CachedEmbedder, k: int, threshold: float) -> set[int]:
    v = embedder.embed(texts)
    n = len(texts)
    if n < 2:
        return set()
    sims = []
    for gap in range(1, n):
        left = v[max(0, gap - k) : gap].mean(axis=0)
        right = v[gap : gap + k].mean(axis=0)
        sims.append(float(left @ right / (np.linalg.norm(left) * np.linalg.norm(right) + 1e-9)))
    out = set()
    for g, s in enumerate(sims):
        lpeak = s
        for x in reversed(sims[:g]):
            if x < lpeak:
                break
            lpeak = x
        rpeak = s
        for x in sims[g + 1 :]:
            if x < rpeak:
                break
            rpeak = x
        if (lpeak - s) + (rpeak - s) >= threshold:
            out.add(g + 1)
    return out


def segments(n: int, shifts: set[int]) -> list[int]:
    seg, out = 0, []
    for i in range(n):
        if i in shifts:
            seg += 1
        out.append(seg)
    return out


def score(dialogues: list[tuple[list[str], set[int]]], predicted: list[set[int]]) -> dict[str, float]:
    tp = fp = fn = 0
    errors = probes = 0
    for (texts, gold), pred in zip(dialogues, predicted, strict=True):
        tp += len(gold & pred)
        fp += len(pred - gold)
        fn += len(gold - pred)
        n = len(texts)
        ref, hyp = segments(n, gold), segments(n, pred)
        k = max(1, round(n / (len(gold) + 1) / 2))
        for i in range(n - k):
            probes += 1
            errors += (ref[i] == ref[i + k]) != (hyp[i] == hyp[i + k])
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "pk": round(errors / probes, 4) if probes else 0.0,
        "f1": round(f1, 4),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "predicted": tp + fp,
        "gold": tp + fn,
    }


DECIDER_GRID = {
    "theta_topic": [0.1, 0.15, 0.2, 0.25, 0.3, 0.35],
    "theta_switch": [0.4, 0.5, 0.6],
    "switch_margin": [0.05, 0.1, 0.2],
}
TILING_GRID = {"k": [1, 2, 3], "threshold": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4]}
TILING_DEFAULT = {"k": 2, "threshold": 0.2}
"""The baseline's values tuned on tiage_train.json (``--tune``: best boundary F1 0.454)."""


def gold_views(
    texts: list[str], shifts: set[int], embedder: CachedEmbedder
) -> list[tuple[str, list[TopicView]]]:
    """Per utterance after the first, the forest views a decider would get if the forest were
    the gold segmentation (one tree per segment, a chain of nodes; the latest segment active)."""
    vectors = embedder.embed(texts)
    segments: list[list[int]] = [[0]]
    out = []
    for i in range(1, len(texts)):
        q = vectors[i]
        views = []
        for sid, ids in enumerate(segments):
            block = vectors[ids]
            centroid, window = block.sum(axis=0), block[-WINDOW_NODES:].sum(axis=0)
            views.append(
                TopicView(
                    id=sid,
                    summary="",
                    similarity=float(centroid @ q / np.linalg.norm(centroid)),
                    recent=float(block[-1] @ q),
                    best=float((block @ q).max()),
                    nodes=len(ids),
                    active=sid == len(segments) - 1,
                    window=float(window @ q / np.linalg.norm(window)),
                    last_query=texts[ids[-1]],
                )
            )
        out.append((texts[i], views))
        if i in shifts:
            segments.append([i])
        else:
            segments[-1].append(i)
    return out


def fit_shift_model(
    train: list[tuple[list[str], set[int]]], embedder: CachedEmbedder, *, l2: float = 0.01
) -> dict[str, Any]:
    """Logistic regression of "utterance starts a topic" on the decider's shift features,
    over the gold segmentation of ``train`` (full-batch gradient descent, L2 ``l2``).

    Follow-ups and new-topic cues are left out: the decider's rules settle them before the
    model is asked."""
    decider = EmbeddedDecider()
    rows, labels = [], []
    for texts, shifts in train:
        for k, (query, views) in enumerate(gold_views(texts, shifts, embedder), start=1):
            active = next(v for v in views if v.active)
            if decider.is_follow_up(query) or has_cue(query, NEW_TOPIC_CUES):
                continue
            rows.append(decider.shift_features(query, active, [v for v in views if not v.active]))
            labels.append(float(k in shifts))
    x, y = np.asarray(rows), np.asarray(labels)
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / scale
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(3000):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        w -= 0.5 * (z.T @ (p - y) / len(y) + l2 * w)
        b -= 0.5 * float((p - y).mean())
    return {
        "mean": np.round(mean, 4).tolist(),
        "scale": np.round(scale, 4).tolist(),
        "weights": np.round(w, 3).tolist(),
        "bias": round(b, 3),
        "utterances": len(y),
    }


def tune(train: list[tuple[list[str], set[int]]], embedder: CachedEmbedder) -> dict[str, Any]:
    best_d: tuple[float, dict[str, float]] = (-1.0, {})
    for values in itertools.product(*DECIDER_GRID.values()):
        params = dict(zip(DECIDER_GRID, values, strict=True))
        result = score(train, [decider_shifts(t, embedder, params) for t, _ in train])
        if result["f1"] > best_d[0]:
            best_d = (result["f1"], params)
    best_t: tuple[float, dict[str, Any]] = (-1.0, {})
    for k, threshold in itertools.product(*TILING_GRID.values()):
        result = score(train, [texttiling_shifts(t, embedder, k, threshold) for t, _ in train])
        if result["f1"] > best_t[0]:
            best_t = (result["f1"], {"k": k, "threshold": threshold})
    return {
        "decider": best_d[1],
        "decider_train_f1": best_d[0],
        "tiling": best_t[1],
        "tiling_train_f1": best_t[0],
    }


def tiage(data: Path, embedder: CachedEmbedder, tuned: dict[str, Any] | None) -> dict[str, Any]:
    dev = load_tiage(data / "tiage_dev.json")
    d = EmbeddedDecider()
    decider_defaults = {
        "theta_topic": d.theta_topic,
        "theta_switch": d.theta_switch,
        "switch_margin": d.switch_margin,
    }
    params = tuned["decider"] if tuned else decider_defaults
    tiling = tuned["tiling"] if tuned else TILING_DEFAULT
    return {
        "dialogues": len(dev),
        "decider_params": params,
        "embedded_decider": score(dev, [decider_shifts(t, embedder, params) for t, _ in dev]),
        "tiling_params": tiling,
        "texttiling": score(dev, [texttiling_shifts(t, embedder, **tiling) for t, _ in dev]),
        "tuning": tuned,
    }


# -- MT-Bench+ --------------------------------------------------------------------------
def replay(dialogue: Dialogue, factory: Any, per_turn: list[float], *, chat: bool = True) -> Strategy:
    """Replay a dialogue (``chat``: select for each turn's query, then add the turn, as a chat does).

    Appends each turn's milliseconds to ``per_turn``; returns the strategy.
    """
    strategy = factory()
    for turn in dialogue.turns:
        start = time.perf_counter()
        if chat:
            strategy.select(turn.query)
        strategy.add(turn)
        per_turn.append((time.perf_counter() - start) * 1000)
    return strategy


def probe_types(path: Path) -> dict[str, str]:
    """Dialogue id -> MT-Bench+ probe type (conjunction, continuation, retrospection)."""
    return {str(d.get("id", k)): str(d.get("type", "")) for k, d in enumerate(json.loads(path.read_text()))}


def compared(embedder: CachedEmbedder) -> dict[str, Any]:
    """The strategies measured side by side in one run: (factory, replayed as a chat)."""
    return {
        "DiscourseTree": (lambda: DiscourseTreeStrategy(embedder=embedder), True),
        "DiscourseTree (faithful)": (lambda: DiscourseTreeStrategy.from_paper(embedder=embedder), True),
        "KadaneDial (faithful)": (lambda: KadaneDialStrategy.from_paper(embedder=embedder), False),
        "KadaneDial": (lambda: KadaneDialStrategy(embedder=embedder), False),
    }


def mtbench(data: Path) -> dict[str, Any]:
    """DiscourseTree's evidence recall, token ratio and overhead; per probe type, beside the others."""
    dialogues = load_mtbenchplus(data / "mtbenchplus_dev.json")
    kinds = probe_types(data / "mtbenchplus_dev.json")
    embedder = CachedEmbedder()
    embedder.embed(["warm up"])
    table: dict[str, dict[str, dict[str, float]]] = {}
    out: dict[str, Any] = {"dialogues": len(dialogues)}
    for name, (factory, chat) in compared(embedder).items():
        rows: dict[str, list[tuple[float, float, float]]] = {}
        per_turn: list[float] = []
        gold_tree = []
        for d in dialogues:
            strategy = replay(d, factory, per_turn, chat=chat)
            for q in d.questions:
                if not q.evidence:
                    continue
                context = strategy.select(q.text)
                verbatim = set(context.turn_indices)
                summarised = {i for b in context.blocks if b.kind == "summary" for i in b.turns}
                gold = set(q.evidence)
                row = (
                    len(gold & verbatim) / len(gold),
                    len(gold & (verbatim | summarised)) / len(gold),
                    context.token_ratio,
                )
                for key in ("all", kinds.get(d.id, "")):
                    rows.setdefault(key, []).append(row)
                if name == "DiscourseTree" and isinstance(strategy, DiscourseTreeStrategy):
                    tree = context.details["plan"]["tree"]
                    gold_tree.append(tree in {strategy.nodes[i].tree for i in gold})
        table[name] = {
            key: {
                "evidence_recall": round(statistics.mean(r[0] for r in values), 4),
                "summary_credit_recall": round(statistics.mean(r[1] for r in values), 4),
                "token_ratio": round(statistics.mean(r[2] for r in values), 4),
                "questions": len(values),
            }
            for key, values in sorted(rows.items())
        }
        if name == "DiscourseTree":
            ratios = [r[2] for r in rows["all"]]
            out.update(
                questions=len(ratios),
                evidence_recall=table[name]["all"]["evidence_recall"],
                summary_credit_recall=table[name]["all"]["summary_credit_recall"],
                token_ratio_mean=table[name]["all"]["token_ratio"],
                token_ratio_max=round(max(ratios), 4),
                probe_in_a_gold_topic=round(statistics.mean(gold_tree), 4),
                per_turn_ms_p50=round(percentile(per_turn, 50), 2),
                per_turn_ms_p95=round(percentile(per_turn, 95), 2),
            )
    # the same replay with every vector cached: the tree's own work without the embedding model
    logic_ms: list[float] = []
    for d in dialogues:
        replay(d, lambda: DiscourseTreeStrategy(embedder=embedder), logic_ms)
    out.update(
        per_turn_ms_p50_without_embedding=round(percentile(logic_ms, 50), 2),
        per_turn_ms_p95_without_embedding=round(percentile(logic_ms, 95), 2),
        cpu_load_1min=round(os.getloadavg()[0], 2),
        by_probe_type=table,
    )
    return out


def print_probe_table(table: dict[str, dict[str, dict[str, float]]]) -> None:
    """Verbatim evidence recall @ token ratio per probe type, one line per strategy."""
    kinds = sorted({k for rows in table.values() for k in rows})
    print("strategy".ljust(26) + "".join(k.rjust(18) for k in kinds))  # noqa: T201
    for name, rows in table.items():
        cells = "".join(
            f"{rows[k]['evidence_recall']:.3f} @ {rows[k]['token_ratio']:.3f}".rjust(18) if k in rows else "-"
            for k in kinds
        )
        print(name.ljust(26) + cells)  # noqa: T201


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--tune", action="store_true", help="grid-search both methods on tiage_train.json")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--fit", action="store_true", help="fit the decider's shift model on tiage_train.json, print it, stop"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument(
        "--only", choices=("tiage", "mtbench"), default=None, help="run only one part (default both)"
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    embedder = CachedEmbedder()
    if args.fit:
        model = fit_shift_model(load_tiage(args.data / "tiage_train.json"), embedder)
        print(json.dumps(model))  # noqa: T201
        return {"shift_model": model}
    result: dict[str, Any] = {}
    if args.only != "mtbench":
        tuned = tune(load_tiage(args.data / "tiage_train.json"), embedder) if args.tune else None
        result["tiage"] = tiage(args.data, embedder, tuned)
    if args.only != "tiage":
        result["mtbenchplus"] = mtbench(args.data)
    text = json.dumps(result, indent=2)
    print(text)  # noqa: T201
    if "mtbenchplus" in result:
        print_probe_table(result["mtbenchplus"]["by_probe_type"])
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
