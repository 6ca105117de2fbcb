"""A throwaway PostgreSQL server for tests and benchmarks.

:func:`throwaway_postgres` starts a private server from the PostgreSQL server binaries
(Debian's ``/usr/lib/postgresql/<version>/bin`` first, then ``initdb`` on ``PATH``) in a
fresh temporary directory, reachable only through a unix socket in that directory (no TCP
port), with trust authentication; it yields a libpq conninfo string and, on exit, stops the
server (``pg_ctl stop -m immediate``) and deletes the directory. Run as root, the server
binaries run as the ``postgres`` user (``initdb`` refuses root). Nothing here is used by the
memories themselves, and nothing is imported beyond the standard library.

Example::

    from ctxmgmt.store import PostgresStore
    from ctxmgmt.store.testing import throwaway_postgres

    with throwaway_postgres() as dsn:      # "host=/tmp/ctxpg-... dbname=ctxmgmt user=postgres"
        store = PostgresStore(dsn)
        ...
        store.close()
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "PostgresUnavailableError",
    "postgres_bindir",
    "start_postgres",
    "stop_postgres",
    "throwaway_postgres",
]

PREFERRED_VERSION = "15"
"""Server version used when several are installed (then the newest)."""

DATABASE = "ctxmgmt"
"""Name of the database the throwaway server creates."""


class PostgresUnavailableError(RuntimeError):
    """No server can be started here: the binaries are missing, or there is no user to run them as.

    A failure *while* starting (initdb or pg_ctl exiting with an error) is a plain
    :class:`RuntimeError` instead: the binaries exist but something is wrong.
    """


def postgres_bindir() -> str | None:
    """Directory holding ``initdb`` and ``pg_ctl`` (Debian's layout first, then ``PATH``); None if none."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
        reverse=True,
    )
    preferred = f"/usr/lib/postgresql/{PREFERRED_VERSION}/bin/initdb"
    if preferred in candidates:
        candidates.remove(preferred)
        candidates.insert(0, preferred)
    which = shutil.which("initdb")
    if which:
        candidates.append(os.path.realpath(which))
    for initdb in candidates:
        bindir = os.path.dirname(initdb)
        if os.access(initdb, os.X_OK) and os.access(os.path.join(bindir, "pg_ctl"), os.X_OK):
            return bindir
    return None


@contextmanager
def throwaway_postgres(*, fsync: bool = False, max_connections: int = 200) -> Iterator[str]:
    """Start a private PostgreSQL server; yield its conninfo; stop it and delete its files on exit.

    The conninfo is ``"host=<socket dir> dbname=ctxmgmt user=postgres"`` (pass it to
    :class:`~ctxmgmt.store.PostgresStore` or ``psycopg.connect``).

    Args:
        fsync: Keep the server's durability settings (``fsync``, synchronous commit) on.
            Default off: the data is thrown away, and tests run faster.
        max_connections: The server's ``max_connections``.

    Raises:
        PostgresUnavailableError: the server binaries are not installed, or this runs as
            root and there is no ``postgres`` user to run them as.
        RuntimeError: ``initdb``, ``pg_ctl`` or ``createdb`` failed (the message holds
            their output and the server log).
    """
    bindir = postgres_bindir()
    if bindir is None:
        raise PostgresUnavailableError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's 'postgresql' "
            "package (.ci/run does this in CI)"
        )

    as_user: list[str] = []
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:  # initdb refuses to run as root
        import pwd

        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailableError(
                "running as root and there is no 'postgres' user to run the server as"
            ) from None
        as_user = ["runuser", "-u", "postgres", "--"]
        owner = (account.pw_uid, account.pw_gid)

    # A short path: a unix socket's path is limited to ~107 bytes.
    base = tempfile.mkdtemp(prefix="ctxpg-", dir="/tmp")
    data, log = os.path.join(base, "data"), os.path.join(base, "server.log")

    def run(*args: str, user: bool = True) -> None:
        cmd = [*(as_user if user else []), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            server_log = ""
            if os.path.exists(log):
                with open(log, encoding="utf-8", errors="replace") as f:
                    server_log = f.read()
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}\n{server_log}")

    durability = "" if fsync else " -c fsync=off"
    options = (
        f"-c listen_addresses='' -c unix_socket_directories={base}{durability} "
        f"-c max_connections={int(max_connections)}"
    )
    started = False
    try:
        if owner is not None:
            os.chown(base, *owner)
        run(
            f"{bindir}/initdb",
            "-D",
            data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        with open(os.path.join(base, _CONTROL), "w", encoding="utf-8") as f:
            json.dump({"as_user": as_user, "bindir": bindir, "data": data, "log": log, "options": options}, f)
        run(f"{bindir}/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start")
        started = True
        run(f"{bindir}/createdb", "-h", base, "-U", "postgres", DATABASE, user=False)
        yield f"host={base} dbname={DATABASE} user=postgres"
    finally:
        if started:
            subprocess.run(
                [*as_user, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


_CONTROL = "control.json"


def _control(conninfo: str) -> dict[str, object]:
    """How :func:`throwaway_postgres` started the server ``conninfo`` names."""
    base = conninfo.split("host=", 1)[1].split()[0]
    with open(os.path.join(base, _CONTROL), encoding="utf-8") as f:
        control: dict[str, object] = json.load(f)
    return control


def stop_postgres(conninfo: str, *, mode: str = "fast") -> None:
    """Stop a :func:`throwaway_postgres` server (its files stay; :func:`start_postgres` restarts it).

    Args:
        conninfo: What :func:`throwaway_postgres` yielded.
        mode: ``pg_ctl`` shutdown mode: ``"smart"``, ``"fast"`` (default: clients disconnected)
            or ``"immediate"`` (like a crash).
    """
    c = _control(conninfo)
    cmd = [*c["as_user"], f"{c['bindir']}/pg_ctl", "-D", str(c["data"]), "-m", mode, "-w", "stop"]  # type: ignore[misc]
    subprocess.run(cmd, capture_output=True, timeout=60, check=True)


def start_postgres(conninfo: str) -> None:
    """Start a :func:`throwaway_postgres` server again after :func:`stop_postgres`."""
    c = _control(conninfo)
    cmd = [
        *c["as_user"],  # type: ignore[misc]
        f"{c['bindir']}/pg_ctl",
        "-D",
        str(c["data"]),
        "-l",
        str(c["log"]),
        "-w",
        "-t",
        "60",
        "-o",
        str(c["options"]),
        "start",
    ]
    subprocess.run(cmd, capture_output=True, timeout=90, check=True)
