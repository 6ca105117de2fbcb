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
    assert "ctxmgmt.types" in edges and "langchain_ctxmgmt" in edges
    assert tool.loops(edges) == []


def test_a_loop_through_a_package_init_is_found():
    tool = _tool()
    edges = {"p": {"p.a": ["x"]}, "p.a": {"q": ["y"]}, "q": {"p": ["z (in a function)"]}}
    assert tool.loops(edges) == [["p", "p.a", "q"]]
