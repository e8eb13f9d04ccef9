"""A throwaway PostgreSQL server for the tests: Debian's binaries, a cluster in a temp folder.

``initdb`` then ``pg_ctl start`` on a free port, listening on 127.0.0.1 with its socket in the
same temp folder (nothing of the machine's own PostgreSQL is touched), trust authentication
for local connections. initdb refuses to run as root, so as root every command runs as the
``postgres`` user (``runuser -u postgres --``). One cluster per test session; each test gets
its own database, copied from a migrated template (``CREATE DATABASE ... TEMPLATE``). The
tests' cluster (fsync off) lives in memory (``/dev/shm``) when there is room.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from itertools import count
from pathlib import Path

import psycopg

from bot.state import configured

#: Where Debian installs the server binaries (``apt-get install postgresql``).
BIN_GLOB = "/usr/lib/postgresql/*/bin"


def find_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries, or None."""
    found = sorted(glob.glob(BIN_GLOB), key=lambda p: int(Path(p).parent.name))
    for folder in reversed(found):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and shutil.which("pg_ctl") else None


#: Memory-backed folder for a non-durable cluster, used when it has this much room: every test
#: copies a database (~10 MB of small files), and on this project's VMs writing then deleting
#: them on disk took ~150 s of a suite (300 copies: 75 s to create, 80 s to remove) against
#: ~25 s in memory.
MEMORY_DIR = "/dev/shm"
MEMORY_DIR_MIN_FREE = 8 << 30


def cluster_parent(durable: bool) -> str | None:
    """Where a cluster's folder goes: in memory unless its commits must reach a disk."""
    if durable:
        return None
    try:
        st = os.statvfs(MEMORY_DIR)
    except OSError:
        return None
    return MEMORY_DIR if st.f_bavail * st.f_frsize >= MEMORY_DIR_MIN_FREE else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresCluster:
    """A cluster of our own: ``start``, ``restart``, ``stop``, and a fresh database per test."""

    def __init__(self, bin_dir: Path, *, durable: bool = False):
        """``durable``: commits wait for the disk (fsync), as in production; the tests turn
        that off, the benchmark keeps it."""
        self.bin_dir = bin_dir
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="paperboy-pg-", dir=cluster_parent(durable)))
        self.data = self.root / "data"
        self.port = free_port()
        self._names = count(1)
        self.template: str | None = None  # a migrated database new ones are copied from
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, timeout=120, cwd=self.root
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> PostgresCluster:
        if not self.data.exists():
            self._run(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data),
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--no-sync",
            )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
        options += "-c max_connections=300"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """Stop (dropping every connection) and start again on the same port."""
        self.stop()
        self.start()

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self, template: str | None = None) -> str:
        """A new, empty database (or a copy of ``template``); its URL."""
        name = f"test_{next(self._names)}"
        self._admin(f"create database {name}" + (f" template {template}" if template else ""))
        return self.url(name)


def state_env() -> dict[str, str]:
    """``DATABASE_URL`` for a child process, when this one keeps its state in PostgreSQL."""
    store = configured()
    if store is None or not store.is_postgres:
        return {}
    return {"DATABASE_URL": store.url.set(drivername="postgresql").render_as_string(False)}
