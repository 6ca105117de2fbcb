"""How many torch threads a short forward pass, and the background worker, run on."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

SMALL_CALL_THREADS = 1
"""torch intra-op threads of a small call (up to ``FROZEN_MAX_TEXTS`` texts in
:mod:`ctxmgmt.components.embedder`: a question, a new turn, a background step), of spaCy's
matrix products, and of every call made in :func:`background_threads`; larger calls keep torch's
own setting. A second thread barely speeds a short forward pass on an idle machine, and on a busy
one each of its ~100 operator barriers waits for the other thread to be scheduled: one question
took p50 90-510 ms with 2 threads against 20-29 ms with 1, with 8-10 runnable processes on 2 cores
(``torch.set_num_threads`` acts on the calling thread under OpenMP: running threads keep theirs)."""

_BACKGROUND = threading.local()


@contextlib.contextmanager
def background_threads() -> Iterator[None]:
    """Within it, this thread's embeddings run on :data:`SMALL_CALL_THREADS` torch threads, any size.

    The background worker derives under it (:mod:`ctxmgmt.session.conversation`), so it never takes
    more than one core from the calls it runs beside.
    """
    before = getattr(_BACKGROUND, "on", False)
    _BACKGROUND.on = True
    try:
        yield
    finally:
        _BACKGROUND.on = before


@contextlib.contextmanager
def small_call_threads(*, small: bool = True) -> Iterator[None]:
    """Run a ``small`` call, or any call in :func:`background_threads`, on few torch threads.

    :data:`SMALL_CALL_THREADS` threads, restored after; a no-op until torch is loaded.
    """
    torch = sys.modules.get("torch")
    if torch is None or not (small or getattr(_BACKGROUND, "on", False)):
        yield
        return
    before = torch.get_num_threads()
    if before <= SMALL_CALL_THREADS:
        yield
        return
    torch.set_num_threads(SMALL_CALL_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


BLAS_THREADS: int | None = 1
"""Threads of numpy's BLAS (OpenBLAS) while a conversation answers or derives; None = leave it alone.

Every matrix product of a call is small (a question against a few hundred turn vectors, a
summary window's word overlaps) and OpenBLAS's threads spin at each one until the others are
scheduled: 100 products of 64 x 400 took 0.07 s with its default 2 threads on an idle 2-core
machine and 0.4-2.3 s at load average 3-4, against 0.005-0.012 s on one thread. OpenBLAS's
setting is process-wide: it is lowered while any ctxmgmt call runs and restored after the last
(other threads' products in between run on one thread too)."""

_BLAS_LOCK = threading.Lock()
_blas_users = 0
_blas_before: list[tuple[object, int]] = []
_blas_libraries: list[object] | None = None


def _blas() -> list[object]:
    """The BLAS libraries numpy loaded that can be told a thread count (none without threadpoolctl)."""
    global _blas_libraries
    if _blas_libraries is None:
        try:
            from threadpoolctl import ThreadpoolController

            found = ThreadpoolController().lib_controllers
        except Exception:  # threadpoolctl missing or failing: leave BLAS as it is
            found = []
        libraries = [lib for lib in found if getattr(lib, "user_api", "") == "blas"]
        if "numpy" not in sys.modules:
            return libraries  # numpy's own BLAS is not loaded yet: look again next time
        _blas_libraries = libraries
    return _blas_libraries


@contextlib.contextmanager
def few_blas_threads() -> Iterator[None]:
    """Run numpy's BLAS on :data:`BLAS_THREADS` threads within it (nested, concurrent uses counted)."""
    global _blas_users
    if BLAS_THREADS is None:
        yield
        return
    with _BLAS_LOCK:
        if _blas_users == 0:
            _blas_before.clear()
            for lib in _blas():
                threads = lib.num_threads  # type: ignore[attr-defined]
                if threads > BLAS_THREADS:
                    _blas_before.append((lib, threads))
                    lib.set_num_threads(BLAS_THREADS)  # type: ignore[attr-defined]
        _blas_users += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _blas_users -= 1
            if _blas_users == 0:
                for lib, threads in _blas_before:
                    lib.set_num_threads(threads)  # type: ignore[attr-defined]
                _blas_before.clear()
