"""Start real redis-server processes on free loopback ports, for tests.

Used by the store conformance suite and reusable by the gRPC end-to-end tests:
``start_redis_server`` (standalone, AOF on), ``RedisServer.restart`` (same port
and directory, so AOF persistence can be checked), ``start_redis_cluster``
(N masters, optionally each with replicas, built with ``redis-cli --cluster
create``) and, for failover tests, ``RedisClusterHandle.master_of`` and
``wait_slot_master`` (a replica promoted and serving a slot).  A missing binary is a
hard failure with an install hint, never a skip.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

STARTUP_TIMEOUT = 15.0
INSTALL_HINT = (
    "the store tests need a real redis-server and redis-cli on PATH; "
    "install them (Debian/Ubuntu: apt-get install -y redis-server) or run "
    "scripts/test.sh, which does it"
)


def require_binaries() -> tuple[str, str]:
    """Paths of redis-server and redis-cli, or a RuntimeError saying how to get them."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if not server or not cli:
        raise RuntimeError(INSTALL_HINT)
    return server, cli


# Ports handed out by free_port: below the kernel's ephemeral range (32768 and up on
# Linux), where bind(("127.0.0.1", 0)) -- every in-process sidecar's listen port --
# and outgoing connections take theirs, and split between pytest-xdist workers
# (PYTEST_XDIST_WORKER=gwN of PYTEST_XDIST_WORKER_COUNT): a port one worker picked and
# released is never the one another worker picks before the first has bound it. A
# cluster node's bus port is port + 10000, inside [BUS_PORTS_FROM, BUS_PORTS_FROM +
# 10000): apart from every worker's ports too. Two pytest runs at once (scripts/test.sh
# runs the .venv-lowest and .venv-newest passes side by side) each get a part of the
# range with PYTEST_MEMLINEAGE_PORTS=FIRST-LAST (inside 10000-19999), split in turn
# between that run's workers.
PORTS_FROM = 10000
BUS_PORTS_FROM = PORTS_FROM + 10000
_next_port: list[int] = []


def _run_ports() -> range:
    """This pytest run's ports: PYTEST_MEMLINEAGE_PORTS, or all of them."""
    spec = os.environ.get("PYTEST_MEMLINEAGE_PORTS", "")
    if not spec:
        return range(PORTS_FROM, BUS_PORTS_FROM)
    first, _, last = spec.partition("-")
    ports = range(int(first), int(last) + 1)
    if not (PORTS_FROM <= ports.start < ports.stop <= BUS_PORTS_FROM):
        raise RuntimeError(
            f"PYTEST_MEMLINEAGE_PORTS={spec}: must be FIRST-LAST inside "
            f"{PORTS_FROM}-{BUS_PORTS_FROM - 1}"
        )
    return ports


def _worker_ports() -> range:
    """This process's share of _run_ports(): all of it outside xdist."""
    ports = _run_ports()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    share = len(ports) // max(count, 1)
    start = ports.start + index * share
    return range(start, start + share)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, with_bus: bool = False) -> int:
    """A loopback port free right now (and port + 10000 too, for the cluster bus), from
    this worker's share (_worker_ports), each call the next one on: a port this process
    was just given is not given again until the share has gone round."""
    ports = _worker_ports()
    if not _next_port:
        # a random place to begin: two suites on one machine rarely start on one port
        _next_port.append(random.SystemRandom().randrange(len(ports)))
    for _ in range(len(ports)):
        port = ports[_next_port[0] % len(ports)]
        _next_port[0] += 1
        if _bindable(port) and (not with_bus or _bindable(port + 10000)):
            return port
    raise RuntimeError(f"no free loopback port in {ports.start}-{ports.stop - 1}")


def _wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(
                    f"redis-server on port {port} exited (code {proc.returncode}):\n{tail}"
                )
            # after the exit check: a PING that waited long on another listener (below)
            # still ends in the exit's message
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server on port {port} not ready after "
                    f"{STARTUP_TIMEOUT:.0f} s (log: {log})"
                )
            try:
                # PING answers while the AOF is still loading; wait for loading to end.
                # What answers must be this process: another one may hold the port (then
                # this one exits with "Address already in use", seen above).
                if (
                    client.ping()
                    and client.info("server").get("process_id") == proc.pid
                    and client.info("persistence").get("loading", 0) == 0
                ):
                    return
            # ConnectionError includes BusyLoadingError; TimeoutError is a listener on
            # the port that does not answer as Redis does
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                pass
            time.sleep(0.02)
    finally:
        client.close()


@dataclass
class RedisServer:
    """One redis-server process bound to 127.0.0.1:port with its data in ``dir``."""

    port: int
    dir: Path
    extra_args: tuple[str, ...] = ()
    aof: bool = True
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    host = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.dir / "redis.log"

    def start(self) -> RedisServer:
        server, _ = require_binaries()
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [
            server,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--save",
            "",
            "--logfile",
            str(self.log),
            "--protected-mode",
            "no",
        ]
        if self.aof:
            # fsync on every write: a SIGKILL restart must lose nothing acknowledged.
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        args += list(self.extra_args)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_ready(self.port, self.proc, self.log)
        return self

    def stop(self, *, hard: bool = False) -> None:
        """SIGTERM (graceful shutdown) or SIGKILL (crash); waits for the exit. A server
        a fault test left paused (SIGSTOP) is continued first, or SIGTERM would wait."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                self.proc.wait(timeout=STARTUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, *, hard: bool = False) -> RedisServer:
        """Stop and start again on the same port and data directory."""
        self.stop(hard=hard)
        return self.start()

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, **kwargs)  # type: ignore[arg-type]

    def emptied(self) -> str:
        """Drop every key (a test's fresh database on the session's server); the URL."""
        client = self.client()
        try:
            client.flushall()
        finally:
            client.close()
        return self.url


def start_redis_server(
    dir: Path,
    *,
    port: int | None = None,
    aof: bool = True,
    extra_args: tuple[str, ...] = (),
    with_bus: bool = False,
) -> RedisServer:
    """Start a standalone server (AOF on by default) on a free loopback port (or on
    ``port``). A free port can be taken between free_port's look and redis-server's
    bind (by a process outside this suite): then the server starts again on another."""
    if port is not None:
        return RedisServer(port=port, dir=Path(dir), aof=aof, extra_args=extra_args).start()
    for attempt in range(5):
        server = RedisServer(
            port=free_port(with_bus=with_bus), dir=Path(dir), aof=aof, extra_args=extra_args
        )
        try:
            return server.start()
        except RuntimeError as exc:
            if "Address already in use" not in str(exc) or attempt == 4:
                raise
            server.log.unlink(missing_ok=True)
    raise AssertionError("unreachable")


@dataclass
class RedisClusterHandle:
    """A running cluster on loopback: masters, and their replicas when asked."""

    servers: list[RedisServer]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers)

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", s.port) for s in self.servers]

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    def emptied(self) -> str:
        """Drop every key on every master (a test's fresh data on the session's
        cluster); the URL."""
        from redis.cluster import RedisCluster

        client = RedisCluster(host="127.0.0.1", port=self.alive()[0].port)
        try:
            client.flushall(target_nodes=RedisCluster.PRIMARIES)
        finally:
            client.close()
        return self.url

    def alive(self) -> list[RedisServer]:
        """The nodes whose process still runs."""
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    def master_of(self, slot: int) -> RedisServer:
        """The node a live node's CLUSTER NODES names master of `slot` (not failed)."""
        for node in self.alive():
            port = _slot_master_port(node, slot)
            if port is not None:
                return next(s for s in self.servers if s.port == port)
        raise RuntimeError(f"no live node names a master of slot {slot}")

    def replicas_of(self, master: RedisServer) -> list[RedisServer]:
        """The live nodes replicating `master` (ROLE on each)."""
        out = []
        for node in self.alive():
            c = node.client(decode_responses=True, socket_timeout=2)
            try:
                role = c.execute_command("ROLE")
            finally:
                c.close()
            if role[0] == "slave" and int(role[2]) == master.port:
                out.append(node)
        return out


def _slot_master_port(node: RedisServer, slot: int) -> int | None:
    """The port of the master `node` sees serving `slot` and not failed, or None."""
    c = node.client(decode_responses=True, socket_timeout=2)
    try:
        nodes = c.execute_command("CLUSTER", "NODES")
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        return None
    finally:
        c.close()
    for line in str(nodes).splitlines():
        fields = line.split()
        flags = fields[2].split(",")
        if "master" not in flags or "fail" in flags or "fail?" in flags:
            continue
        for spec in fields[8:]:
            lo, _, hi = spec.partition("-")
            if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                return int(fields[1].split(":")[1].split("@")[0])
    return None


def wait_slot_master(
    cluster: RedisClusterHandle, slot: int, *, not_port: int, timeout: float = 20.0
) -> RedisServer:
    """Wait until a node other than `not_port` (the killed master) is master of `slot`,
    every live node agrees, and it says cluster_state:ok: the failover is over.
    Returns the new master; RuntimeError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        ports = {_slot_master_port(n, slot) for n in cluster.alive()}
        port = ports.pop() if len(ports) == 1 else None
        if port is not None and port != not_port:
            master = next(s for s in cluster.servers if s.port == port)
            c = master.client(decode_responses=True, socket_timeout=2)
            try:
                ok = "cluster_state:ok" in str(c.execute_command("CLUSTER", "INFO"))
                if ok and c.execute_command("ROLE")[0] == "master":
                    return master
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                pass
            finally:
                c.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"no new master serving slot {slot} after {timeout:.0f} s")
        time.sleep(0.05)


def start_redis_cluster(
    dir: Path, *, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 5000
) -> RedisClusterHandle:
    """Start ``masters * (1 + replicas)`` cluster-enabled servers and join them with
    redis-cli (``--cluster-replicas``); a short ``node_timeout_ms`` makes a replica
    take over a killed master within seconds."""
    _, cli = require_binaries()
    servers: list[RedisServer] = []
    try:
        for i in range(masters * (1 + replicas)):
            servers.append(
                start_redis_server(
                    Path(dir) / f"node{i}",
                    with_bus=True,
                    aof=False,
                    extra_args=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--repl-diskless-sync-delay",
                        "0",
                        "--cluster-node-timeout",
                        str(node_timeout_ms),
                    ),
                )
            )
        create = subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{s.port}" for s in servers),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if create.returncode != 0:
            raise RuntimeError(
                f"redis-cli --cluster create failed:\n{create.stdout}\n{create.stderr}"
            )
        _wait_cluster_ok(servers)
        if replicas:
            _wait_replicas_linked(servers, masters * replicas)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return RedisClusterHandle(servers)


def _wait_replicas_linked(servers: list[RedisServer], count: int) -> None:
    """Until `count` replicas have finished their first sync (master_link_status up)."""
    deadline = time.monotonic() + 30
    while True:
        linked = 0
        for s in servers:
            c = s.client(decode_responses=True)
            try:
                info = c.info("replication")
            finally:
                c.close()
            linked += info.get("role") == "slave" and info.get("master_link_status") == "up"
        if linked >= count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{linked} of {count} replicas in sync after 30 s")
        time.sleep(0.05)


def _wait_cluster_ok(servers: list[RedisServer]) -> None:
    deadline = time.monotonic() + 30
    while True:
        states = []
        for s in servers:
            c = s.client(decode_responses=True)
            try:
                info = c.execute_command("CLUSTER", "INFO")
                if isinstance(info, bytes | str):
                    text = info.decode() if isinstance(info, bytes) else info
                    states.append("cluster_state:ok" in text)
                else:
                    states.append(info.get("cluster_state") == "ok")
            finally:
                c.close()
        if all(states):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("redis cluster did not reach cluster_state:ok in 30 s")
        time.sleep(0.05)
