"""Tool-call arguments as the memory reads them: bounded in depth and size, never recursed into.

A tool call's arguments are whatever a model wrote: valid JSON may nest hundreds of levels
deep (Python's own recursion limit is 1,000 frames) or hold megabytes. The memory only scores,
renders and counts them, so :func:`bound_call` gives it a bounded copy of each call, once, when a
message is converted: arguments deeper than :data:`MAX_ARGS_DEPTH` levels or longer than
:data:`MAX_ARGS_CHARS` characters (as JSON) are replaced by the head of their JSON text and
their full size, from which their tokens are estimated (:func:`ctxmgmt.components.budget.message_tokens`).
The caller's message keeps its arguments as they were and is what the model receives.

Every walk here is iterative or bounded by :data:`MAX_ARGS_DEPTH`, so no structure can raise
``RecursionError``; :func:`args_snapshot` reads at most :data:`SNAPSHOT_NODES` values, so the
change check the adapters run on every call does not re-read large arguments.

Example:
    >>> call = bound_call({"id": "c1", "name": "f", "args": {"x": [[[[1]]]]}})
    >>> call["args"]
    {'x': [[[[1]]]]}
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

MAX_ARGS_DEPTH = 20
"""Most nesting levels of a tool call's arguments read as they are (a dict or list is a level;
real tools' arguments rarely go past 5). Deeper arguments are cut (:func:`bound_call`)."""
MAX_ARGS_CHARS = 24_000
"""Most characters of a tool call's arguments (their JSON text, estimated) read as they are: as
much as any component reads of one text (:data:`ctxmgmt.components.llm_call.MAX_INPUT_CHARS`),
so a file a coding tool writes is counted exactly. Longer arguments are cut."""
CUT_CHARS = 4_000
"""Characters of JSON text kept of cut arguments (their head), as of an unknown content block
(:data:`ctxmgmt.messages.types.MAX_BLOCK_CHARS`)."""
SNAPSHOT_NODES = 2_000
"""Most values (containers, keys, leaves) :func:`args_snapshot` reads of one structure."""
CUT_KEY = "ctxmgmt_cut"
"""Key of cut arguments' only entry: the head of their JSON text (ending with ``...``)."""
SIZE_KEY = "args_chars"
"""Key a cut call gains: its arguments' full size in characters of JSON (an estimate)."""

_SCALARS = (bool, int, float, type(None))


def _leaf_chars(value: Any) -> int:
    """Characters of a JSON leaf, estimated without writing it (a huge int is never printed)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return int(value.bit_length() * 0.302) + 2
    if isinstance(value, float):
        return 24
    return 16  # an object JSON cannot write: written as a short placeholder


def measure(value: Any) -> tuple[int, int]:
    """``(chars, depth)`` of ``value``: its JSON length (estimated) and its nesting depth.

    Iterative (any depth), one step per value. Containers are dicts, lists and tuples; strings
    count their length plus quotes, escapes aside.
    """
    chars, depth = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            depth = max(depth, level)
            chars += 2 + 4 * len(item)
            for key, inner in item.items():
                chars += _leaf_chars(key if isinstance(key, str) else str(key))
                stack.append((inner, level + 1))
        elif isinstance(item, list | tuple):
            depth = max(depth, level)
            chars += 2 + 2 * len(item)
            stack.extend((inner, level + 1) for inner in item)
        else:
            chars += _leaf_chars(item)
    return chars, depth


class _Full(Exception):
    """The head being written reached its size."""


def _write(value: Any, depth: int, out: list[str], room: list[int]) -> None:
    """Append ``value``'s JSON to ``out`` until ``room[0]`` characters are used (recursion bounded)."""

    def put(text: str) -> None:
        out.append(text[: room[0]])
        room[0] -= len(text)
        if room[0] <= 0:
            raise _Full

    if isinstance(value, dict | list | tuple) and depth >= MAX_ARGS_DEPTH:
        put("{...}" if isinstance(value, dict) else "[...]")
    elif isinstance(value, dict):
        put("{")
        for k, (key, inner) in enumerate(value.items()):
            put((", " if k else "") + json.dumps(str(key)[: room[0]], ensure_ascii=False) + ": ")
            _write(inner, depth + 1, out, room)
        put("}")
    elif isinstance(value, list | tuple):
        put("[")
        for k, inner in enumerate(value):
            if k:
                put(", ")
            _write(inner, depth + 1, out, room)
        put("]")
    elif isinstance(value, str):
        put(json.dumps(value[: room[0]], ensure_ascii=False))
    elif isinstance(value, float) and not math.isfinite(value):
        put(json.dumps(str(value)))
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        put(json.dumps(value))
    elif isinstance(value, int):
        put(str(value) if value.bit_length() < 4_000 else f'"<{value.bit_length()}-bit int>"')
    else:
        put(json.dumps(f"<{type(value).__name__}>"))


def head_json(value: Any, chars: int = CUT_CHARS) -> str:
    """The first ``chars`` characters of ``value``'s JSON text, ``...`` added when cut.

    Containers deeper than :data:`MAX_ARGS_DEPTH` are written ``{...}`` / ``[...]``; objects JSON
    cannot write as ``"<TypeName>"``. Costs at most about ``chars`` characters of work.
    """
    out: list[str] = []
    try:
        _write(value, 0, out, [chars])
    except _Full:
        return "".join(out) + " ..."
    return "".join(out)


def is_cut(call: Mapping[str, Any]) -> bool:
    """Whether ``call`` (a call :func:`bound_call` returned) had its arguments cut."""
    return SIZE_KEY in call


def bound_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """``call`` as the memory reads it: a dict whose ``args`` are bounded.

    A call whose arguments are within :data:`MAX_ARGS_DEPTH` levels and :data:`MAX_ARGS_CHARS`
    characters is returned as it is (the same dict). Others become ``{CUT_KEY: head}``
    (:func:`head_json`, at most :data:`CUT_CHARS` characters) and the call gains ``SIZE_KEY``:
    their full size in characters.
    A call already cut is returned as it is, so bounding is idempotent (saved messages load the same).
    """
    if is_cut(call):
        return call if isinstance(call, dict) else dict(call)
    args = call.get("args")
    chars, depth = measure(args)
    if depth <= MAX_ARGS_DEPTH and chars <= MAX_ARGS_CHARS:
        return call if isinstance(call, dict) else dict(call)
    return {**call, "args": {CUT_KEY: head_json(args)}, SIZE_KEY: chars}


def args_snapshot(value: Any) -> tuple[Any, ...]:
    """A cheap comparable snapshot of a structure (tool-call arguments, a content block).

    Reads at most :data:`SNAPSHOT_NODES` values, iteratively: keys and short strings as they
    are, a long string as its length and hash (CPython caches a string's hash, so an unchanged
    string is not read again), numbers with their type, objects through their ``__dict__``.
    Equal structures give equal snapshots; an edit within the values read, or any change of a
    length read, changes it. Past the limit, the containers left unread are named by identity,
    so a rebuilt copy is converted again (correct, only slower) while an in-place edit deep
    inside a very large structure may go unseen.
    """
    out: list[Any] = []
    stack: list[Any] = [value]
    read = 0
    while stack:
        read += 1
        if read > SNAPSHOT_NODES:
            out.append(("...", len(stack), tuple(id(x) for x in stack[-16:])))
            break
        item = stack.pop()
        kind = type(item)
        if kind is str:
            out.append(item if len(item) <= 256 else (len(item), hash(item)))
        elif isinstance(item, dict):
            out.append(("{", len(item)))
            pairs = list(itertools.islice(item.items(), SNAPSHOT_NODES))
            for key, inner in reversed(pairs):
                stack.append(inner)
                stack.append(key)
        elif isinstance(item, list | tuple):
            out.append((kind.__name__, len(item)))
            stack.extend(reversed(item[:SNAPSHOT_NODES]))
        elif isinstance(item, _SCALARS):
            out.append((kind.__name__, item))
        else:
            fields = getattr(item, "__dict__", None)
            out.append((kind.__name__,) if isinstance(fields, dict) else (kind.__name__, id(item)))
            if isinstance(fields, dict):
                stack.append(fields)
    return tuple(out)
