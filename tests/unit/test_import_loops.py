"""The core and both adapters import each other in one direction only, imports inside functions too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "import_loops.py"


def _tool():
    spec = importlib.util.spec_from_file_location("import_loops", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_loops_counting_imports_inside_functions():
    tool = _tool()
    edges = tool.graph()
    assert "ctxmgmt.messages.types" in edges and "langchain_ctxmgmt" in edges
    assert tool.loops(edges) == []


def test_a_loop_through_a_package_init_is_found():
    tool = _tool()
    edges = {"p": {"p.a": ["x"]}, "p.a": {"q": ["y"]}, "q": {"p": ["z (in a function)"]}}
    assert tool.loops(edges) == [["p", "p.a", "q"]]


#: The core's parts from the bottom up (``ctxmgmt/__init__.py``, ``docs/architecture.md``).
PARTS = ("messages", "scoring", "components", "strategies", "adapter", "store", "session", "app")


def test_the_core_is_eight_parts_and_each_imports_only_the_parts_below_it():
    tool = _tool()
    core = Path(__file__).resolve().parents[2] / "shared" / "ctxmgmt"
    entries = {p.name for p in core.iterdir() if p.name not in {"__init__.py", "py.typed", "__pycache__"}}
    assert entries == set(PARTS)
    upward = []
    for source, targets in tool.graph().items():
        if source.count(".") < 1 or not source.startswith("ctxmgmt."):
            continue
        low = PARTS.index(source.split(".")[1])
        for target, where in targets.items():
            if target.startswith("ctxmgmt.") and PARTS.index(target.split(".")[1]) > low:
                upward.append(f"{source} -> {target} ({where[0]})")
    assert upward == []
