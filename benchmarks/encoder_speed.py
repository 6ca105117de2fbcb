"""Cost of each memory with each encoder: cold start in a new process, add and get at 300 turns.

Run: ``python benchmarks/encoder_speed.py [--data ../shared/data] [--encoders minilm,static]
[--memory KadaneDialMemory ...] [--busy N] [--json out.json]``

Turns and questions are LoCoMo dev's (``locomo_dev.json``; its four conversations one after
another, 1,065 turns). For every encoder and memory (strategy defaults otherwise; torch keeps
its default threads, as a user's process does):

- **cold start**: a new Python process imports ctxmgmt, builds the memory, adds the first 1,000
  turns at once (``add_many``, as a session rebuilding a conversation it has no stored state
  for) and answers one question; the wall time from before the import to the answer is
  ``cold_start_s`` (model loading included), the first question alone ``first_select_ms``.
- **add / get at 300 turns**: in this process, after the model is loaded and the memory holds
  300 turns, 40 more turns are added one by one (``add_ms``) and 40 questions selected with no
  budget (``get_ms``); p50 / p95.

``--busy N`` starts N busy-loop processes (``python -c 'while 1: pass'``) beside the run and
kills them afterwards (N = 2 x cores reproduces a busy host). The load average is recorded:
on a shared machine every figure includes other processes' work.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
MEMORIES = ("KadaneDialMemory", "TopicThreadMemory", "DiscourseTreeMemory")
COLD_TURNS = 1000
WARM_TURNS = 300
CALLS = 40

COLD_SCRIPT = """
import json, sys, time
start = time.perf_counter()
from ctxmgmt.app.bench.data import load_dialogues
from ctxmgmt.strategies.registry import MEMORIES
from pathlib import Path
dialogues = load_dialogues(Path(sys.argv[1]))
turns = [t for d in dialogues for t in d.turns][: int(sys.argv[4])]
question = dialogues[0].questions[0].text
loaded = time.perf_counter()
memory = MEMORIES[sys.argv[2]](embedder=sys.argv[3])
memory.add_many(turns)
before = time.perf_counter()
memory.select(question)
end = time.perf_counter()
print(json.dumps({"cold_start_s": end - start, "data_load_s": loaded - start,
                  "first_select_ms": (end - before) * 1000, "torch_imported": "torch" in sys.modules}))
"""


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def cold_start(data: Path, memory: str, encoder: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "shared"), str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", COLD_SCRIPT, str(data / "locomo_dev.json"), memory, encoder, str(COLD_TURNS)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    # the data file's parsing is the benchmark's, not the memory's
    row["cold_start_s"] = round(row["cold_start_s"] - row.pop("data_load_s"), 3)
    row["first_select_ms"] = round(row["first_select_ms"], 1)
    return row


def warm(data: Path, memory: str, encoder: str) -> dict[str, Any]:
    from ctxmgmt.app.bench.data import load_dialogues
    from ctxmgmt.strategies.registry import MEMORIES as FACTORIES

    dialogues = load_dialogues(data / "locomo_dev.json")
    turns = [t for d in dialogues for t in d.turns]
    questions = [q.text for d in dialogues for q in d.questions]
    strategy = FACTORIES[memory](embedder=encoder)
    strategy.add_many(turns[:WARM_TURNS])
    strategy.select("warm up the query path")
    adds, gets = [], []
    for k in range(CALLS):
        start = time.perf_counter()
        strategy.add(turns[WARM_TURNS + k])
        adds.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        strategy.select(questions[k * 7 % len(questions)])
        gets.append((time.perf_counter() - start) * 1000)
    return {
        "add_ms_p50": round(percentile(adds, 50), 2),
        "add_ms_p95": round(percentile(adds, 95), 2),
        "get_ms_p50": round(percentile(gets, 50), 2),
        "get_ms_p95": round(percentile(gets, 95), 2),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--encoders", default="minilm,static")
    parser.add_argument("--memory", action="append", choices=MEMORIES)
    parser.add_argument("--busy", type=int, default=0, help="busy-loop processes beside the run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    result: dict[str, Any] = {"busy_processes": args.busy, "cpus": os.cpu_count(), "rows": []}
    try:
        time.sleep(2 if busy else 0)
        result["load_average_before"] = os.getloadavg()
        for encoder in args.encoders.split(","):
            for memory in args.memory or MEMORIES:
                row = {"encoder": encoder, "memory": memory}
                row.update(cold_start(args.data, memory, encoder))
                row.update(warm(args.data, memory, encoder))
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
        result["load_average_after"] = os.getloadavg()
    finally:
        for process in busy:
            process.kill()
            process.wait()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
