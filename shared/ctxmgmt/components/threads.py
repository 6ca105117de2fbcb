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
