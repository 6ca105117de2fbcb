"""ctxmgmt.adapter.offload: blocking work of the async adapters on threads that outlive event loops."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import sys
import threading
import time

import pytest

from ctxmgmt.adapter.offload import run_blocking, worker_pool

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def _current() -> threading.Thread:
    return threading.current_thread()


def test_threads_outlive_the_loops_that_used_them():
    # Memory.get wraps its async twin in asyncio.run: a new loop per call. asyncio.to_thread would
    # start a new thread per call there (and a new OpenMP team for torch); the pool's persist.
    used = [asyncio.run(run_blocking(_current)) for _ in range(5)]

    assert all(t.name.startswith("ctxmgmt") and t is not threading.main_thread() for t in used)
    assert all(t.is_alive() for t in used)
    assert {t.ident for t in used} <= {t.ident for t in worker_pool()._threads}


def test_arguments_results_context_and_errors_pass_through():
    def work(a: int, *, b: int) -> tuple[int, str]:
        return a + b, REQUEST.get()

    def fail() -> None:
        raise KeyError("missing")

    async def main() -> tuple[int, str]:
        REQUEST.set("req-7")
        return await run_blocking(work, 2, b=3)

    assert asyncio.run(main()) == (5, "req-7")
    with pytest.raises(KeyError, match="missing"):
        asyncio.run(run_blocking(fail))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_starts_its_own_pool():
    # Pre-forking servers fork after imports: the parent's pool threads do not exist in the child.
    parent_pool = worker_pool()
    asyncio.run(run_blocking(_current))  # the parent's pool has a live thread
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a new pool serves the call
        code = 1
        try:
            thread = asyncio.run(asyncio.wait_for(run_blocking(_current), timeout=10))
            code = 0 if worker_pool() is not parent_pool and thread.is_alive() else 2
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert worker_pool() is parent_pool


def test_work_that_waits_for_a_store_never_takes_the_threads_of_work_without_one():
    # Conversations with a store run on a pool of their own: a store that stops answering holds
    # those threads (up to its deadline), never the ones of conversations without a store.
    from ctxmgmt.adapter.offload import MAX_WORKERS, run_blocking_stored, stored_pool

    release = threading.Event()

    async def main() -> float:
        stuck = [asyncio.ensure_future(run_blocking_stored(release.wait, 10)) for _ in range(2 * MAX_WORKERS)]
        await asyncio.sleep(0.1)
        began = time.perf_counter()
        thread = await asyncio.wait_for(run_blocking(_current), timeout=5)
        took = time.perf_counter() - began
        assert thread in worker_pool()._threads and thread not in stored_pool()._threads
        release.set()
        assert all(await asyncio.wait_for(asyncio.gather(*stuck), timeout=10))
        return took

    assert asyncio.run(main()) < 0.5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_starts_its_own_store_pools_and_deadline_watchdog(tmp_path):
    from ctxmgmt.adapter.offload import store_pool, stored_pool
    from ctxmgmt.store import CircuitStore, SQLiteStore
    from ctxmgmt.store.watchdog import watch

    store = CircuitStore(SQLiteStore(tmp_path / "state.db"))
    assert store.load("nobody") is None  # the parent's store pool and watchdog have threads
    with watch(0.01, lambda: None):
        time.sleep(0.05)
    parents = (stored_pool(), store_pool())
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if new pools and a live watchdog serve it
        code = 1
        try:
            signal.alarm(10)  # a hang kills the child; the parent sees a failure
            fired = threading.Event()
            with watch(0.05, fired.set):
                fired.wait(5)
            again = CircuitStore(SQLiteStore(tmp_path / "state.db"))
            answers = again.load("nobody") is None and store.load("nobody") is None
            fresh = stored_pool() is not parents[0] and store_pool() is not parents[1]
            code = 0 if fired.is_set() and answers and fresh else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
