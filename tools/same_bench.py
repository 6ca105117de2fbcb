"""Whether two ``ctxmgmt bench --json`` files hold the same records but for timings.

Run: ``python tools/same_bench.py before.json after.json``; exit code 0 when every record
(summaries, per category, per question) is identical once timing fields (names with ``_ms`` or
``_s``) are left out, else 1 with the first differences.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

TIMING = re.compile(r"(_ms(_|$))|(_s$)|(^seconds$)")


def without_timings(value: Any) -> Any:
    """``value`` with timing fields dropped and NaN made comparable."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if not TIMING.search(k)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main(argv: list[str] | None = None) -> int:
    before, after = (json.load(open(p, encoding="utf-8")) for p in (argv or sys.argv[1:]))
    found = differences(without_timings(before), without_timings(after))
    records = sum(len(m.get("questions", [])) + 1 for m in before.get("memories", []))
    if found:
        print(f"{len(found)} differences; first ones:")
        print("\n".join(found[:20]))
        return 1
    print(f"identical but for timings: {len(before.get('memories', []))} rows, {records} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
