"""The harness of the suites that damage values on a real Redis under a real
`memlineage serve` (tests/e2e/test_redis_corrupt_*.py): a redis-server of the
module's own with the sidecar over it (`served_over_redis`, or the `served` and
`raw` fixtures `corrupt_redis_fixtures` makes), a client allowed in the module's
namespaces, and the checks of a DATA_LOSS answer; the edits that damage a JSON
value (also used by tests/store/test_redis_corrupt_grant_spend.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
from memlineage.client import MemLineageClient, MemLineageError

from support.redis_servers import RedisServer, start_redis_server
from support.serve_process import ServeProcess
from support.sidecar import BUNDLED_POLICIES

TOKEN = "tok"


@dataclass(frozen=True)
class Served:
    """The redis-server and the `memlineage serve` over it."""

    server: RedisServer
    sidecar: ServeProcess

    @property
    def address(self) -> str:
        return self.sidecar.address


@contextmanager
def served_over_redis(directory: Path, namespaces: Iterable[str]) -> Iterator[Served]:
    """A redis-server in `directory` and `memlineage serve` over it, `TOKEN` allowed in
    `namespaces`; on leaving, the sidecar must still be running (else the test fails)."""
    server = start_redis_server(directory)
    try:
        sidecar = ServeProcess(
            ["--store", server.url, "--policies", BUNDLED_POLICIES],
            env={"MEMLINEAGE_TOKENS": f"{TOKEN}={','.join(namespaces)}"},
        )
        try:
            yield Served(server, sidecar)
        finally:
            assert sidecar.proc.poll() is None, "the sidecar died"
            sidecar.stop()
    finally:
        server.stop()


def corrupt_redis_fixtures(name: str, namespaces: Callable[[], Iterable[str]]) -> tuple[Any, Any]:
    """The fixtures `served` (module scope: `served_over_redis` in a directory named
    after `name`, over `namespaces()`) and `raw` (a bytes redis-py client of that
    server, so the damage is written as it is). In a test module:
    ``served, raw = corrupt_redis_fixtures("redis-corrupt-x", namespaces)``."""

    @pytest.fixture(scope="module", name="served")
    def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
        with served_over_redis(tmp_path_factory.mktemp(name), namespaces()) as s:
            yield s

    @pytest.fixture(name="raw")
    def raw(served: Served) -> Iterator[redis.Redis]:
        r = served.server.client(socket_timeout=5)
        try:
            yield r
        finally:
            r.close()

    return served, raw


def client(address: str, ns: str) -> MemLineageClient:
    return MemLineageClient(address, token=TOKEN, namespace=ns, timeout=10, retries=0)


def refused(call: Callable[[], object]) -> str:
    """The call's DATA_LOSS details (any other answer fails the test)."""
    with pytest.raises(MemLineageError) as err:
        call()
    assert err.value.code == grpc.StatusCode.DATA_LOSS, (err.value.code, err.value.details)
    details = str(err.value.details)
    assert "Traceback" not in details and "\n" not in details, details
    return details


def refused_reading(key: str, call: Callable[[], object]) -> str:
    """`refused(call)`, its details saying that `key` cannot be read."""
    details = refused(call)
    assert details.startswith(f"redis {key} cannot be read: "), details
    return details


def snapshot(r: redis.Redis, key: str) -> dict[bytes, bytes]:
    return dict(r.hgetall(key))


def json_edit(index: int, value: object) -> Callable[[bytes], bytes]:
    """The damage setting item `index` of a JSON list to `value`."""

    def edit(text: bytes) -> bytes:
        v = json.loads(text)
        v[index] = value
        return json.dumps(v).encode()

    return edit


def const(value: bytes) -> Callable[[bytes], bytes]:
    """The damage replacing the value with `value`."""
    return lambda _text: value
