"""A strategy's derived state as keyed records, and what changed since the last write.

:meth:`Strategy.to_state` is one JSON document; a store wants small records it can write
one turn at a time. :func:`flatten` splits the derived part of a state (everything but the
strategy name, config and turns) into records: a list becomes one record per element
(``name[7]``) plus a marker with its length (``name#``), a dict one record per entry
(``name{Paris}``) plus a marker, anything else one record (``name``). Vectors (``numpy``
arrays) stay arrays, which the stores write as float32 bytes. :func:`unflatten` is the
inverse. :class:`RecordTracker` remembers a digest per record so that after a turn only the
records that changed are written, and records that disappeared are written as None.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

Records = dict[str, Any]

_ELEMENT = re.compile(r"^(?P<name>[^\[\]{}#]+)(?:\[(?P<index>\d+)\]|\{(?P<key>.*)\})$", re.S)


def flatten(state: Mapping[str, Any]) -> Records:
    """Records of ``state``'s top-level keys (see the module docstring)."""
    records: Records = {}
    for name, value in state.items():
        if isinstance(value, list | tuple):
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

    Raises:
        ValueError: a record's key does not belong to the layout (a corrupt record).
    """
    state: dict[str, Any] = {}
    elements: dict[str, dict[Any, Any]] = {}
    for key, value in records.items():
        if key.endswith("#"):
            kind, _ = value
            state[key[:-1]] = [] if kind == "list" else {}
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
            if sorted(items) != list(range(length)):
                raise ValueError(f"list record {name!r} is missing elements")
            state[name] = [items[i] for i in range(length)]
        elif isinstance(container, dict):
            state[name] = dict(items)
        else:
            raise ValueError(f"records of {name!r} have no container marker")
    return state


def _digest(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "f32:" + hashlib.sha1(np.ascontiguousarray(value, dtype="<f4").tobytes()).hexdigest()
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON data")


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into plain lists and numbers."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


class RecordTracker:
    """Digests of the records last written, to find what a turn changed.

    Arrays are compared by identity first (a strategy keeps the same array object for a
    turn's vector), so a long list of vectors costs one ``id`` check per element.
    """

    def __init__(self) -> None:
        self._digests: dict[str, str] = {}
        self._arrays: dict[str, int] = {}

    def reset(self, records: Mapping[str, Any] | None = None) -> None:
        """Forget everything, or remember ``records`` as the state already written."""
        self._digests.clear()
        self._arrays.clear()
        for key, value in (records or {}).items():
            self._remember(key, value)

    def _remember(self, key: str, value: Any) -> None:
        self._digests[key] = _digest(value)
        if isinstance(value, np.ndarray):
            self._arrays[key] = id(value)
        else:
            self._arrays.pop(key, None)

    def changes(self, records: Mapping[str, Any]) -> Records:
        """Records that differ from the last written ones (removed ones as None); remembers them."""
        changed: Records = {}
        for key, value in records.items():
            if isinstance(value, np.ndarray) and self._arrays.get(key) == id(value):
                continue
            digest = _digest(value)
            if self._digests.get(key) != digest:
                changed[key] = value
            self._digests[key] = digest
            if isinstance(value, np.ndarray):
                self._arrays[key] = id(value)
            else:
                self._arrays.pop(key, None)
        for key in [k for k in self._digests if k not in records]:
            changed[key] = None
            del self._digests[key]
            self._arrays.pop(key, None)
        return changed
