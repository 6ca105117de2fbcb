"""Concurrent workers: several processes serving interleaved sessions on ONE PostgreSQL.

Run: ``python benchmarks/concurrent_workers.py [--quick] [--json workers.json]
[--postgres DSN] [--no-postgres] [--workers 4] [--sessions 25] [--session-turns 50]
[--data FILE]``.

``--workers`` (4) processes x ``--sessions`` (25 each) x ``--session-turns`` (50),
interleaved, on one PostgreSQL, KadaneDial with the fast deterministic hashing embedder of
:mod:`ctxmgmt.app.testing` (384-d; load, not model speed, is measured here). "sticky": each worker
drives its own sessions round-robin; "routed": every turn goes to whichever worker is free, so
sessions move between workers and compare-and-set conflicts happen. Then, from the database:
lost turns, cross-session leaks (chain hashes vs each session's own turns; stored records vs a
single-writer rebuild from the session's own turns, byte for byte) and duplicate or extra
derived records; turns/s beside the same sticky load with no store. Target: 0 lost, 0 leaks,
0 duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (the module next to this script)
    RESULT,
    child_command,
    child_result,
    hash_embedder,
    is_child,
    open_backend,
    parser_for,
    run_benchmark,
    session_query,
    session_turns,
    source_turns,
    table,
    warm_up,
)

from ctxmgmt.messages.types import Turn  # noqa: E402

SIZES = {"workers": (4, 2), "sessions": (25, 4), "session_turns": (50, 8)}
"""``name -> (default, with --quick)``."""


def _child_worker(task: dict[str, Any]) -> None:
    """A worker: reads ``go`` (sticky: drive own sessions) or ``t S T`` lines (routed); writes ``done``."""
    from ctxmgmt.app.testing import StatePool
    from ctxmgmt.strategies import KadaneDialStrategy

    conflicts = [0]

    class Conflicts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "written by another worker" in record.getMessage():
                conflicts[0] += 1

    log = logging.getLogger("ctxmgmt.session.stored_state")
    log.setLevel(logging.INFO)
    log.addHandler(Conflicts())
    store = open_backend(task["store"])
    embedder = hash_embedder()
    pool = StatePool(surface="bench", factory=lambda: KadaneDialStrategy(embedder=embedder), store=store)
    n, prefix = task["session_turns"], task["prefix"]
    histories: dict[int, list[Turn]] = {}

    def drive(s: int, t: int) -> None:
        if s not in histories:
            histories[s] = session_turns(s, n, tag=task["tag"])
        session = pool.get(f"{prefix}{s:05d}")
        session.sync(histories[s][: t + 1])
        session.strategy.select(session_query(s, t))

    warm_up("KadaneDialMemory")
    source_turns()  # the dialogues are read before the clock starts
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "stop":
            break
        if words[0] == "go":
            mine = [int(s) for s in words[1:]]
            for t in range(n):
                for s in mine:
                    drive(s, t)
            break
        s, t = int(words[1]), int(words[2])
        drive(s, t)
        print(f"done {s} {t}", flush=True)
    child_result({"conflicts": conflicts[0]})
    if store is not None:
        store.close()


def run_workers(
    *, store: str | None, mode: str, workers: int, sessions: int, session_turns_: int, prefix: str, tag: str
) -> dict[str, Any]:
    """Drive ``workers * sessions`` sessions of ``session_turns_`` turns; wall time and conflicts."""
    import selectors

    task = {"kind": "worker", "store": store, "session_turns": session_turns_, "prefix": prefix, "tag": tag}
    cmd = child_command(__file__, task)
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        for _ in range(workers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("worker did not start")
        total = workers * sessions
        served: dict[int, set[int]] = {s: set() for s in range(total)}
        start = time.perf_counter()
        if mode == "sticky":
            for w, p in enumerate(procs):
                assert p.stdin is not None
                mine = [s for s in range(total) if s % workers == w]
                p.stdin.write("go " + " ".join(map(str, mine)) + "\n")
                p.stdin.flush()
                for s in mine:
                    served[s].add(w)
            results = [_finish(p) for p in procs]
        else:
            ready = list(range(total))  # sessions whose next turn can be sent (FIFO)
            next_turn = dict.fromkeys(range(total), 0)
            sel = selectors.DefaultSelector()
            idle = list(range(workers))
            random.Random(7).shuffle(idle)
            for w, p in enumerate(procs):
                assert p.stdout is not None
                sel.register(p.stdout, selectors.EVENT_READ, w)
            remaining = total * session_turns_
            while remaining:
                while idle and ready:
                    w, s = idle.pop(0), ready.pop(0)
                    served[s].add(w)
                    stdin = procs[w].stdin
                    assert stdin is not None
                    stdin.write(f"t {s} {next_turn[s]}\n")
                    stdin.flush()
                for key, _ in sel.select():
                    line = key.fileobj.readline()  # type: ignore[union-attr]
                    if not line.startswith("done"):
                        raise RuntimeError(f"worker {key.data} failed: {line!r}")
                    _, s_text, _ = line.split()
                    s = int(s_text)
                    next_turn[s] += 1
                    remaining -= 1
                    idle.append(key.data)
                    if next_turn[s] < session_turns_:
                        ready.append(s)
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("stop\n")
                p.stdin.flush()
            results = [_finish(p) for p in procs]
        wall = time.perf_counter() - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    turns = workers * sessions * session_turns_
    return {
        "mode": mode,
        "store": "postgres" if store else "none",
        "turns": turns,
        "wall_s": wall,
        "turns_per_s": turns / wall,
        "conflicts_retried": sum(r["conflicts"] for r in results),
        "sessions_served_by_several_workers": sum(1 for ws in served.values() if len(ws) > 1),
    }


def _finish(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith(RESULT):
            p.wait(timeout=60)
            return json.loads(line[len(RESULT) :])  # type: ignore[no-any-return]
    p.wait(timeout=60)
    raise RuntimeError(f"worker exited with {p.returncode} and no result")


def verify_sessions(dsn: str, *, prefix: str, tag: str, sessions: int, session_turns_: int) -> dict[str, Any]:
    """Lost turns, leaks and duplicate records of the sessions ``prefix*`` in PostgreSQL."""
    import psycopg

    from ctxmgmt.messages.types import chain_hashes
    from ctxmgmt.session.stored_state import StoredState as Session
    from ctxmgmt.store import SQLiteStore
    from ctxmgmt.strategies import KadaneDialStrategy

    lost = duplicates = missing_sessions = 0
    chain_mismatch = records_differ = foreign = extra = missing = 0
    embedder = hash_embedder()
    pattern = re.compile(rb"\[" + re.escape(tag.encode()) + rb"(\d{5})\]")
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM (SELECT key, turn, name FROM ctxmgmt_records WHERE key LIKE %s "
            "GROUP BY key, turn, name HAVING count(*) > 1) d",
            (f"kadanedial:bench:{prefix}%",),
        )
        duplicates += int(cur.fetchone()[0])  # type: ignore[index]
        for s in range(sessions):
            key = f"kadanedial:bench:{prefix}{s:05d}"
            own = session_turns(s, session_turns_, tag=tag)
            cur.execute("SELECT turns FROM ctxmgmt_sessions WHERE key = %s", (key,))
            header = cur.fetchone()
            if header is None:
                missing_sessions += 1
                lost += session_turns_
                continue
            cur.execute("SELECT turn, chain FROM ctxmgmt_turns WHERE key = %s ORDER BY turn", (key,))
            chains = cur.fetchall()
            lost += max(0, session_turns_ - len(chains)) + abs(int(header[0]) - len(chains))
            if [c for _, c in chains] != chain_hashes(own)[: len(chains)] or [t for t, _ in chains] != list(
                range(len(chains))
            ):
                chain_mismatch += 1
            cur.execute(
                "SELECT turn, name, kind, data FROM ctxmgmt_records WHERE key = %s ORDER BY turn, name",
                (key,),
            )
            stored = [(t, n, k, bytes(d)) for t, n, k, d in cur.fetchall()]
            # the same turns by one writer, one turn per sync (the workers' granularity)
            ref_store = SQLiteStore(":memory:")
            ref = Session(key, KadaneDialStrategy(embedder=embedder), ref_store)
            for t in range(session_turns_):
                ref.sync(own[: t + 1])
                ref.strategy.select(session_query(s, t))
            want = [
                (t, n, k, bytes(d))
                for t, n, k, d in ref_store._connection().execute(  # noqa: SLF001 - the reference's rows
                    "SELECT turn, name, kind, data FROM ctxmgmt_records WHERE key = ? ORDER BY turn, name",
                    (key,),
                )
            ]
            ref_store.close()
            if stored != want:
                records_differ += 1
                extra += len(set(stored) - set(want))
                missing += len(set(want) - set(stored))
            for _, _, kind, data in stored:
                if kind == "json" and {int(x) for x in pattern.findall(data)} - {s}:
                    foreign += 1
    return {
        "sessions": sessions,
        "missing_sessions": missing_sessions,
        "lost_turns": lost,
        "sessions_with_foreign_chains": chain_mismatch,
        "sessions_whose_records_differ_from_own_rebuild": records_differ,
        "records_naming_another_session": foreign,
        "sessions_with_leaks": max(chain_mismatch, records_differ) + foreign,
        "duplicate_records": duplicates,
        "records_not_in_single_writer_rebuild": extra,
        "records_missing_vs_single_writer_rebuild": missing,
    }


def measure(*, pg: str | None, workers: int, sessions: int, session_turns_: int) -> dict[str, Any]:
    """Workers x sessions x turns on one PostgreSQL (sticky and routed) vs no store."""
    total = workers * sessions
    out: dict[str, Any] = {
        "workers": workers,
        "sessions_per_worker": sessions,
        "turns_per_session": session_turns_,
    }
    out["in_process"] = run_workers(
        store=None,
        mode="sticky",
        workers=workers,
        sessions=sessions,
        session_turns_=session_turns_,
        prefix="m-",
        tag="s",
    )
    if pg:
        for mode in ("sticky", "routed"):
            prefix = f"c-{mode}-{os.getpid()}-{int(time.time())}-"
            run = run_workers(
                store=f"pg:{pg}",
                mode=mode,
                workers=workers,
                sessions=sessions,
                session_turns_=session_turns_,
                prefix=prefix,
                tag="s",
            )
            run["check"] = verify_sessions(
                pg, prefix=prefix, tag="s", sessions=total, session_turns_=session_turns_
            )
            out[f"postgres_{mode}"] = run
            _drop_prefix(pg, prefix)
        return out


def _drop_prefix(dsn: str, prefix: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("ctxmgmt_records", "ctxmgmt_turns", "ctxmgmt_sessions"):
            conn.execute(f"DELETE FROM {table} WHERE key LIKE %s", (f"%:{prefix}%",))  # noqa: S608


def report(w: dict[str, Any]) -> str:
    """One line per run (no store, PostgreSQL sticky, PostgreSQL routed): throughput and checks."""
    rows = []
    for label in ("in_process", "postgres_sticky", "postgres_routed"):
        if label not in w:
            continue
        r = w[label]
        c = r.get("check", {})
        rows.append(
            [
                label,
                r["turns"],
                r["turns_per_s"],
                r["conflicts_retried"],
                r["sessions_served_by_several_workers"],
                c.get("lost_turns"),
                c.get("sessions_with_leaks"),
                c.get("duplicate_records"),
                c.get("records_not_in_single_writer_rebuild"),
            ]
        )
    return table(
        f"{w['workers']} workers x {w['sessions_per_worker']} sessions x "
        f"{w['turns_per_session']} turns "
        "(KadaneDial, hashing embedder; target 0 lost / 0 leaks / 0 duplicates)",
        [
            "run",
            "turns",
            "turns/s",
            "CAS retries",
            "sessions on >1 worker",
            "lost turns",
            "leaks",
            "duplicates",
            "extra records",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"workers"``."""
    parser = parser_for(__doc__, SIZES, postgres=True)

    def run(args: Any, sizes: dict[str, int], pg: str | None, workdir: Path) -> dict[str, Any]:
        return measure(
            pg=pg, workers=sizes["workers"], sessions=sizes["sessions"], session_turns_=sizes["session_turns"]
        )

    return run_benchmark("workers", parser, SIZES, run, report, argv)


if __name__ == "__main__":
    if is_child(sys.argv):
        _child_worker(json.loads(sys.argv[2]))
    else:
        main()
