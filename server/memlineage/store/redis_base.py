"""The plumbing every part of the Redis store shares: the client, the key layout,
the registered scripts, failure mapping (``_guard``), script calls (``_run``, which
adds the namespace's write counter to writing scripts) and the batch read (``_load``).

``RedisBase`` only declares the attributes ``RedisStore.__init__``
(``memlineage.store.redis_store``) sets; the store's parts (``redis_record``,
``redis_changes``, ``redis_reliability``, ``redis_events``, ``redis_decisions``) are
mixins over it, and ``RedisStore`` inherits them all.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import redis
import redis.exceptions as rex

from memlineage.lineage.errors import StoreCorruptError, StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.store import redis_scripts
from memlineage.store.base import LineageStore
from memlineage.store.redis_codec import RECORD_REMEDY, decode_flat, not_utf8
from memlineage.store.redis_keys import RedisKeys

_UNAVAILABLE = (
    rex.ConnectionError,
    rex.TimeoutError,
    rex.ClusterError,
    rex.RedisClusterException,
    rex.ReadOnlyError,
    rex.TryAgainError,
    rex.OutOfMemoryError,
)

# The client always decodes (decode_responses=True), so its replies are str where
# redis-py's types say bytes | str: the casts in the store's modules state that,
# and nothing more.
_LOAD_CHUNK = 1000
"""Ids per LOAD script call: bounds how long one call holds the server."""


class RedisBase(LineageStore):
    """What the Redis store's parts share; ``RedisStore`` sets the attributes."""

    client: redis.Redis | redis.cluster.RedisCluster
    kind: str
    waits_on_network = True
    keys: RedisKeys
    cascade_chunk: int
    _scripts: dict[str, Any]
    _decision_scripts: dict[str, Any]
    _block_slice: float

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn connection-level failures into StoreUnavailableError."""
        try:
            yield
        except _UNAVAILABLE as exc:
            raise StoreUnavailableError(f"redis unavailable: {exc}") from exc

    def _run(self, name: str, keys: list[str], args: list[Any], namespace: str = "") -> Any:
        counter = redis_scripts.COUNTERS.get(name)
        if counter is not None:  # a writing script: it moves the namespace's counter
            assert namespace, f"script {name} counts its writes: pass the namespace"
            keys = [*keys, self.keys.counter_of(namespace, counter)]
            args = [*args, random.getrandbits(52)]
        with self._guard():
            return self._scripts[name](keys=keys, args=args)

    @property
    def _retention(self) -> int:
        return max(1, self.limits.event_retention)

    def _load(
        self, namespace: str, ids: list[str], with_history: bool = True
    ) -> dict[str, MemoryRecord]:
        """One LOAD script call per chunk of ids (every key passed in KEYS: cluster-legal),
        instead of a pipeline of HGETALL + 2 LRANGE per id; history only when asked."""
        if not ids:
            return {}
        base = self.keys.tag(namespace)
        per = 3 if with_history else 2
        out: dict[str, MemoryRecord] = {}
        for lo in range(0, len(ids), _LOAD_CHUNK):
            part = ids[lo : lo + _LOAD_CHUNK]
            keys = [f"{base}:m:{i}" for i in part]
            keys += [f"{base}:d:{i}" for i in part]
            if with_history:
                keys += [f"{base}:h:{i}" for i in part]
            try:
                replies = self._run("load", keys, [per])
            except UnicodeDecodeError:  # the client decodes the reply as a whole
                raise self._not_utf8(keys, len(part)) from None
            for j, memory_id in enumerate(part):
                flat = replies[per * j]
                if flat:
                    out[memory_id] = decode_flat(
                        namespace,
                        memory_id,
                        flat,
                        replies[per * j + 2] if with_history else (),
                        replies[per * j + 1],
                        base,
                    )
        return out

    def _not_utf8(self, keys: list[str], hashes: int) -> StoreCorruptError:
        """Which of a LOAD call's keys (`hashes` record hashes, then their lists) holds
        bytes that are not UTF-8, read again as bytes (only after a reply failed to
        decode): ``StoreCorruptError`` naming it."""
        n = len(keys)
        with self._guard():
            pipe = self.client.pipeline(transaction=False)
            for i, key in enumerate(keys):
                if i < hashes:
                    pipe.execute_command("HGETALL", key, NEVER_DECODE=True)
                else:
                    pipe.execute_command("LRANGE", key, 0, -1, NEVER_DECODE=True)
            raw = pipe.execute()
        for key, reply in zip(keys, raw, strict=True):
            found = not_utf8(key, reply)
            if found is not None:
                return found
        return StoreCorruptError(  # mended since: the caller may try again
            keys[0],
            f"a reply over {n} keys was not UTF-8, and none is now",
            store="redis",
            remedy=RECORD_REMEDY,
        )
