"""Plain-data building blocks of a strategy's state, and its conversion to JSON data.

Strategies keep their derived state as plain data (JSON-serialisable values, numpy vectors,
frozen dataclasses, :class:`CappedLog` s) so that stores can persist it without pickling
(:mod:`ctxmgmt.store.records` writes it as records).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np

T = TypeVar("T")
U = TypeVar("U")


class CappedLog(Sequence[T], Generic[T]):
    """The newest ``cap`` entries of an append-only log, numbered from the log's first entry.

    For diagnostic logs that keep only their newest entries. :func:`flatten` stores entry
    number ``n`` as record ``name[n]``: appending writes one record and the entry that falls
    off the front one tombstone, however long the log has run (a plain list trimmed from the
    front would rename, and so rewrite, every element on every append). Reads like a list of
    its entries; :func:`jsonable` and :meth:`Strategy.to_state` turn it into one.

    Args:
        cap: Most entries kept (the oldest go first); >= 1.
        entries: Initial entries, oldest first (only the newest ``cap`` are kept).
        start: Number of the first of ``entries`` (how many were dropped before it); 0.
    """

    def __init__(self, cap: int, entries: Iterable[T] = (), start: int = 0) -> None:
        if cap < 1:
            raise ValueError(f"a CappedLog keeps at least one entry, not {cap}")
        self.cap = cap
        self.start = start
        self._entries: list[T] = list(entries)
        self._trim()

    @classmethod
    def restored(cls, cap: int, value: Iterable[T]) -> CappedLog[T]:
        """A log of ``cap`` entries from a stored one (numbering kept) or a plain list (numbered from 0)."""
        return cls(cap, value, value.start if isinstance(value, CappedLog) else 0)

    def append(self, entry: T) -> None:
        """Add ``entry`` as the newest, dropping the oldest beyond ``cap``."""
        self._entries.append(entry)
        self._trim()

    def map(self, convert: Callable[[T], U]) -> CappedLog[U]:
        """A new log of ``convert(entry)`` for every entry, with the same cap and numbering."""
        return CappedLog(self.cap, (convert(e) for e in self._entries), self.start)

    def _trim(self) -> None:
        extra = len(self._entries) - self.cap
        if extra > 0:
            del self._entries[:extra]
            self.start += extra

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        return iter(self._entries)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._entries[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CappedLog):
            return (self.start, self._entries) == (other.start, other._entries)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CappedLog(cap={self.cap}, start={self.start}, entries={self._entries!r})"


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def plain_fields(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict(obj)``, several times faster on the plain data strategies keep.

    The same result (nested dataclasses become dicts; lists, tuples and dicts are copied; other
    objects deep-copied), without ``asdict``'s per-value ``deepcopy``: a strategy's state is
    built from it after every turn it persists.
    """
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in dataclasses.fields(obj))
    return {name: _plain(getattr(obj, name)) for name in names}


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        out = list(value)
        for i, element in enumerate(out):
            if type(element) not in _SCALARS:
                out[i] = _plain(element)
        return out
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_fields(value)
    return copy.deepcopy(value)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data.

    Numpy arrays and scalars become lists and numbers, dataclass instances dicts of their
    fields, a :class:`CappedLog` the list of its entries.
    """
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(plain_fields(value))
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | CappedLog):
        return [jsonable(v) for v in value]
    return value
