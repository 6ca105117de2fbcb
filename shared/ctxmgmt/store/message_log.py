"""Raw messages an adapter keeps itself, appended to a store one entry per message."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ctxmgmt.store.base import StaleStateError, StateStore, StoreError, TurnEntry, wait_after_conflict

RETRIES = 8
"""Attempts at an append when other writers keep winning the compare-and-set (a short random
wait before each retry, :func:`~ctxmgmt.store.base.wait_after_conflict`)."""


class MessageLog:
    """Raw messages an adapter keeps itself (a ``Memory`` block's flushed turns), in a store.

    Each message is one entry (``turn`` = its position), written as JSON data; appends are
    compare-and-set like derived state, so two workers never lose or duplicate a message.

    Args:
        store: Where the messages persist.
        key: The log's store key.
    """

    def __init__(self, store: StateStore, key: str) -> None:
        self.store = store
        self.key = key

    def load(self) -> list[Any]:
        """Every message, in order (empty if none)."""
        stored = self.store.load(self.key)
        if stored is None:
            return []
        return [stored.records[f"m[{i}]"] for i in range(len(stored.chains))]

    def append(self, messages: Sequence[Any]) -> None:
        """Append JSON-serialisable messages (retried on a concurrent append)."""
        self._write(messages, replace=False)

    def replace(self, messages: Sequence[Any]) -> None:
        """Replace every message by ``messages`` (an erasure: the old entries are deleted first)."""
        self._write(messages, replace=True)

    def _write(self, messages: Sequence[Any], *, replace: bool) -> None:
        for attempt in range(RETRIES):
            stored = self.store.load(self.key)
            start, version = (0, 0) if stored is None else (len(stored.chains), stored.version)
            try:
                if replace and stored is not None:
                    version = self.store.truncate(self.key, 0, expected_version=version)
                    start = 0
                entries = [
                    TurnEntry(start + i, _digest(m), {f"m[{start + i}]": m}) for i, m in enumerate(messages)
                ]
                if entries:
                    self.store.append(
                        self.key, entries, expected_version=version, strategy="messages", config={}
                    )
                return
            except StaleStateError:
                if attempt + 1 < RETRIES:
                    wait_after_conflict(attempt)
        raise StoreError(f"could not write {self.key!r} after {RETRIES} conflicts")


def _digest(message: Any) -> str:
    return hashlib.sha1(repr(message).encode("utf-8")).hexdigest()
