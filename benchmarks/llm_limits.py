"""Bounded model calls, measured: selects with a slow or hung LLM decider.

Run: ``python benchmarks/llm_limits.py``. A DiscourseTree strategy with an ``LLMDecider`` (a
deterministic hashing embedder, no model) adds 4 turns, then runs 12 selects, with a decider
LLM that takes 1 s per call (no time limit, the default 30 s limit, a 0.5 s limit) and one
that never answers (0.5 s limit). Printed per case: the add time, the total and worst select
time, ``llm_calls`` and the calls still abandoned. No network, no model weights.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import hash_embedder  # noqa: E402  (the module next to this script)

from ctxmgmt import Message, Turn  # noqa: E402
from ctxmgmt.app.testing import FakeLLM, HangingLLM  # noqa: E402
from ctxmgmt.components.decider import EmbeddedDecider, LLMDecider  # noqa: E402
from ctxmgmt.components.llm_call import abandoned_calls  # noqa: E402
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy  # noqa: E402

TOPICS = ("my cat Miso", "sourdough bread", "a trip to Lisbon", "the tax form")
ANSWER = '{"action": "continue"}'


def conversation(n: int) -> list[Turn]:
    """``n`` turns cycling through :data:`TOPICS`."""
    return [
        Turn(
            i,
            (
                Message("user", f"Tell me about {TOPICS[i % 4]}, point {i}."),
                Message("assistant", f"Point {i} on {TOPICS[i % 4]}."),
            ),
        )
        for i in range(n)
    ]


def run(label: str, complete: Callable[[str], str], timeout: float | None, selects: int = 12) -> None:
    """Time 4 adds and ``selects`` selects with ``complete`` as the decider's LLM."""
    decider = LLMDecider(complete, fallback=EmbeddedDecider(shift_model=None), timeout=timeout)
    strategy = DiscourseTreeStrategy(embedder=hash_embedder(), decider=decider)
    start = time.perf_counter()
    strategy.add_many(conversation(4))
    add = time.perf_counter() - start
    worst = total = 0.0
    for k in range(selects):
        start = time.perf_counter()
        strategy.select(f"and what about {TOPICS[k % 4]} again, {k}?")
        took = time.perf_counter() - start
        worst, total = max(worst, took), total + took
    print(
        f"{label:44s} add 4 turns {add:5.2f} s; {selects} selects: total {total:6.2f} s, "
        f"worst {worst:5.2f} s, llm_calls {strategy.llm_calls}, abandoned now {abandoned_calls()}"
    )


def main() -> None:
    logging.disable(logging.WARNING)  # every fallback logs a warning; the figures are the point
    hung, slow = HangingLLM(ANSWER), FakeLLM(ANSWER, delay=1.0)
    try:
        run("slow 1 s/call, timeout None (no limit)", slow, None)
        run("slow 1 s/call, timeout 30 s (default)", slow, 30.0)
        run("slow 1 s/call, timeout 0.5 s", slow, 0.5)
        run("hung forever, timeout 0.5 s", hung, 0.5)
    finally:
        hung.release.set()


if __name__ == "__main__":
    main()
