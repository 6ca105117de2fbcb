"""SummaryWorker: jobs run in one thread, in order; flush waits; close stops; errors surface."""

from __future__ import annotations

import threading

import pytest

from ctxmgmt.strategies.swin_worker import SummaryWorker


def test_jobs_run_in_one_named_thread_in_the_order_submitted():
    worker, done, threads = SummaryWorker(name="test-worker"), [], set()

    def job(k: int):
        def run() -> None:
            threads.add(threading.current_thread().name)
            done.append(k)

        return run

    for k in range(20):
        worker.submit(job(k))
    worker.flush()
    assert done == list(range(20))
    assert len(threads) == 1 and next(iter(threads)).startswith("test-worker")
    assert threading.current_thread().name not in threads
    worker.close()


def test_flush_waits_for_a_blocked_job():
    worker, gate, done = SummaryWorker(), threading.Event(), []
    worker.submit(lambda: (gate.wait(5), done.append(1)) and None)
    assert done == []
    gate.set()
    worker.flush()
    assert done == [1]
    worker.close()


def test_a_failing_job_raises_on_flush_and_later_jobs_still_run():
    worker, gate, done = SummaryWorker(), threading.Event(), []

    def boom() -> None:
        gate.wait(5)
        raise ValueError("boom")

    worker.submit(boom)
    worker.submit(lambda: done.append(1))
    gate.set()
    with pytest.raises(ValueError, match="boom"):
        worker.flush()
    worker.close()
    assert done == [1]


def test_a_job_done_before_the_next_submit_is_no_longer_waited_for():
    worker, done = SummaryWorker(), []

    def boom() -> None:
        raise ValueError("boom")

    worker.submit(boom)
    while not worker._pending[0].done():  # let it finish first
        threading.Event().wait(0.01)
    worker.submit(lambda: done.append(1))  # drops the finished job from the pending list
    worker.flush()
    assert done == [1]
    worker.close()


def test_forget_pending_stops_waiting_but_the_jobs_still_run():
    worker, gate, done = SummaryWorker(), threading.Event(), []
    worker.submit(lambda: (gate.wait(5), done.append(1)) and None)
    worker.forget_pending()
    worker.flush()  # returns at once: nothing to wait for
    assert done == []
    gate.set()
    worker.close()  # the thread finishes its queue before it stops
    assert done == [1]


def test_close_stops_the_thread_and_the_next_job_starts_another():
    worker, done = SummaryWorker(), []
    worker.close()  # never started: nothing to stop
    worker.submit(lambda: done.append(1))
    worker.close()
    worker.submit(lambda: done.append(2))
    worker.flush()
    assert done == [1, 2]
    worker.close()
