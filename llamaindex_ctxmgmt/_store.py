"""Derived state in a LlamaIndex key-value store (``SimpleKVStore``, Postgres, Redis, Mongo, ...).

``KVStateStore(kvstore)`` keeps each session in the collection
``"ctxmgmt/" + space_name(bounded_key(key))``: a ``meta`` item and one ``turn:{i:08d}`` item per turn (layout
in :mod:`ctxmgmt.store.items`). A ``SimpleKVStore`` lives in process (``persist()`` it
yourself); a server-backed kv store survives restarts.

A ``BaseKVStore`` has no transactions, so compare-and-set is exact only between the threads of
one process; across processes it is best effort (see :mod:`ctxmgmt.store.items`). Several
worker processes writing the same sessions should use ``store="postgresql://..."`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.storage.kvstore.types import BaseKVStore

from ctxmgmt.store import StateStore, open_store
from ctxmgmt.store.items import ItemStateStore

COLLECTION_PREFIX = "ctxmgmt/"


class KVStateStore(ItemStateStore):
    """A :class:`~ctxmgmt.store.StateStore` over a LlamaIndex ``BaseKVStore``.

    Args:
        kvstore: The key-value store (shared; :meth:`close` leaves it open).
        prefix: Collection name prefix (default ``"ctxmgmt/"``; a session's collection is
            the prefix + its escaped key, which holds only ``[A-Za-z0-9_%-]``).

    Example:
        >>> from llama_index.core.storage.kvstore import SimpleKVStore
        >>> state = KVStateStore(SimpleKVStore())
        >>> state.load("chat-1") is None
        True
    """

    backend_type = BaseKVStore

    def __init__(self, kvstore: BaseKVStore, *, prefix: str = COLLECTION_PREFIX) -> None:
        super().__init__(kvstore)
        self.kvstore = kvstore
        self.prefix = prefix

    def _collection(self, space: str) -> str:
        return self.prefix + space

    def _get_items(self, space: str, names: Sequence[str]) -> list[dict[str, Any] | None]:
        collection = self._collection(space)
        if len(names) == 1:
            return [self.kvstore.get(names[0], collection=collection)]
        everything = self.kvstore.get_all(collection=collection)  # one round trip
        return [everything.get(name) for name in names]

    def _put_items(self, space: str, items: Mapping[str, dict[str, Any]]) -> None:
        self.kvstore.put_all(list(items.items()), collection=self._collection(space))

    def _delete_items(self, space: str, names: Sequence[str]) -> None:
        collection = self._collection(space)
        for name in names:
            self.kvstore.delete(name, collection=collection)

    def _list_names(self, space: str) -> list[str]:
        return list(self.kvstore.get_all(collection=self._collection(space)))


def as_state_store(obj: Any) -> StateStore:
    """``obj`` as a state store.

    A LlamaIndex ``BaseKVStore`` is wrapped in :class:`KVStateStore`; anything else goes to
    :func:`ctxmgmt.store.open_store` (None, ``"sqlite:///memories.db"``, a PostgreSQL DSN, a
    ``StateStore`` object).

    Raises:
        ConfigurationError: ``obj`` names no store.
    """
    return open_store(obj, wrappers={BaseKVStore: KVStateStore})
