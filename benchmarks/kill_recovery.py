"""Kill recovery: ``kill -9`` while turns are added, then a fresh process compares its state with a rebuild.

Run: ``python benchmarks/kill_recovery.py [--quick] [--json kill.json] [--postgres DSN]
[--no-postgres] [--kill-trials 100] [--kill-turns 30] [--data FILE] [--workdir DIR]``.

``--kill-trials`` (100) per SQLite and PostgreSQL: a child process adds ``--kill-turns`` (30)
turns to a session (a third of the trials edit a turn in place mid-way, a sixth delete one),
the parent SIGKILLs it at a random moment; a fresh process then syncs the raw history the child
was last given and compares ``strategy.to_state()`` with a rebuild without a store (and again
after reloading from the store). The five memories in turn, the hashing embedder of
:mod:`ctxmgmt.app.testing`, no LLM. Target: 0 mismatches.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (the module next to this script)
    MEMORIES,
    answer_child_or_run,
    hash_embedder,
    open_backend,
    parser_for,
    run_benchmark,
    run_child,
    session_turns,
    strategy_for,
    table,
    warm_up,
)

from ctxmgmt.messages.types import Message, Turn  # noqa: E402

SIZES = {"kill_trials": (100, 10), "kill_turns": (30, 10)}
"""``name -> (default, with --quick)``."""


def kill_plan(trial: int, n: int) -> tuple[str, list[list[Turn]]]:
    """The histories a child is given, step by step (appends; an in-place edit or a deletion)."""
    rng = random.Random(1000 + trial)
    base = session_turns(trial, n, tag="k")
    kind = ("append", "edit", "append", "edit", "append", "delete")[trial % 6]
    edit_at = rng.randrange(n // 2, n) if kind != "append" else n
    target = rng.randrange(0, max(1, edit_at - 1))
    steps: list[list[Turn]] = []
    history: list[Turn] = []
    for k in range(n):
        if k == edit_at and history:
            if kind == "edit":  # redacted in place, same position
                old = history[target]
                history[target] = Turn(
                    target,
                    tuple(Message(m.role, f"[redacted {k}]", name=m.name) for m in old.messages),
                )
            else:  # the framework removed a turn
                del history[target]
                history = [Turn(i, t.messages) for i, t in enumerate(history)]
        history = [*history, Turn(len(history), base[k].messages)]
        steps.append(list(history))
    return kind, steps


def _kill_factory(memory: str, embedder: Any, extractor: Any) -> Callable[[], Any]:
    return lambda: strategy_for(memory, embedder=embedder, extractor=extractor)


def _kill_child(
    memory: str,
    spec: str,
    session_id: str,
    steps: list[list[Turn]],
    given: Any,
    ready: Any,
    done: Any,
    loop: Any,
    ext: Any,
) -> None:
    from ctxmgmt.app.testing import StatePool

    logging.disable(logging.WARNING)
    store = open_backend(spec)
    pool = StatePool(surface="bench", factory=_kill_factory(memory, hash_embedder(), ext), store=store)
    session = pool.get(session_id)
    session.sync([])
    ready.set()
    start = time.perf_counter()
    for i, history in enumerate(steps):
        given.value = i + 1  # the framework has written this history; the memory is being told
        session.sync(history)
    loop.value = time.perf_counter() - start
    done.value = 1
    store.close()


def _kill_verify(memory: str, spec: str, session_id: str, history: list[Turn], conn: Any, ext: Any) -> None:
    from ctxmgmt.app.testing import StatePool
    from ctxmgmt.messages.types import chain_hashes

    logging.disable(logging.WARNING)
    try:
        store = open_backend(spec)
        factory = _kill_factory(memory, hash_embedder(), ext)
        pool = StatePool(surface="bench", factory=factory, store=store)
        session = pool.get(session_id)
        before = store.load(session.key)
        stored_turns = 0 if before is None else len(before.chains)
        session.sync(history)
        got = session.strategy.to_state()
        fresh = StatePool(surface="bench", factory=factory, store=None).get(session_id)
        fresh.sync(history)
        want = fresh.strategy.to_state()
        again = StatePool(surface="bench", factory=factory, store=store).get(
            session_id
        )  # reloaded, nothing to add
        again.sync(history)
        reloaded = again.strategy.to_state()
        after = store.load(session.key)
        chains_ok = (after.chains if after else []) == chain_hashes(history)
        store.close()
        conn.send(
            {
                "equal": got == want,
                "reloaded_equal": reloaded == want,
                "chains_ok": chains_ok,
                "stored_turns_at_kill": stored_turns,
                "history_turns": len(history),
                "error": None,
            }
        )
    except Exception as exc:  # noqa: BLE001 - reported as a failed trial
        conn.send(
            {
                "equal": False,
                "reloaded_equal": False,
                "chains_ok": False,
                "error": f"{type(exc).__name__}: {exc}",
            }
        )


def _child_kill(task: dict[str, Any]) -> dict[str, Any]:
    """Kill trials for one store, in a process of its own (children are forked from it)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    memories = task.get("memories", MEMORIES)
    extractor = warm_up("ACM" if "ACMTieredBuffer" in memories else "none")
    hash_embedder().embed(["warm up"])
    spec, trials, n = task["store"], task["trials"], task["turns"]
    rng = random.Random(task.get("seed", 12))
    run_id = f"{os.getpid()}-{int(time.time())}"

    def child(memory: str, session_id: str, steps: list[list[Turn]]) -> tuple[Any, Any, Any, Any]:
        given, done, loop = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("d", 0.0)
        ready = ctx.Event()
        p = ctx.Process(  # daemon: a child left running is killed at exit, never waited for
            target=_kill_child,
            args=(memory, spec, session_id, steps, given, ready, done, loop, extractor),
            daemon=True,
        )
        p.start()
        if not ready.wait(60):
            p.kill()
            raise RuntimeError("kill child did not start")
        return p, given, done, loop

    # how long a child takes to add every turn, per memory (the kill moment is drawn from it)
    duration = {}
    for memory in memories:
        _, steps = kill_plan(0, n)
        p, _, done, loop = child(memory, f"cal-{run_id}-{memory}", steps)
        p.join(300)
        if not done.value:
            p.kill()
            raise RuntimeError(f"calibration child for {memory} failed")
        duration[memory] = loop.value
    rows = []
    for trial in range(trials):
        memory = memories[trial % len(memories)]
        kind, steps = kill_plan(trial, n)
        session_id = f"kill-{run_id}-{trial}"
        p, given, done, _ = child(memory, session_id, steps)
        time.sleep(rng.uniform(0, 1.05 * duration[memory]))
        os.kill(p.pid, signal.SIGKILL)
        p.join(60)
        history = steps[given.value - 1] if given.value else []
        parent_conn, child_conn = ctx.Pipe(duplex=False)
        v = ctx.Process(
            target=_kill_verify, args=(memory, spec, session_id, history, child_conn, extractor), daemon=True
        )
        v.start()
        result = (
            parent_conn.recv() if parent_conn.poll(300) else {"equal": False, "error": "verifier timed out"}
        )
        v.join(60)
        if v.is_alive():  # answered (or not) but did not exit: do not keep it
            v.kill()
        rows.append(
            {
                "trial": trial,
                "memory": memory,
                "kind": kind,
                "killed_mid_run": not done.value,
                "steps_given": given.value,
                **result,
            }
        )
    return {"calibration_s": duration, "trials": rows}


def measure(
    *, stores: dict[str, str], trials: int, turns: int, memories: Sequence[str] = MEMORIES
) -> dict[str, Any]:
    """SIGKILL during adds, then a fresh process checks the state against a rebuild."""
    out = {}
    for backend, spec in stores.items():
        task = {"kind": "kill", "store": spec, "trials": trials, "turns": turns, "memories": list(memories)}
        res = run_child(__file__, task, timeout=3600)
        rows = res["trials"]
        out[backend] = {
            "trials": len(rows),
            "killed_mid_run": sum(r["killed_mid_run"] for r in rows),
            "killed_between_framework_and_store": sum(
                1 for r in rows if r.get("error") is None and r["stored_turns_at_kill"] < r["history_turns"]
            ),
            "with_edit_or_deletion": sum(r["kind"] != "append" for r in rows),
            "mismatches": sum(not (r["equal"] and r.get("reloaded_equal")) for r in rows),
            "chain_mismatches": sum(not r.get("chains_ok") for r in rows),
            "errors": [r["error"] for r in rows if r.get("error")][:5],
            "mismatched_trials": [
                {k: r[k] for k in ("trial", "memory", "kind", "steps_given")}
                for r in rows
                if not (r["equal"] and r.get("reloaded_equal"))
            ][:10],
            "calibration_s": res["calibration_s"],
        }
        print(f"  {backend}: done", file=sys.stderr, flush=True)
    return out


def report(result: dict[str, Any]) -> str:
    """One line per store: trials, how many were killed mid-run, mismatches."""
    return table(
        "kill -9 during adds, then a fresh process (target 0 mismatches)",
        [
            "store",
            "trials",
            "killed mid-run",
            "store behind history",
            "with edit/deletion",
            "mismatches",
            "chain mismatches",
        ],
        [
            [
                k,
                v["trials"],
                v["killed_mid_run"],
                v["killed_between_framework_and_store"],
                v["with_edit_or_deletion"],
                v["mismatches"],
                v["chain_mismatches"],
            ]
            for k, v in result.items()
        ],
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"kill"``."""
    parser = parser_for(__doc__, SIZES, postgres=True)

    def run(args: Any, sizes: dict[str, int], pg: str | None, workdir: Path) -> dict[str, Any]:
        stores = {"sqlite": f"sqlite:{workdir / 'kill.db'}", **({"postgres": f"pg:{pg}"} if pg else {})}
        return measure(stores=stores, trials=sizes["kill_trials"], turns=sizes["kill_turns"])

    return run_benchmark("kill", parser, SIZES, run, report, argv)


if __name__ == "__main__":
    answer_child_or_run(_child_kill, main)
