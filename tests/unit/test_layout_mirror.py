"""Every module of the core has its unit test file, in a layout that mirrors the parts.

``shared/ctxmgmt/<part>/<module>.py`` is tested in ``tests/unit/<part>/test_<module>.py``; a
module of a nested package joins the package names with ``_``
(``components/decider/llm.py`` -> ``tests/unit/components/test_decider_llm.py``), and a
leading underscore is dropped (``components/_coerce.py`` -> ``test_coerce.py``). A package's
``__init__.py`` counts as a module when it defines a function or a class (other than a module
``__getattr__``): ``store/__init__.py`` -> ``tests/unit/store/test_store.py``,
``app/data/__init__.py`` -> ``tests/unit/app/test_data.py``; one that only documents and
re-exports is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "ctxmgmt"
UNIT = ROOT / "tests" / "unit"

IN_FLIGHT: frozenset[str] = frozenset()
"""Modules (paths under ``shared/ctxmgmt``) whose owners are writing their test files; emptied on merge."""

MODULE_LEVEL_HOOKS = frozenset({"__getattr__", "__dir__"})
"""Functions a package ``__init__`` may define and still count as only re-exporting."""


def defines_something(path: Path) -> bool:
    """Whether the module defines a class or a function (other than a module ``__getattr__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name not in MODULE_LEVEL_HOOKS
        for node in tree.body
    )


def core_modules() -> list[str]:
    """Every core module that needs a unit test file, as a path under ``shared/ctxmgmt``."""
    modules = []
    for path in sorted(CORE.rglob("*.py")):
        relative = path.relative_to(CORE)
        if len(relative.parts) == 1 or "__pycache__" in relative.parts:
            continue  # the package's own __init__.py
        if relative.name == "__init__.py" and not defines_something(path):
            continue
        modules.append(relative.as_posix())
    return modules


def unit_test_file(module: str) -> Path:
    """Where the unit tests of ``module`` (a path under ``shared/ctxmgmt``) live."""
    part, *inner = module.removesuffix(".py").split("/")
    if inner[-1] == "__init__":
        inner = inner[:-1] or [part]
    name = "_".join(piece.lstrip("_") for piece in inner)
    return UNIT / part / f"test_{name}.py"


def test_the_mapping_follows_the_layout() -> None:
    assert unit_test_file("store/sqlite.py") == UNIT / "store" / "test_sqlite.py"
    assert unit_test_file("components/decider/llm.py") == UNIT / "components" / "test_decider_llm.py"
    assert unit_test_file("components/_coerce.py") == UNIT / "components" / "test_coerce.py"
    assert unit_test_file("store/__init__.py") == UNIT / "store" / "test_store.py"
    assert unit_test_file("app/data/__init__.py") == UNIT / "app" / "test_data.py"
    assert unit_test_file("app/bench/runner.py") == UNIT / "app" / "test_bench_runner.py"


def test_the_module_list_covers_every_part() -> None:
    modules = core_modules()
    parts = {module.split("/")[0] for module in modules}
    assert parts == {"messages", "scoring", "components", "strategies", "adapter", "store", "session", "app"}
    assert "store/__init__.py" in modules and "app/data/__init__.py" in modules
    assert "components/decider/__init__.py" not in modules  # documents and re-exports only
    assert "adapter/__init__.py" not in modules  # only the module __getattr__ of the old names


def test_every_core_module_has_its_unit_test_file() -> None:
    missing = [
        f"{module} -> {unit_test_file(module).relative_to(ROOT)}"
        for module in core_modules()
        if module not in IN_FLIGHT and not unit_test_file(module).is_file()
    ]
    assert missing == [], "modules without their unit test file:\n" + "\n".join(missing)


def test_in_flight_names_only_modules_that_still_lack_their_file() -> None:
    modules = set(core_modules())
    stale = sorted(module for module in IN_FLIGHT if module not in modules)
    assert stale == [], f"IN_FLIGHT names modules that do not exist (any more): {stale}"
    done = sorted(module for module in IN_FLIGHT if unit_test_file(module).is_file())
    assert done == [], f"these modules have their test file now; remove them from IN_FLIGHT: {done}"
