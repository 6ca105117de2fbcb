"""The throwaway PostgreSQL server (``ctxmgmt.store.testing``), driven here by fake server binaries.

Fake ``initdb``, ``pg_ctl`` and ``createdb`` scripts record how they were called, so the
module's steps (start, control file, stop, restart, clean-up) are checked without starting a
server; ``tests/conftest.py``'s ``postgres_dsn`` fixture starts the real one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxmgmt.store import testing
from ctxmgmt.store.testing import (
    DATABASE,
    PostgresUnavailableError,
    postgres_bindir,
    start_postgres,
    stop_postgres,
    throwaway_postgres,
)

SCRIPT = '#!/bin/sh\necho "$(basename "$0") $*" >> "{log}"\n'


@pytest.fixture
def fake_bin(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A folder of fake server binaries, found by ``postgres_bindir``; and the log they write."""
    bindir, calls = tmp_path / "bin", tmp_path / "calls.log"
    bindir.mkdir()
    for name in ("initdb", "pg_ctl", "createdb"):
        script = bindir / name
        script.write_text(SCRIPT.format(log=calls))
        script.chmod(0o755)
    monkeypatch.setattr(testing.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(testing.shutil, "which", lambda name: str(bindir / name))
    monkeypatch.setattr(testing.os, "geteuid", lambda: 1000)  # not root: no runuser
    return bindir, calls


def test_the_binaries_are_found_on_the_path(fake_bin) -> None:
    bindir, _ = fake_bin
    assert postgres_bindir() == os.path.realpath(bindir)


def test_no_binaries_means_no_server(monkeypatch) -> None:
    monkeypatch.setattr(testing.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(testing.shutil, "which", lambda name: None)
    assert postgres_bindir() is None
    with pytest.raises(PostgresUnavailableError, match="initdb, pg_ctl"), throwaway_postgres():
        pass
    assert issubclass(PostgresUnavailableError, RuntimeError)


def test_a_server_is_started_stopped_restarted_and_its_files_removed(fake_bin) -> None:
    _, calls = fake_bin
    with throwaway_postgres(max_connections=7) as dsn:
        host = dsn.split("host=", 1)[1].split()[0]
        assert dsn == f"host={host} dbname={DATABASE} user=postgres"
        control = json.loads((Path(host) / "control.json").read_text())
        assert control["as_user"] == [] and "max_connections=7" in control["options"]
        assert "fsync=off" in control["options"]
        stop_postgres(dsn, mode="immediate")
        start_postgres(dsn)
    assert not Path(host).exists()
    lines = calls.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [
        "initdb",
        "pg_ctl",
        "createdb",
        "pg_ctl",
        "pg_ctl",
        "pg_ctl",
    ]
    assert lines[1].endswith("start") and "-m immediate" in lines[3] and lines[4].endswith("start")
    assert lines[-1].endswith("stop") and "-m immediate" in lines[-1]


def test_a_failing_step_raises_with_its_output_and_cleans_up(fake_bin, monkeypatch) -> None:
    bindir, _ = fake_bin
    (bindir / "initdb").write_text("#!/bin/sh\necho 'disk full' >&2\nexit 1\n")
    made: list[str] = []
    real_mkdtemp = testing.tempfile.mkdtemp

    def mkdtemp(**kwargs: str) -> str:
        made.append(real_mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(testing.tempfile, "mkdtemp", mkdtemp)
    with pytest.raises(RuntimeError, match="disk full"), throwaway_postgres():
        pass
    assert made and not Path(made[0]).exists()
