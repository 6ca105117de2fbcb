"""The adapter kit, shared by both framework adapters.

What they derive from a strategy class (:mod:`~ctxmgmt.adapter.kit`), where their blocking work runs
(:mod:`~ctxmgmt.adapter.offload`) and how their objects are copied (:mod:`~ctxmgmt.adapter.copying`).

``ctxmgmt.adapter`` was one module before round 4; its names now live in :mod:`ctxmgmt.adapter.kit`
and are still readable here, with a ``DeprecationWarning``, until the next release.
"""

import warnings
from typing import Any

_PARTS = frozenset({"kit", "offload", "copying"})
"""The package's modules: ``from ctxmgmt.adapter import kit`` imports them, never this hook."""


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in _PARTS:
        raise AttributeError(name)  # a module not imported yet: the import system loads it
    from ctxmgmt.adapter import kit

    if not hasattr(kit, name):
        raise AttributeError(f"module 'ctxmgmt.adapter' has no attribute {name!r}")
    warnings.warn(
        f"ctxmgmt.adapter.{name} moved to ctxmgmt.adapter.kit.{name}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(kit, name)
