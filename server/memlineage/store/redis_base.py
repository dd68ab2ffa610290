"""The plumbing every part of the Redis store shares: the client, the key layout,
the registered scripts, failure mapping (``_guard``), script calls (``_run``, which
adds the namespace's write counter to writing scripts and turns a script's error on
damaged data into ``StoreCorruptError``) and the batch read (``_load``).

``RedisBase`` only declares the attributes ``RedisStore.__init__``
(``memlineage.store.redis_store``) sets; the store's parts (``redis_record``,
``redis_changes``, ``redis_reliability``, ``redis_events``, ``redis_decisions``) are
mixins over it, and ``RedisStore`` inherits them all.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import redis
import redis.exceptions as rex

from memlineage.lineage.errors import StoreCorruptError, StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.store import redis_scripts
from memlineage.store.base import LineageStore
from memlineage.store.redis_codec import RECORD_REMEDY, decode_flat, not_utf8
from memlineage.store.redis_identity import StoreIdentity
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

# Redis refusing a command for its own state, not the data: no good replicas
# (min-replicas-to-write), a failed background save (stop-writes-on-bgsave-error),
# another client's script running (BUSY), a replica without its master. A script meets
# it at its first write, before it changed anything (the state cannot change while a
# script runs): unavailable, as a dropped connection. Redis 7 starts the reply with the
# code; older ones put it after the script's name.
_REFUSED = re.compile(
    r"^(?:ERR Error running script \(call to f_\w+\): @user_script:\d+: )?"
    r"(?:NOREPLICAS|MISCONF|BUSY|MASTERDOWN)\b"
)

# What a script's error says when it comes from the data it met, not from the script:
# its own check (ML_CORRUPT, redis_scripts), a command refusing a stored value (HINCRBY,
# INCR, HINCRBYFLOAT, a key of another type), Lua arithmetic, comparison or
# concatenation on a value that is not a number or absent, cjson on text that is not
# JSON. Redis 7 words them so (a real redis-server: tests/store/test_redis_script_data.py).
_DATA_ERROR = re.compile(
    r"ML_CORRUPT|WRONGTYPE|hash value is not (an integer|a float)"
    r"|value is not (an integer or out of range|a valid float)"
    r"|increment or decrement would overflow|increment would produce NaN or Infinity"
    r"|attempt to (perform arithmetic on|compare|concatenate)"
    r"|Expected .* but found|cjson"
)
PARTIAL_REMEDY = (
    "what the script wrote before it met the value is kept (write the value again as "
    "the store wrote it, or restore the memory from a backup)"
)
_NAMED = re.compile(r"ML_CORRUPT (\S+) ?(\S*)")
_TYPED = re.compile(r"ML_CORRUPT (\S+) holds a (\w+), not a (\w+)")  # ml_expect_type
_WRONGTYPE = re.compile(r"(?:^|of pipeline caused error: )WRONGTYPE ")
"""Redis's refusal of a command on a key of another type, alone or in a pipeline."""
_TYPES_FIRST = frozenset(
    {"load", "events", "record", "revise", "set_status", "update", "add_dependencies"}
    | {"access", "feedback", "counter_add", "schedule_review", "cascade_mark"}
)
"""Scripts a WRONGTYPE fails before their first write: they write nothing, or check
the type of every key they first touch after it (``redis_scripts.EXPECT_TYPE``)."""
_SCRIPT_TAIL = re.compile(r"\s*script: [0-9a-f]{40}, on @user_script:\d+\.?$")

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
    _identity: StoreIdentity
    wait_replicas: int = 0
    """Replicas that must acknowledge a lineage write or grant use before it is
    answered (``redis_wait_replicas``; 0: the master's apply is enough)."""
    wait_timeout_ms: int = 500
    _refreshing: threading.Lock

    @contextlib.contextmanager
    def _guard(self, *keys: str, remedy: str = RECORD_REMEDY) -> Iterator[None]:
        """Turn connection-level failures into StoreUnavailableError, and a key of another
        Redis type than the store keeps there into ``StoreCorruptError`` naming it (with
        `remedy`): the one a script's ``ml_expect_type`` named, else the one of `keys`
        (every key the block uses) TYPE finds, after a WRONGTYPE only. Once the store
        found Redis emptied under it (``redis_identity``), every block is refused."""
        lost = self._identity.lost
        if lost is not None:
            raise StoreUnavailableError(lost)
        try:
            yield
        except _UNAVAILABLE as exc:
            raise StoreUnavailableError(f"redis unavailable: {exc}") from exc
        except rex.ResponseError as exc:
            if _REFUSED.match(str(exc)):
                raise StoreUnavailableError(f"redis refused the command: {exc}") from exc
            found = self._another_type(str(exc), keys, remedy)
            if found is None:
                raise
            raise found from None

    def _another_type(
        self, error: str, keys: Sequence[str], remedy: str
    ) -> StoreCorruptError | None:
        """The key of another type Redis's `error` came from (see `_guard`); None when
        the error is not of that kind, or names none of `keys` (none passed)."""
        typed = _TYPED.search(error)
        if typed:  # ml_expect_type, before the script's first write
            key, got, want = typed.groups()
            return _held_another_type(key, got, want, remedy)
        if not keys or not _WRONGTYPE.search(error):
            return None
        found = self._wrong_type(keys, remedy)
        if found is not None:
            return found
        where = keys[0] if len(keys) == 1 else f"{keys[0]} (or another of {len(keys)} keys)"
        return StoreCorruptError(  # mended since: the caller may try again
            where,
            "a command met a key of another Redis type (WRONGTYPE), and none holds one now",
            store="redis",
            remedy=remedy,
        )

    def _wrong_type(self, keys: Sequence[str], remedy: str) -> StoreCorruptError | None:
        """After a WRONGTYPE: the first of `keys` holding another type than the store
        keeps there (``RedisKeys.type_of``), by one TYPE each; None when none does."""
        if not keys:
            return None
        with self._guard():
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.type(key)
            types = pipe.execute()
        for key, got in zip(keys, types, strict=True):
            want = self.keys.type_of(key)
            if want is not None and got not in ("none", want):
                return _held_another_type(key, got, want, remedy)
        return None

    def _register(self, namespace: str, remedy: str = RECORD_REMEDY) -> None:
        """Add `namespace` to the registry of namespaces (`RedisKeys.namespaces`,
        outside every namespace's slot): after a Record, and before a change whose
        cascade may leave a note for maintenance, which walks the registry only (a
        namespace whose Records met the registry's master down was never found, and a
        cascade stopped in it never finished; an outside audit)."""
        with self._guard(self.keys.namespaces(), remedy=remedy):
            self.client.sadd(self.keys.namespaces(), namespace)

    def _run(self, name: str, keys: list[str], args: list[Any], namespace: str = "") -> Any:
        counter = redis_scripts.COUNTERS.get(name)
        if counter is not None:  # a writing script: it moves the namespace's counter
            assert namespace, f"script {name} counts its writes: pass the namespace"
            keys = [
                *keys,
                self.keys.claim_revivals(namespace),
                self.keys.counter_of(namespace, counter),
            ]
            args = [*args, random.getrandbits(52)]
        try:
            with self._guard():
                if counter == "w" and self.wait_replicas:
                    return self._replicated(self._scripts[name], keys, args)
                return self._scripts[name](keys=keys, args=args)
        except rex.ResponseError as exc:
            if isinstance(exc, rex.NoScriptError) or not _DATA_ERROR.search(str(exc)):
                raise  # the script's own bug: INTERNAL, with its traceback
            raise self._unreadable(name, keys, namespace, str(exc)) from None

    def _replicated(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run a writing `script`, then ``WAIT`` for ``wait_replicas`` replicas, in one
        pipeline on one connection (WAIT waits for that connection's own last write; on
        a cluster the connection of the master serving the keys' slot): Redis
        replicates asynchronously, so a write a master applied and answered can be lost
        by the replica promoted when it fails. Fewer replicas in ``wait_timeout_ms``:
        ``StoreUnavailableError`` (the write stays on the master, and is kept or lost
        with it: a retry converges, as after a lost reply)."""
        target: Any = self.client
        cluster = isinstance(target, redis.cluster.RedisCluster)
        if cluster:
            target = target.get_redis_connection(target.get_node_from_key(keys[0]))
        try:
            for _ in range(2):  # once more after NOSCRIPT: nothing ran
                pipe = target.pipeline(transaction=False)
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
                result, acked = pipe.execute(raise_on_error=False)
                if not isinstance(result, rex.NoScriptError):
                    break
                script.sha = target.script_load(script.script)
        except _UNAVAILABLE:
            if cluster:
                self._refresh_slots()
            raise
        if isinstance(result, rex.AskError | rex.TryAgainError | rex.ClusterDownError):
            self._refresh_slots()  # a MOVED: the slot's master changed (a failover)
            raise StoreUnavailableError(f"redis unavailable: {result}")
        if isinstance(result, Exception):
            raise result
        if result == 0 or (isinstance(result, list) and result and result[0] == 0):
            return result  # a refusal, or nothing to write: nothing to acknowledge
        if isinstance(acked, Exception) or int(acked) < self.wait_replicas:
            raise StoreUnavailableError(
                f"redis: the write was applied by the master but acknowledged by {acked} "
                f"of {self.wait_replicas} replicas within {self.wait_timeout_ms} ms "
                "(redis_wait_replicas): it may be lost if the master fails over; retry it"
            )
        return result

    def _refresh_slots(self) -> None:
        """After a cluster master did not answer a pinned pipeline: read the slots'
        masters again (the cluster client's own commands do so on their errors), one
        thread at a time, never failing the call for it."""
        assert isinstance(self.client, redis.cluster.RedisCluster)
        if self._refreshing.acquire(blocking=False):
            try:
                with contextlib.suppress(*_UNAVAILABLE, rex.RedisError, OSError):
                    self.client.nodes_manager.initialize()
            finally:
                self._refreshing.release()

    def _unreadable(
        self, name: str, keys: list[str], namespace: str, error: str
    ) -> StoreCorruptError:
        """The value script `name` failed on (before its first write: the scripts check
        what they use first): the strict read of the memories among its keys names the
        key and field as a read would; else the key and field the script named; else
        the script's keys and Redis's words."""
        named = _NAMED.search(error)
        # ML_CORRUPT is raised before the script's first write; any other error may
        # come after some (a script not yet checking what it uses first).
        remedy = RECORD_REMEDY if named else PARTIAL_REMEDY
        if not named and _WRONGTYPE.search(error):  # a key read before any check
            typed_first = RECORD_REMEDY if name in _TYPES_FIRST else PARTIAL_REMEDY
            found = self._wrong_type(keys, typed_first)
            if found is not None:
                return found
        prefix = self.keys.record(namespace, "") if namespace else None
        if prefix is not None:
            records = [named.group(1)] if named else keys
            ids = [k[len(prefix) :] for k in records if k.startswith(prefix)]
            try:
                self._load(namespace, list(dict.fromkeys(ids)), with_history=False)
            except StoreCorruptError as found:
                return StoreCorruptError(found.path, found.problem, store="redis", remedy=remedy)
        if named:
            key, field = named.groups()
            what = f"the value of field {field!r}" if field else "its value"
            problem = f"{what} is not a number script {name!r} can add to"
        else:
            key = keys[0] if len(keys) == 1 else f"{keys[0]} (or another of {len(keys)} keys)"
            said = _SCRIPT_TAIL.sub("", error)
            problem = f"script {name!r} met a value it cannot use ({said})"
        return StoreCorruptError(key, problem, store="redis", remedy=remedy)

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
        with self._guard(*keys):
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


def _held_another_type(key: str, got: str, want: str, remedy: str) -> StoreCorruptError:
    """The default remedy speaks of a record's field; a key of another type (a stream,
    a set, a grants hash as much as a record) is mended by restoring that key."""
    if remedy == RECORD_REMEDY:
        remedy = f"nothing was changed (restore {key} from a backup as the {want} it held)"
    return StoreCorruptError(
        key,
        f"it holds a Redis {got}, not the {want} the store keeps there",
        store="redis",
        remedy=remedy,
    )
