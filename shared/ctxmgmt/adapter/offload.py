"""Where the async adapters run blocking work: one pool of long-lived threads per process.

``asyncio.to_thread`` uses the running loop's default executor, and a synchronous framework
call that wraps its async twin in ``asyncio.run`` (LlamaIndex ``Memory.get``) starts a new loop,
and so a new thread, on every call. PyTorch's OpenMP runtime keeps one team of compute
threads per calling thread, and the idle workers of each new team spin for a while, taking
the cores from the next call's. :func:`run_blocking` runs the work on threads that outlive
loops, so successive calls find their compute threads warm. ``Memory.get`` with a
TopicThread / DiscourseTree block at 300 turns on 2 CPU cores went from 27.9 / 38.4 ms to
22.8 / 22.5 ms p50 (``benchmarks/adapter_overhead.py``, the README's runs before and after).

Work of conversations with a state store runs on a second pool (:func:`run_blocking_stored`)
and the store calls themselves on a third (:func:`store_pool`, under each call's deadline), so
a store that stops answering never takes the threads of conversations that use none. Every
pool is re-created in a forked child (``os.register_at_fork``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
"""Threads of each pool (asyncio's default executor's size): the CPU count + 4, at most 32."""

STORE_WORKERS = 32
"""Threads of the pool that runs state-store calls (:func:`store_pool`). A call waits for a
store at most its deadline; a thread whose call was abandoned (a store that stopped
answering) stays busy until the driver gives up, so this pool is larger than the others."""

_lock = threading.Lock()
_pools: dict[str, ThreadPoolExecutor] = {}
_SIZES = {"ctxmgmt": MAX_WORKERS, "ctxmgmt-stored": MAX_WORKERS, "ctxmgmt-store": STORE_WORKERS}


def _forget_pool() -> None:
    """In a forked child the parent's threads do not exist: the next call starts new pools."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX: pre-forking servers (gunicorn) fork after imports
    os.register_at_fork(after_in_child=_forget_pool)


def _named_pool(name: str) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=_SIZES[name], thread_name_prefix=name)
        return pool


def worker_pool() -> ThreadPoolExecutor:
    """The process's pool (started on first use); an idle thread is reused before a new one starts."""
    return _named_pool("ctxmgmt")


def stored_pool() -> ThreadPoolExecutor:
    """The pool of :func:`run_blocking_stored`: work of conversations that use a state store."""
    return _named_pool("ctxmgmt-stored")


def store_pool() -> ThreadPoolExecutor:
    """The pool state-store calls run on under a deadline (:class:`ctxmgmt.store.CircuitStore`)."""
    return _named_pool("ctxmgmt-store")


async def run_blocking(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``await func(*args, **kwargs)`` on the pool, as ``asyncio.to_thread`` but on long-lived threads.

    The caller's context variables are visible to ``func`` (as with ``asyncio.to_thread``).
    """
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(worker_pool(), call)


async def run_blocking_stored(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """:func:`run_blocking` for work that calls a state store, on a pool of its own.

    A store that stops answering holds such work up to the store's deadline; on its own pool
    it can never take the threads of conversations that use no store, which keep answering.
    """
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(stored_pool(), call)


def run_blocking_for(uses_store: bool) -> Callable[..., Any]:
    """:func:`run_blocking_stored` if ``uses_store``, else :func:`run_blocking`."""
    return run_blocking_stored if uses_store else run_blocking
