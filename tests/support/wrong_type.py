"""A Redis key holding another type than the store keeps there: make one, take a
namespace's keys byte for byte, and check the store refuses a call over it as
DATA_LOSS naming the key with nothing changed, then serves it once mended. Shared by
the store suites that retype keys (tests/store/test_redis_*script_data.py and
test_redis_wrong_type.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from memlineage.lineage.errors import StoreCorruptError
from redis.cluster import RedisCluster


def namespace_keys(raw: Any, ns: str, also: Iterable[str] = ()) -> dict[Any, Any]:
    """Every key of namespace `ns` (one slot: its hash tag), plus `also`, by content
    (`_content`; on a Cluster, scanned on the node of that slot)."""
    pattern = f"ml:{{{ns}}}:*"
    if isinstance(raw, RedisCluster):
        node = raw.get_node_from_key(pattern)
        names = raw.scan_iter(match=pattern, count=1000, target_nodes=node)
    else:
        names = raw.scan_iter(match=pattern, count=1000)
    found = {k.decode() if isinstance(k, bytes) else k for k in names}
    return {k: _content(raw, k) for k in sorted({*found, *also})}


def _content(raw: Any, k: str) -> Any:
    """A key's value, comparable across reads: a hash or set by its sorted members (a
    large one is a hash table, whose DUMP order a mere read can change by moving its
    incremental rehash on), any other type as DUMP serialises it."""
    kind = raw.type(k)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind == "hash":
        return ("hash", sorted(raw.hgetall(k).items()))
    if kind == "set":
        return ("set", sorted(raw.smembers(k)))
    return raw.dump(k)


def retype(raw: Any, k: str, kind: str) -> None:
    """`k` holding a value of Redis type `kind` instead of what it held."""
    raw.delete(k)
    {
        "string": lambda: raw.set(k, b"x"),
        "hash": lambda: raw.hset(k, "x", b"1"),
        "list": lambda: raw.rpush(k, b"x"),
        "set": lambda: raw.sadd(k, b"x"),
        "zset": lambda: raw.zadd(k, {b"x": 1.0}),
    }[kind]()


def refused_over(
    raw: Any,
    ns: str,
    k: str,
    kind: str,
    call: Callable[[], object],
    also: Iterable[str] = (),
) -> None:
    """With `k` retyped to `kind`: `call` is StoreCorruptError (DATA_LOSS) naming `k`
    and its type, saying nothing was changed and that `k` is what to restore, and
    every key of `ns` (and `also`) is byte-identical; then `k` is put back as it was
    (the caller repeats the call)."""
    old = raw.dump(k)
    retype(raw, k, kind)
    before = namespace_keys(raw, ns, also)
    with pytest.raises(StoreCorruptError) as err:
        call()
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {k} cannot be read: it holds a Redis {kind}, "), message
    assert f"nothing was changed (restore {k} from a backup as the " in message, message
    assert namespace_keys(raw, ns, also) == before
    raw.delete(k)  # mended
    if old is not None:
        raw.restore(k, 0, old)
