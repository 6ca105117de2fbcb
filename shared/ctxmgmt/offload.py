"""Where the async adapters run blocking work: one pool of long-lived threads per process.

``asyncio.to_thread`` uses the running loop's default executor, and a synchronous framework
call that wraps its async twin in ``asyncio.run`` (LlamaIndex ``Memory.get``) starts a new loop,
and so a new thread, on every call. PyTorch's OpenMP runtime keeps one team of compute
threads per calling thread, and the idle workers of each new team spin for a while, taking
the cores from the next call's. :func:`run_blocking` runs the work on threads that outlive
loops, so successive calls find their compute threads warm. ``Memory.get`` with a
TopicThread / DiscourseTree block at 300 turns on 2 CPU cores went from 27.9 / 38.4 ms to
22.8 / 22.5 ms p50 (``benchmarks/adapter_overhead.py``, the README's runs before and after).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
"""Threads of the pool (asyncio's default executor's size): the CPU count + 4, at most 32."""

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    """In a forked child the parent's threads do not exist: the next call starts a new pool."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX: pre-forking servers (gunicorn) fork after imports
    os.register_at_fork(after_in_child=_forget_pool)


def worker_pool() -> ThreadPoolExecutor:
    """The process's pool (started on first use); an idle thread is reused before a new one starts."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="ctxmgmt")
        return _pool


async def run_blocking(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``await func(*args, **kwargs)`` on the pool, as ``asyncio.to_thread`` but on long-lived threads.

    The caller's context variables are visible to ``func`` (as with ``asyncio.to_thread``).
    """
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(worker_pool(), call)
