"""A new worker's first question, and a long thread it has no derived state for, through ``create_agent``.

Run: ``python benchmarks/first_question.py [--data ../shared/data] [--turns 1000]
[--memory KadaneDial ...] [--lead 10] [--json out.json]``

Every case runs in a new Python process, on the embedded defaults (the bundled MiniLM, torch at
its default threads), with a ``create_agent`` agent (fake chat model, ``InMemorySaver``) and the
memory's middleware. The thread's history is the first ``--turns`` turns of LoCoMo dev (its four
conversations one after another; the shipped demo conversation, repeated, without the data);
the first call sends all of it and a question at once, as a worker that restarted without
stored state sees a long checkpointed thread.

- ``cold``: the first question right after start-up (the model loads during it).
- ``warm``: ``ctxmgmt.warm_up(background=True)`` at start-up, then ``--lead`` seconds of other
  start-up work before the first question.

Printed per case: start-up (imports, memory and agent built), the first call, the turns still
waiting after it (``details["backlog"]``), the p50 of the next 5 calls (a new question each,
calls back to back) and how long the background took to finish the backlog after them. The load
average is printed: a busy machine slows every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEMORIES = ("KadaneDial", "TopicThread", "DiscourseTree")


def child(memory: str, mode: str, turns: int, lead: float, data: str) -> dict[str, Any]:
    """One case, in this (new) process."""
    start = time.perf_counter()
    import ctxmgmt

    if mode == "warm":
        ctxmgmt.warm_up(background=True)
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    import langchain_ctxmgmt
    from ctxmgmt.app.bench.data import load_dialogues
    from langchain_ctxmgmt.testing import RecordingChatModel

    path = Path(data) / "locomo_dev.json"
    if path.exists():
        dialogues = load_dialogues(path)
        source = [t for d in dialogues for t in d.turns]
        questions = [q.text for d in dialogues for q in d.questions]
    else:
        from ctxmgmt.app.data import load_demo

        demo = load_demo()
        source, questions = list(demo.turns), [q.question for q in demo.questions]
    history: list[Any] = []
    for k in range(turns):
        turn = source[k % len(source)]
        user = " ".join(m.text for m in turn.messages if m.role == "user") or "..."
        answer = " ".join(m.text for m in turn.messages if m.role == "assistant") or "ok"
        history += [HumanMessage(user), AIMessage(answer)]
    middleware = getattr(langchain_ctxmgmt, f"{memory}Middleware")()
    model = RecordingChatModel(messages=iter(["Noted."] * 10))
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    ready = time.perf_counter()
    if mode == "warm":
        time.sleep(lead)
    before = time.perf_counter()
    agent.invoke({"messages": [*history, HumanMessage(questions[0])]}, config)
    first = time.perf_counter() - before
    backlog = middleware.last_context.details.get("backlog", 0)
    later = []
    for question in questions[1:6]:
        before = time.perf_counter()
        agent.invoke({"messages": [HumanMessage(question)]}, config)
        later.append(time.perf_counter() - before)
    before = time.perf_counter()
    done = middleware.conversation("t").wait_derived(timeout=600)
    return {
        "memory": memory,
        "mode": mode,
        "turns": turns,
        "startup_s": round(ready - start, 2),
        "first_call_s": round(first, 2),
        "backlog_after_first": backlog,
        "next_calls_p50_s": round(sorted(later)[len(later) // 2], 2),
        "backlog_after_next": middleware.last_context.details.get("backlog", 0),
        "background_finish_s": round(time.perf_counter() - before, 2) if done else None,
    }


def main() -> None:
    """Run every case in its own process and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--memory", action="append", choices=MEMORIES)
    parser.add_argument("--lead", type=float, default=10.0, help="seconds between warm_up and the question")
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.turns, args.lead, args.data)))  # noqa: T201
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "shared"), str(ROOT)]), HF_HUB_OFFLINE="1")
    rows = []
    for memory in args.memory or MEMORIES:
        for mode in ("cold", "warm"):
            command = [sys.executable, __file__, "--child", memory, mode, "--turns", str(args.turns)]
            command += ["--lead", str(args.lead), "--data", args.data]
            out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if out.returncode:
                print(f"{memory} {mode}: FAILED {out.stderr.strip().splitlines()[-1:]}")  # noqa: T201
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row))  # noqa: T201
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")  # noqa: T201
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
