"""The store layout of a strategy's derived state: keyed records, and what changed since the last write.

:meth:`Strategy.to_state` is one JSON document; a store wants small records it can write
one turn at a time. :func:`flatten` splits the derived part of a state (everything but the
strategy name, config and turns) into records: a list becomes one record per element
(``name[7]``) plus a marker with its length (``name#``), a dict one record per entry
(``name{Paris}``) plus a marker, a :class:`~ctxmgmt.strategies.state.CappedLog` one record
per entry named by the entry's number since the log began (so trimming the oldest entry never
renames the others), anything else one record (``name``). Vectors (``numpy`` arrays) stay arrays, which the
stores write as float32 bytes; a frozen dataclass instance (a node that is replaced, never
mutated) is written as its fields. :func:`unflatten` is the inverse (dataclasses come back as
dicts). :class:`RecordTracker` remembers what was written so that after a turn only the
records that changed are written, and records that disappeared are written as None.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ctxmgmt.strategies.state import CappedLog, plain_fields

Records = dict[str, Any]

_ELEMENT = re.compile(r"^(?P<name>[^\[\]{}#]+)(?:\[(?P<index>\d+)\]|\{(?P<key>.*)\})$", re.S)


def flatten(state: Mapping[str, Any]) -> Records:
    """Records of ``state``'s top-level keys (see the module docstring)."""
    records: Records = {}
    for name, value in state.items():
        if isinstance(value, CappedLog):
            records[f"{name}#"] = ["log", len(value), value.cap]
            for number, element in enumerate(value, start=value.start):
                records[f"{name}[{number}]"] = element
        elif isinstance(value, list | tuple):
            records[f"{name}#"] = ["list", len(value)]
            for index, element in enumerate(value):
                records[f"{name}[{index}]"] = element
        elif isinstance(value, dict):
            records[f"{name}#"] = ["dict", len(value)]
            for key, element in value.items():
                records[f"{name}{{{key}}}"] = element
        else:
            records[name] = value
    return records


def unflatten(records: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten` (vectors come back as float32 arrays).

    A :class:`CappedLog` comes back as one, numbering kept. Dict entries come back in the
    order of ``records``.

    Raises:
        ValueError: a record's key does not belong to the layout (a corrupt record).
    """
    state: dict[str, Any] = {}
    elements: dict[str, dict[Any, Any]] = {}
    for key, value in records.items():
        if key.endswith("#"):
            state[key[:-1]] = _container(key, value)
            continue
        match = _ELEMENT.match(key)
        if match is None:
            state[key] = value
            continue
        name = match.group("name")
        slot = int(match.group("index")) if match.group("index") is not None else match.group("key")
        elements.setdefault(name, {})[slot] = value
    for name, items in elements.items():
        container = state.get(name)
        if isinstance(container, list):
            length = int(records[f"{name}#"][1])
            if len(items) != length or sorted(items) != list(range(length)):  # length first: it may be huge
                raise ValueError(f"list record {name!r} is missing elements")
            state[name] = [items[i] for i in range(length)]
        elif isinstance(container, CappedLog):
            length = int(records[f"{name}#"][1])
            start = min(items)
            if len(items) != length or sorted(items) != list(range(start, start + length)):
                raise ValueError(f"log record {name!r} is missing entries")
            state[name] = CappedLog(container.cap, (items[i] for i in range(start, start + length)), start)
        elif isinstance(container, dict):
            state[name] = dict(items)
        else:
            raise ValueError(f"records of {name!r} have no container marker")
    return state


def _container(key: str, marker: Any) -> Any:
    """The empty container a marker record stands for."""
    kind = marker[0] if isinstance(marker, list) and marker else None
    if kind == "list":
        return []
    if kind == "dict":
        return {}
    if kind == "log" and len(marker) == 3:
        return CappedLog(int(marker[2]))
    raise ValueError(f"record {key!r} is not a container marker: {marker!r:.80}")


def _digest(value: Any) -> bytes:
    """A digest of ``value`` that differs whenever its stored form would.

    JSON data is digested in ``marshal`` format 2 (exact types, floats as their 8 bytes, dict
    order kept, no references between equal objects, so equal data always gives equal bytes);
    it is ~10x faster than JSON text for vectors of floats. Anything marshal cannot write
    (numpy integers, dict subclasses) falls back to JSON text. Vectors: their float32 bytes.
    """
    if isinstance(value, np.ndarray):
        data = b"f32:" + np.ascontiguousarray(value, dtype="<f4").tobytes()
    else:
        try:
            data = b"m2:" + marshal.dumps(value, 2)
        except ValueError:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)
            data = b"json:" + text.encode("utf-8")
    return hashlib.blake2b(data, digest_size=20).digest()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, CappedLog):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_fields(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


_SCALARS = frozenset({str, int, float, bool, type(None)})


class RecordTracker:
    """What the records last written were, to find what a turn changed.

    Scalars are remembered as they are, other JSON data as a digest (:func:`_digest`).
    Vectors and frozen dataclass instances are compared by identity first: a strategy keeps
    the same object for a turn's vector or a node that does not change (and replaces, never
    mutates, one that does), so a long list of them costs one ``is`` check per element and
    nothing is serialised; the object is kept referenced so its identity cannot be reused.
    Records given to :meth:`reset` (a restored state) are digested on the first
    :meth:`changes`, so a restart that adds nothing never digests them.
    """

    def __init__(self) -> None:
        self._digests: dict[str, Any] = {}
        self._objects: dict[str, Any] = {}
        self._written: Mapping[str, Any] = {}

    def reset(self, records: Mapping[str, Any] | None = None) -> None:
        """Forget everything, or remember ``records`` as the state already written."""
        self._digests.clear()
        self._objects.clear()
        self._written = records or {}

    def changes(self, records: Mapping[str, Any]) -> Records:
        """Records that differ from the last written ones (removed ones as None); remembers them.

        Frozen dataclass instances come back as their fields (:func:`plain_fields`).
        """
        if self._written:
            written, self._written = self._written, {}
            for key, value in written.items():
                self._digests[key] = _fingerprint(value)
                if _by_identity(value):
                    self._objects[key] = value
        digests, objects = self._digests, self._objects
        changed: Records = {}
        for key, value in records.items():
            if type(value) in _SCALARS:
                fingerprint: Any = (type(value), value)
                objects.pop(key, None)
            elif _by_identity(value):
                if objects.get(key) is value:
                    continue
                objects[key] = value
                if not isinstance(value, np.ndarray):
                    value = plain_fields(value)
                fingerprint = _digest(value)
            else:
                objects.pop(key, None)
                fingerprint = _digest(value)
            if digests.get(key) != fingerprint:
                changed[key] = value
                digests[key] = fingerprint
        if len(digests) > len(records):
            for key in [k for k in digests if k not in records]:
                changed[key] = None
                del digests[key]
                objects.pop(key, None)
        return changed


def _by_identity(value: Any) -> bool:
    """Whether ``value`` is compared by identity first (a vector or a frozen dataclass instance)."""
    if isinstance(value, np.ndarray):
        return True
    params = getattr(value, "__dataclass_params__", None)
    return params is not None and params.frozen and not isinstance(value, type)


def _fingerprint(value: Any) -> Any:
    """What :class:`RecordTracker` remembers of a record: a scalar itself, else a digest."""
    if type(value) in _SCALARS:
        return (type(value), value)
    if _by_identity(value) and not isinstance(value, np.ndarray):
        value = plain_fields(value)
    return _digest(value)
