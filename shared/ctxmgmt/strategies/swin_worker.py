"""SummaryWorker: one background thread that summarises SWin's windows in order."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class SummaryWorker:
    """Runs jobs in one worker thread, in the order submitted (SWin's ``background=True``).

    The thread starts with the first job and again after :meth:`close`. The worker holds no
    lock of its own: a job that must not run after a reset checks a generation number itself
    (:meth:`forget_pending` only stops waiting for the jobs submitted so far).

    Args:
        name: Prefix of the worker thread's name.
    """

    def __init__(self, name: str = "swin-summarizer") -> None:
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` in the worker thread after the jobs submitted before it."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._executor.submit(job))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every job submitted so far has run.

        The exception of a job still pending is raised here; a job that was done when a later
        one was submitted is no longer waited for (its exception is dropped).
        """
        pending, self._pending = self._pending, []
        for future in pending:
            future.result(timeout=timeout)

    def forget_pending(self) -> None:
        """Stop waiting for the jobs submitted so far (they still run; :meth:`flush` skips them)."""
        self._pending = []

    def close(self) -> None:
        """Wait for every job, then stop the thread (the next :meth:`submit` starts a new one)."""
        self.flush()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
