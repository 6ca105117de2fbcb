"""Derived state in the LangGraph ``BaseStore`` an agent already has (``create_agent(store=...)``).

``LangGraphStateStore(store)`` keeps each session under the namespace
``("ctxmgmt", space_name(bounded_key(key)))``: a ``meta`` item and one ``turn:{i:08d}`` item per turn (layout
in :mod:`ctxmgmt.store.items`). It works with any ``BaseStore``: ``InMemoryStore``,
``PostgresStore``, ``AsyncPostgresStore`` (called from a worker thread), ``SqliteStore``, ...

A ``BaseStore`` has no transactions, so compare-and-set is exact only between the threads of
one process; across processes it is best effort (see :mod:`ctxmgmt.store.items`). Several
worker processes writing the same sessions should use ``store="postgresql://..."`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, PutOp

from ctxmgmt.store import StateStore, open_store
from ctxmgmt.store.items import ItemStateStore

NAMESPACE_ROOT = "ctxmgmt"
_PAGE = 1000


class LangGraphStateStore(ItemStateStore):
    """A :class:`~ctxmgmt.store.StateStore` over a LangGraph ``BaseStore``.

    Items are written with ``index=False`` (never embedded by a store configured for semantic
    search) and no TTL.

    Args:
        store: The LangGraph store (shared with the agent; :meth:`close` leaves it open).
        root: First namespace label (default ``"ctxmgmt"``).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> state = LangGraphStateStore(InMemoryStore())
        >>> state.load("thread-1") is None
        True
    """

    backend_type = BaseStore

    def __init__(self, store: BaseStore, *, root: str = NAMESPACE_ROOT) -> None:
        super().__init__(store)
        self.store = store
        self.root = root

    def _namespace(self, space: str) -> tuple[str, ...]:
        return (self.root, space)

    def _get_items(self, space: str, names: Sequence[str]) -> list[dict[str, Any] | None]:
        namespace = self._namespace(space)
        results = self.store.batch([GetOp(namespace, name, refresh_ttl=False) for name in names])
        return [dict(item.value) if isinstance(item, Item) else None for item in results]

    def _put_items(self, space: str, items: Mapping[str, dict[str, Any]]) -> None:
        namespace = self._namespace(space)
        self.store.batch(
            [PutOp(namespace, name, value, index=False, ttl=None) for name, value in items.items()]
        )

    def _delete_items(self, space: str, names: Sequence[str]) -> None:
        namespace = self._namespace(space)
        self.store.batch([PutOp(namespace, name, None, index=False, ttl=None) for name in names])

    def _list_names(self, space: str) -> list[str]:
        namespace = self._namespace(space)
        names: list[str] = []
        while True:
            page = self.store.search(namespace, limit=_PAGE, offset=len(names), refresh_ttl=False)
            names.extend(item.key for item in page if tuple(item.namespace) == namespace)
            if len(page) < _PAGE:
                return names


def as_state_store(obj: Any) -> StateStore:
    """``obj`` as a state store.

    A LangGraph ``BaseStore`` is wrapped in :class:`LangGraphStateStore`; anything else goes to
    :func:`ctxmgmt.store.open_store` (None, ``"sqlite:///memories.db"``, a PostgreSQL DSN, a
    ``StateStore`` object).

    Raises:
        ConfigurationError: ``obj`` names no store.
    """
    return open_store(obj, wrappers={BaseStore: LangGraphStateStore})
