"""Copies and pickles of objects that hold process resources (locks, threads, connections).

What a copy (``copy.deepcopy``, ``pickle``, pydantic ``model_copy(deep=True)``) of a memory,
middleware, selector or block carries:

- its configuration (every field or keyword argument);
- the raw history it keeps itself: a default chat history or ``SimpleChatStore``, a block's
  flushed messages (copied, so the copy's history is its own);
- every live conversation whole: converted history, derived state (the data
  ``Strategy.to_state()`` persists, plus content-keyed caches such as embeddings) and any
  backlog, which the copy goes on deriving in the background. The copy selects what the
  original would for the same history and question without deriving anything again (no
  re-embedding, no LLM call); what either adds later is its own.

What it never carries: a process resource (a lock, a thread, a thread pool, a connection, an
event loop). A copy makes its own (each class's ``__getstate__``/``__setstate__``), taken
under the conversation's lock so a copy made while the background worker derives is consistent.

Shared, not copied, by a deep copy (:func:`share`): components (embedders, summarisers,
deciders, entity extractors, token counters, LLM clients), which are read-only models or
clients, some of them hundreds of megabytes; stores, database chat stores and a graph's store,
which are connections. A pickle carries components by value (the shipped ones as their
configuration: models load again, once per process) and stores as where they point (SQLite
path, PostgreSQL DSN; an in-process store with its content). A copy on the same store and
session id shares that session's stored state: give it its own session id to diverge there.
A middleware's or selector's pickle leaves out threads kept in the agent's own store (that
store is the graph's): the copy's first call with that store loads them from it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any


def share(memo: dict[int, Any], objects: Iterable[Any]) -> dict[int, Any]:
    """Make ``copy.deepcopy(..., memo)`` keep ``objects`` as they are: shared with the copy.

    Each is also kept alive for as long as ``memo`` is (as ``copy`` does itself), so an id in
    ``memo`` never names another object. Returns ``memo``.
    """
    keep = memo.setdefault(id(memo), [])
    for obj in objects:
        if obj is not None and id(obj) not in memo:
            memo[id(obj)] = obj
            keep.append(obj)
    return memo


def deep_copy(obj: Any, memo: dict[int, Any] | None, shared: Iterable[Any]) -> Any:
    """``copy.deepcopy(obj, memo)`` sharing ``shared`` (see :func:`share`)."""
    return copy.deepcopy(obj, share({} if memo is None else memo, shared))
