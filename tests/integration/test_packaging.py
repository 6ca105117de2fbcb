"""The built wheel holds all three packages, their py.typed markers and the demo data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        check=True,
        cwd=out,
    )
    (built,) = out.glob("ctxmgmt-*.whl")
    return built


@pytest.mark.slow
def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("ctxmgmt", "langchain_ctxmgmt", "llamaindex_ctxmgmt"):
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names
    assert "ctxmgmt/app/data/demo_conversation.json" in names
    assert "ctxmgmt/components/static_minilm/static_minilm.npz" in names
    assert "ctxmgmt/components/static_minilm/static_minilm_turns.npz" in names
    for part in ("messages", "scoring", "components", "strategies", "session", "store", "adapter", "app"):
        assert f"ctxmgmt/{part}/__init__.py" in names
    assert not any(n.startswith(("shared/", "tests/")) for n in names)


@pytest.mark.slow
def test_installed_wheel_imports_all_packages(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
    )
    code = (
        "import ctxmgmt, langchain_ctxmgmt, llamaindex_ctxmgmt\n"
        "from ctxmgmt.app.data import load_demo\n"
        f"assert ctxmgmt.__file__.startswith({str(target)!r}), ctxmgmt.__file__\n"
        f"assert langchain_ctxmgmt.__file__.startswith({str(target)!r})\n"
        f"assert llamaindex_ctxmgmt.__file__.startswith({str(target)!r})\n"
        "assert load_demo().questions\n"
        "from ctxmgmt.components.static_embedder import shipped_model_paths\n"
        "assert all(path.is_file() for path in shipped_model_paths())\n"
        "print('ok')\n"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
