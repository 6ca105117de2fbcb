"""Runs of consecutive turn indices, and their compact labels (``"0-2,5"``).

Also importable from :mod:`ctxmgmt.messages.context`.
"""

from __future__ import annotations

from collections.abc import Sequence


def runs(indices: Sequence[int]) -> list[list[int]]:
    """Split ascending indices into runs of consecutive values: ``[0, 1, 2, 5]`` -> ``[[0, 1, 2], [5]]``."""
    out: list[list[int]] = []
    for i in indices:
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def span_label(turns: Sequence[int], sep: str = ",") -> str:
    """Compact label of turn indices: ``[0, 1, 2, 5]`` -> ``"0-2,5"``; ``"-"`` for none."""
    label = sep.join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs(sorted(turns)))
    return label or "-"
