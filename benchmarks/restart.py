"""Restart: the first ``sync`` + ``select`` on a stored conversation in a new process, per memory and store.

Run: ``python benchmarks/restart.py [--quick] [--json restart.json] [--postgres DSN]
[--no-postgres] [--embedder minilm|hash] [--turns 1000] [--reps 3] [--restart-adds 5]
[--no-today] [--data FILE] [--workdir DIR]``.

Every memory (the five with their defaults; SWin, ACM, TopicThread and DiscourseTree also with
a call-counting fake LLM as summariser / decider, :class:`ctxmgmt.app.testing.FakeLLM`) stores a
``--turns`` (1,000) turn conversation through a core conversation pool
(``ctxmgmt.app.testing.StatePool``) in SQLite (one file per memory, whose size is reported; the
rows are then copied as they are into PostgreSQL). Then a NEW PROCESS per memory and store
times the first ``sync`` + ``select`` on it (``--reps`` repetitions in that process, each with
a new pool, strategy and store connection; p50 and the first one reported), counting embedder,
LLM and spaCy calls made while syncing the stored history (must be 0) apart from those the
query itself needs (DiscourseTree's LLM decider places every query, restarted or not). Process
start-up (loading the embedding model, spaCy and the tiktoken tables) happens before the clock
starts, as in a worker that has served any request: the worker first serves another, short
conversation through the same store, so its code paths are warm as in a running worker. Beside
it, "today": the same first select with no store (everything re-derived), timed once in a new
process (``--no-today`` leaves it out). Last, the same process adds ``--restart-adds`` turns to
the restored session, detached from the store vs through it.

Conversations, stores and PostgreSQL: see ``_common.py``.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (the module next to this script)
    QUERY,
    VARIANTS,
    child_result,
    conversation,
    is_child,
    make_embedder,
    open_backend,
    parser_for,
    run_benchmark,
    run_child,
    session_turns,
    sqlite_size,
    strategy_for,
    table,
    warm_up,
)

from ctxmgmt.app.testing import CachingEmbedder, CountingEmbedder, CountingExtractor, FakeLLM  # noqa: E402
from ctxmgmt.messages.types import Turn  # noqa: E402

SIZES = {"turns": (1000, 120), "reps": (3, 2), "restart_adds": (5, 2)}
"""``name -> (default, with --quick)``."""


def embedded(embedder: CountingEmbedder) -> tuple[int, int]:
    """Embed calls and texts so far, queries included (each query is one call of one text)."""
    return embedder.calls + embedder.queries, embedder.texts + embedder.queries


def build_stored(
    variants: Sequence[str], n: int, *, embedder: str, workdir: Path, pg: str | None = None
) -> dict[str, dict[str, Any]]:
    """Store an ``n``-turn conversation for every variant in a SQLite file of its own.

    The conversation is written through ``StatePool`` + ``SQLiteStore`` as a chat writes it
    (one sync with every turn). With ``pg``, the stored rows are then copied as they are into
    PostgreSQL (the same tables and values a ``PostgresStore`` write produces; writing through
    it too would only double the build time, and the other persistence benchmarks write through it).
    """
    from ctxmgmt.app.testing import StatePool

    turns = conversation(n)
    counting = CountingEmbedder(CachingEmbedder(make_embedder(embedder)))  # builds: texts embedded once
    extractor = warm_up()
    out: dict[str, dict[str, Any]] = {}
    for variant in variants:
        path = workdir / f"restart-{variant.replace('+', '-')}.db"
        store = open_backend(f"sqlite:{path}")
        llm = FakeLLM()
        pool = StatePool(
            surface="bench",
            factory=lambda v=variant, llm=llm: strategy_for(
                v, embedder=counting, llm=llm, extractor=extractor
            ),
            store=store,
        )
        start = time.perf_counter()
        session = pool.get(variant)
        session.sync(turns)
        info: dict[str, Any] = {"build_s": time.perf_counter() - start, "build_llm_calls": llm.calls}
        (_, texts), calls = embedded(counting), llm.calls
        session.strategy.select(QUERY)  # the same select on the live session, for comparison
        info["live_select_embedded_texts"] = embedded(counting)[1] - texts
        info["live_select_llm_calls"] = llm.calls - calls
        info["to_state_json_bytes"] = len(json.dumps(session.strategy.to_state()))
        info["key"] = session.key
        store.close()
        info["sqlite_bytes"] = sqlite_size(path)
        info["sqlite_spec"] = f"sqlite:{path}"
        with sqlite3.connect(path) as conn:
            info["record_rows"] = conn.execute("SELECT count(*) FROM ctxmgmt_records").fetchone()[0]
        if pg:
            copy_to_postgres(path, session.key, pg)
        out[variant] = info
        print(f"  {variant}: stored ({info['build_s']:.0f} s)", file=sys.stderr, flush=True)
    return out


TABLE_COLUMNS = {
    "ctxmgmt_sessions": "key, strategy, config, schema, version, turns",
    "ctxmgmt_turns": "key, turn, chain",
    "ctxmgmt_records": "key, turn, name, kind, data",
}


def copy_to_postgres(path: Path, key: str, dsn: str) -> None:
    """Copy session ``key``'s rows from a SQLite store file into PostgreSQL (replacing them)."""
    import psycopg

    open_backend(f"pg:{dsn}").close()  # creates the tables if missing
    source = sqlite3.connect(path)
    try:
        with psycopg.connect(dsn) as conn, conn.cursor() as cur:
            for table, columns in TABLE_COLUMNS.items():
                cur.execute(f"DELETE FROM {table} WHERE key = %s", (key,))  # noqa: S608 - fixed names
                rows = source.execute(f"SELECT {columns} FROM {table} WHERE key = ?", (key,))  # noqa: S608
                with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:  # noqa: S608
                    for row in rows:
                        copy.write_row(row)
            # Statistics now, as a live database has them: otherwise autovacuum analyses the
            # freshly copied tables while the restarts are being timed.
            for table in TABLE_COLUMNS:
                cur.execute(f"ANALYZE {table}")  # noqa: S608 - fixed names
    finally:
        source.close()


def drop_from_postgres(keys: Sequence[str], dsn: str) -> None:
    """Delete the sessions ``keys`` from PostgreSQL."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in TABLE_COLUMNS:
            conn.execute(f"DELETE FROM {table} WHERE key = ANY(%s)", (list(keys),))  # noqa: S608


def _timed_first_select(
    variant: str, spec: str | None, turns: list[Turn], base: Any, extractor: Any
) -> dict[str, Any]:
    """Time a new session's first ``sync`` (restore or rebuild) + ``select``; count what each did."""
    from ctxmgmt.app.testing import StatePool

    store = open_backend(spec)
    embedder = CountingEmbedder(base)
    llm = FakeLLM()
    ents = CountingExtractor(extractor) if extractor is not None else None
    pool = StatePool(
        surface="bench",
        factory=lambda: strategy_for(variant, embedder=embedder, llm=llm, extractor=ents),
        store=store,
    )
    gc.collect()
    start = time.perf_counter()
    session = pool.get(variant)
    session.sync(turns)
    synced = time.perf_counter()
    counts = (*embedded(embedder), llm.calls, ents.calls if ents is not None else 0)
    context = session.strategy.select(QUERY)
    end = time.perf_counter()
    result = {
        "ms": (end - start) * 1000,
        "sync_ms": (synced - start) * 1000,
        "select_ms": (end - synced) * 1000,
        # while syncing the stored history (re-derivation): must be 0 after a restart
        "embed_calls": counts[0],
        "embedded_texts": counts[1],
        "llm_calls": counts[2],
        "spacy_calls": counts[3],
        # while selecting for the query (the same on a live session)
        "select_embedded_texts": embedded(embedder)[1] - counts[1],
        "select_llm_calls": llm.calls - counts[2],
        "turns_held": len(session.strategy.turns),
        "blocks": len(context.blocks),
    }
    if store is not None:
        store.close()
    return result


def _serve_another_conversation(variant: str, spec: str, base: Any, extractor: Any) -> None:
    """Warm a new worker as serving any request would: another, short conversation written to
    the same store, then restored from it by a new pool and answered (its rows are deleted)."""
    from ctxmgmt.app.testing import StatePool

    store = open_backend(spec)
    other = session_turns(999, 20, tag="warm")

    def build() -> Any:
        return strategy_for(variant, embedder=base, llm=FakeLLM(), extractor=extractor)

    pools = [StatePool(surface="bench", factory=build, store=store) for _ in range(2)]
    pools[0].get("warm-up").sync(other)
    session = pools[1].get("warm-up")
    session.sync(other)
    session.strategy.select(QUERY)
    store.delete(session.key)
    store.close()


def _child_restart(task: dict[str, Any]) -> dict[str, Any]:
    turns = conversation(task["turns"])
    base = make_embedder(task["embedder"])
    extractor = warm_up(task["variant"])
    _serve_another_conversation(task["variant"], task["store"], base, extractor)
    runs = [
        _timed_first_select(task["variant"], task["store"], turns, base, extractor)
        for _ in range(task["reps"])
    ]
    return {"runs": runs, **_timed_adds(task, base, extractor)}


def _timed_adds(task: dict[str, Any], base: Any, extractor: Any) -> dict[str, Any]:
    """Add a few turns to the restored conversation one by one: detached from the store vs through it.

    Runs last (it writes the new turns to the store). "In process" is a session restored from
    the store and then detached from it (``session.store = None``), so both add to the same state.
    """
    from ctxmgmt.app.testing import StatePool

    n, adds, variant = task["turns"], task.get("adds", 0), task["variant"]
    if not adds:
        return {}
    every = conversation(n + adds)
    out: dict[str, list[float]] = {}
    for label in ("in_process", "store"):
        store = open_backend(task["store"])
        embedder, llm = CountingEmbedder(base), FakeLLM()
        pool = StatePool(
            surface="bench",
            factory=lambda e=embedder, m=llm: strategy_for(variant, embedder=e, llm=m, extractor=extractor),
            store=store,
        )
        session = pool.get(variant)
        session.sync(every[:n])
        if label == "in_process":
            session.store = None
        times = []
        for k in range(n, n + adds):
            start = time.perf_counter()
            session.sync(every[: k + 1])
            times.append((time.perf_counter() - start) * 1000)
        out[f"add_ms_{label}"] = times
        store.close()
    return out


def _child_rebuild(task: dict[str, Any]) -> dict[str, Any]:
    turns = conversation(task["turns"])
    base = make_embedder(task["embedder"])
    extractor = warm_up(task["variant"])
    return _timed_first_select(task["variant"], None, turns, base, extractor)


def measure(
    *,
    turns: int,
    reps: int,
    variants: Sequence[str] = VARIANTS,
    pg: str | None,
    embedder: str,
    workdir: Path,
    today: bool = True,
    adds: int = 0,
) -> list[dict[str, Any]]:
    """First sync + select on a stored conversation in a new process, per memory and store."""
    stores = {"sqlite": "sqlite"}
    if pg:
        stores["postgres"] = f"pg:{pg}"
    built = build_stored(variants, turns, embedder=embedder, workdir=workdir, pg=pg)
    rows = []
    for variant in variants:
        row: dict[str, Any] = {"memory": variant, "turns": turns, **built[variant]}
        for backend, spec in stores.items():
            spec = built[variant]["sqlite_spec"] if backend == "sqlite" else spec
            task = {"kind": "restart", "variant": variant, "store": spec, "turns": turns, "reps": reps}
            res = run_child(__file__, {**task, "embedder": embedder, "adds": adds})
            runs = res["runs"]
            row[backend] = {
                "p50_ms": statistics.median(r["ms"] for r in runs),
                "first_ms": runs[0]["ms"],
                "max_ms": max(r["ms"] for r in runs),
                "sync_p50_ms": statistics.median(r["sync_ms"] for r in runs),
                "select_p50_ms": statistics.median(r["select_ms"] for r in runs),
                **{
                    k: max(r[k] for r in runs)
                    for k in (
                        "embed_calls",
                        "embedded_texts",
                        "llm_calls",
                        "spacy_calls",
                        "select_embedded_texts",
                        "select_llm_calls",
                    )
                },
                "turns_held": min(r["turns_held"] for r in runs),
                "runs_ms": [r["ms"] for r in runs],
            }
            if res.get("add_ms_store"):
                row[backend]["add_p50_ms_in_process"] = statistics.median(res["add_ms_in_process"])
                row[backend]["add_p50_ms_store"] = statistics.median(res["add_ms_store"])
        if today:
            task = {
                "kind": "rebuild",
                "variant": variant,
                "store": None,
                "turns": turns,
                "embedder": embedder,
            }
            row["today"] = run_child(__file__, task)
        rows.append(row)
        print(f"  {variant}: done", file=sys.stderr, flush=True)
    if pg:
        drop_from_postgres([b["key"] for b in built.values()], pg)
    return rows


# -- report and command line -----------------------------------------------------------------------
def report(rows_in: list[dict[str, Any]]) -> str:
    """The restart table, and the table of adds after the restart when they were timed."""
    out = []
    rows = []
    for r in rows_in:
        for backend in ("sqlite", "postgres"):
            if backend not in r:
                continue
            b = r[backend]
            today = r.get("today", {})
            rows.append(
                [
                    r["memory"],
                    backend,
                    b["p50_ms"],
                    f"{b['sync_p50_ms']:.0f} + {b['select_p50_ms']:.0f}",
                    b["first_ms"],
                    b["embed_calls"],
                    b["llm_calls"],
                    b["spacy_calls"],
                    f"{b['select_llm_calls']} / {r.get('live_select_llm_calls', '-')}",
                    today.get("ms"),
                    today.get("embedded_texts"),
                    today.get("llm_calls"),
                    r.get("sqlite_bytes", 0) / 1e6 if backend == "sqlite" else None,
                    r.get("to_state_json_bytes", 0) / 1e6,
                ]
            )
    turns = rows_in[0]["turns"] if rows_in else 0
    out.append(
        table(
            f"restart: first sync + select on a stored {turns:,}-turn conversation in a new process "
            "(target p50 <= 200 ms; 0 embedder / LLM calls re-deriving the history)",
            [
                "memory",
                "store",
                "p50 ms",
                "sync + select",
                "first ms",
                "embed calls",
                "LLM calls",
                "spaCy calls",
                "query LLM calls restart/live",
                "today ms",
                "today texts embedded",
                "today LLM calls",
                "SQLite MB",
                "to_state JSON MB",
            ],
            rows,
        )
    )
    rows = [
        [
            r["memory"],
            backend,
            r[backend]["add_p50_ms_in_process"],
            r[backend]["add_p50_ms_store"],
            r[backend]["add_p50_ms_store"] - r[backend]["add_p50_ms_in_process"],
        ]
        for r in rows_in
        for backend in ("sqlite", "postgres")
        if "add_p50_ms_store" in r.get(backend, {})
    ]
    if rows:
        out.append(
            table(
                f"adding one turn to the restored {turns:,}-turn conversation (p50 ms)",
                ["memory", "store", "in process", "through the store", "store overhead"],
                rows,
            )
        )
    return "\n\n".join(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"restart"``."""
    parser = parser_for(__doc__, SIZES, postgres=True)
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm", help="default minilm")
    parser.add_argument(
        "--no-today",
        action="store_true",
        help="leave out the 'today' column (the first select re-deriving everything, no store)",
    )

    def run(args: Any, sizes: dict[str, int], pg: str | None, workdir: Path) -> list[dict[str, Any]]:
        return measure(
            turns=sizes["turns"],
            reps=sizes["reps"],
            pg=pg,
            embedder=args.embedder,
            workdir=workdir,
            adds=sizes["restart_adds"],
            today=not args.no_today,
        )

    return run_benchmark("restart", parser, SIZES, run, report, argv)


def child_main(task: dict[str, Any]) -> None:
    """A child process: one restart (``kind`` ``restart``) or one rebuild without a store."""
    child_result(_child_restart(task) if task["kind"] == "restart" else _child_rebuild(task))


if __name__ == "__main__":
    if is_child(sys.argv):
        child_main(json.loads(sys.argv[2]))
    else:
        main()
