"""Hostile input, measured: the worst turn time and peak memory of each attack on the defaults.

Run: ``python benchmarks/hostile_input.py [--only CASE ...] [--json out.json]``. Each case runs in
a fresh process (so its peak resident memory is its own), on the embedded defaults (bundled
MiniLM embedder, spaCy ``en_core_web_sm``, extractive summariser, tiktoken counter); models are
loaded and warmed before the clock starts. Printed per case: the worst single call ("turn") in
seconds, the peak resident set size in MB and its growth over the warmed process. Target: no
turn over 2 s and no growth over 500 MB whatever the input. Figures depend on the machine and its
load (the load average is printed with them).

Cases:

- ``entity_parser``: the LLM entity extractor's answer parser on an answer of 4
  entity-like lines made of runs of 500 spaces, through ``LLMEntityExtractor``.
- ``embed_5mb``: the default embedder on one 5 MB message.
- ``spacy_1mb``: the default entity extractor on one 1 MB message.
- ``summary_short_sentences``: the extractive summariser on a window of 24,000 characters of
  three-word sentences.
- ``discourse_tree_20k`` / ``topic_thread_20k``: 20,000 short messages (10,000 turns) in one call
  through the ``create_agent`` middleware, then 3 ordinary turns; ``no_memory_20k``: the same
  agent and calls without a middleware (what LangGraph itself spends on a 20,000-message thread).
- ``acm_agent_1mb``: a ``create_agent`` thread with ``ACMTieredMiddleware(max_tokens=300)``: a
  ~1 MB user message, then 30 ordinary turns (the huge turn ages into the summary and entity
  tiers; its own call is refused with ``BudgetExceededError``).

Measured on 2 shared CPU cores under heavy load (load average 4 to 13 from other jobs; worst
turn, growth of peak RSS), before (the commit this branch started from, same script) -> after:
entity_parser 127.7 s -> 0.000 s; embed_5mb 15.5 s / +741 MB -> 1.07 s / +11 MB; spacy_1mb
192 s / +4,041 MB -> 7.4 s at load 12 (2.6 s for its 24,000 characters measured alone) /
+102 MB; summary_short_sentences 4.2 s -> 1.9 s (load 12); acm_agent_1mb 108.7 s / +3,650 MB ->
1.5 s / +125 MB; discourse_tree_20k 907 s -> 146 s and topic_thread_20k 615 s -> 78 s (both
about +600 MB: embedding 20,000 texts in one call dominates and is still over the target).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACM_TURNS = 30
"""Ordinary turns after the huge message in ``acm_agent_1mb``."""
ACM_BUDGET = 300
"""``max_tokens`` of ``acm_agent_1mb``: small, so the huge turn reaches the entity tier (spaCy) within
:data:`ACM_TURNS` turns."""
CASES: dict[str, Callable[[], list[float]]] = {}


def case(fn: Callable[[], list[float]]) -> Callable[[], list[float]]:
    """Register a case: a function that warms up, then returns the duration of every timed call."""
    CASES[fn.__name__] = fn
    return fn


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_WARM: dict[str, float] = {}


def warmed() -> None:
    """Mark the end of the warm-up: later growth of the peak RSS is the case's own."""
    _WARM["rss"] = rss_mb()


FAILED: list[str] = []
"""Calls that raised (a refused message is allowed: the thread must go on)."""


def timed(call: Callable[[], Any]) -> float:
    """Seconds ``call()`` takes (a call that raises is timed too and listed in :data:`FAILED`)."""
    start = time.perf_counter()
    try:
        call()
    except Exception as exc:
        FAILED.append(f"{type(exc).__module__}.{type(exc).__name__}")
    return time.perf_counter() - start


@case
def entity_parser() -> list[float]:
    from ctxmgmt.components.entities import LLMEntityExtractor

    answer = ("Bob" + " " * 500 + "\n" + " " * 500 + "|\n") * 4
    extractor = LLMEntityExtractor(lambda prompt: answer[:20_000], timeout=None)
    warmed()
    return [timed(lambda: extractor.extract(["Bob met Alice in Paris."])) for _ in range(3)]


@case
def embed_5mb() -> list[float]:
    from ctxmgmt.components.embedder import default_embedder
    from ctxmgmt.components.embedding_calls import embed_documents

    embedder = default_embedder()
    embed_documents(embedder, ["warm up"])
    text = "the quick brown fox jumps over the lazy dog " * 116_000  # ~5 MB
    warmed()
    return [timed(lambda: embed_documents(embedder, [text])) for _ in range(2)]


@case
def spacy_1mb() -> list[float]:
    from ctxmgmt.components.entities import SpacyEntityExtractor

    extractor = SpacyEntityExtractor()
    extractor.extract(["Alice went to Paris."])
    text = "Alice met Bob in Paris on 3 May 2023. " * 26_000  # ~1 MB
    warmed()
    return [timed(lambda: extractor.extract([text]))]


@case
def summary_short_sentences() -> list[float]:
    from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer

    summarizer = ExtractiveSummarizer()
    window = "user: " + " ".join(f"cats eat fish{i % 97}." for i in range(4_000))
    warmed()
    return [timed(lambda: summarizer.summarize([], window)) for _ in range(2)]


def _agent(middleware: Any, replies: int) -> Any:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    class Model(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Model(messages=iter([AIMessage(f"Noted, reply {i}.") for i in range(replies)]))
    middlewares = [] if middleware is None else [middleware]
    return create_agent(model, tools=[], middleware=middlewares, checkpointer=InMemorySaver())


def _many_messages(middleware: Any) -> list[float]:
    from langchain_core.messages import AIMessage, HumanMessage

    import ctxmgmt

    agent = _agent(middleware, 10)
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello there")]}, config)
    ctxmgmt.warm_up()  # the first call embedded nothing: load the model before the clock
    warmed()
    flood: list[Any] = []
    for i in range(10_000):
        flood += [HumanMessage(f"note {i}: item {i % 37}"), AIMessage(f"ok {i}")]
    flood.append(HumanMessage("What did I say about item 5?"))
    times = [timed(lambda: agent.invoke({"messages": flood}, config))]
    for k in range(3):
        ask = {"messages": [HumanMessage(f"and item {k}?")]}
        times.append(timed(lambda ask=ask: agent.invoke(ask, config)))
    return times


@case
def no_memory_20k() -> list[float]:
    """The same agent and calls as the ``*_20k`` cases with no middleware: the framework's share."""
    return _many_messages(None)


@case
def discourse_tree_20k() -> list[float]:
    from langchain_ctxmgmt import DiscourseTreeMiddleware

    return _many_messages(DiscourseTreeMiddleware())


@case
def topic_thread_20k() -> list[float]:
    from langchain_ctxmgmt import TopicThreadMiddleware

    return _many_messages(TopicThreadMiddleware())


@case
def acm_agent_1mb() -> list[float]:
    from langchain_core.messages import HumanMessage

    from ctxmgmt.components.entities import SpacyEntityExtractor
    from langchain_ctxmgmt import ACMTieredMiddleware

    SpacyEntityExtractor().extract(["Alice went to Paris."])  # load spaCy before the clock starts
    middleware = ACMTieredMiddleware(max_tokens=ACM_BUDGET)
    agent = _agent(middleware, ACM_TURNS + 2)
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello, I am Alice from Paris")]}, config)
    warmed()
    huge = "Alice met Bob in Paris on 3 May 2023 and they talked. " * 18_000  # 990,000 characters:
    # just under spaCy's max_length (1,000,000), which would refuse a longer text outright
    times = []
    for k in range(ACM_TURNS + 1):
        text = huge if k == 0 else f"Tell me more about Paris, question {k}."
        times.append(timed(lambda text=text: agent.invoke({"messages": [HumanMessage(text)]}, config)))
    context = middleware.last_context
    tiers = sorted({b.kind for b in context.blocks}) if context is not None else []
    print(f"acm tiers in the last context: {tiers}", file=sys.stderr)  # noqa: T201
    return times


def run_case(name: str) -> dict[str, Any]:
    """Run one case in this process and return its figures."""
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    times = CASES[name]()
    peak = rss_mb()
    return {
        "case": name,
        "calls": len(times),
        "worst_s": round(max(times), 3),
        "total_s": round(sum(times), 3),
        "peak_rss_mb": round(peak),
        "growth_mb": round(peak - _WARM.get("rss", peak)),
        "failed_calls": FAILED,
        "times_s": [round(t, 3) for t in times],
    }


def main() -> None:
    """Run every case (or ``--only``) in its own process and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to run (default all)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child)))
        return
    rows = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "shared"), str(ROOT)]))
    for name in args.only or list(CASES):
        out = subprocess.run(
            [sys.executable, __file__, "--child", name], capture_output=True, text=True, env=env, check=False
        )
        if out.returncode:
            rows.append({"case": name, "error": out.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        row = rows[-1]
        if "error" in row:
            print(f"{name:26s} FAILED {row['error']}")  # noqa: T201
        else:
            print(  # noqa: T201
                f"{name:26s} worst turn {row['worst_s']:7.3f} s  (calls {row['calls']}, total "
                f"{row['total_s']:.2f} s)  peak RSS {row['peak_rss_mb']:5d} MB, "
                f"growth {row['growth_mb']:5d} MB"
                + (f"; raised: {', '.join(row['failed_calls'])}" if row["failed_calls"] else "")
            )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")  # noqa: T201
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
