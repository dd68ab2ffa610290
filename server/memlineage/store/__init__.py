"""Lineage stores: one contract (``LineageStore``), three deployments.

``open_store`` picks the backend from a URL so configuration stays a string:

* ``embedded`` — in process, in memory (the default, zero setup)
* ``embedded:///path/to/datadir`` — in process, persisted to that directory
* ``redis://host:port/db`` (also ``rediss://``, ``unix://``) — one Redis
* ``redis+cluster://host1:port1,host2:port2`` — a Redis Cluster (any reachable nodes)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.validation import StoreLimits
from memlineage.store.base import LineageStore
from memlineage.store.embedded import EmbeddedStore

__all__ = ["EmbeddedStore", "LineageStore", "RedisStore", "open_store"]


DEFAULT_REDIS_TIMEOUT = 1.0
"""Seconds a Redis client waits to connect and for a reply: well under a client's
5 s deadline, so a store that does not answer is UNAVAILABLE in time."""


def open_store(
    url_or_kind: str = "embedded",
    *,
    clock: Clock = system_clock,
    limits: StoreLimits | None = None,
    socket_timeout: float = DEFAULT_REDIS_TIMEOUT,
    connect_timeout: float = DEFAULT_REDIS_TIMEOUT,
    **options: Any,
) -> LineageStore:
    """Open the store named by ``url_or_kind``; ``options`` go to the backend/client.

    Redis clients wait at most ``connect_timeout`` to connect and ``socket_timeout``
    for a reply (the embedded store ignores both). Neither client sends a command
    again by itself: a connection broken after Redis applied a script would apply it
    twice (a grant use spent twice, a revoke answered "revoked to revoked"; an outside
    audit through a proxy that dropped replies). ``wait_replicas`` (with
    ``wait_timeout``, below ``socket_timeout``): replicas that must acknowledge each
    lineage write before it is answered (``RedisStore``). A pooled connection the server closed
    meanwhile (a Redis restart) is reconnected before it is used (redis-py's pool
    checks it), so only a call caught by the break fails, as UNAVAILABLE."""
    if url_or_kind == "embedded":
        return EmbeddedStore(clock=clock, limits=limits, **options)
    if url_or_kind.startswith("embedded://"):
        path = url_or_kind[len("embedded://") :]
        if not path or path == "/":
            raise ValueError("embedded:// needs a data directory: embedded:///path/to/dir")
        return EmbeddedStore(unquote(path), clock=clock, limits=limits, **options)
    from memlineage.store.redis_store import RedisStore

    store_keys = ("prefix", "cascade_chunk", "max_grants", "wait_replicas", "wait_timeout")
    store_opts = {k: options.pop(k) for k in store_keys if k in options}
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if store_opts.get("wait_replicas") and store_opts.get("wait_timeout", 0.5) >= socket_timeout:
        raise ValueError(
            f"wait_timeout ({store_opts.get('wait_timeout', 0.5)} s) must be below the socket "
            f"timeout ({socket_timeout} s): a WAIT is a reply the client waits for"
        )
    options.setdefault("socket_timeout", socket_timeout)
    options.setdefault("socket_connect_timeout", connect_timeout)
    if url_or_kind.startswith(("redis://", "rediss://", "unix://")):
        import redis

        options.setdefault("retry", Retry(NoBackoff(), 0))
        client = redis.Redis.from_url(url_or_kind, decode_responses=True, **options)
        return RedisStore(client, clock=clock, limits=limits, **store_opts)
    if url_or_kind.startswith("redis+cluster://"):
        from redis.cluster import ClusterNode, RedisCluster

        parts = urlsplit(url_or_kind)
        netloc = parts.netloc.rpartition("@")[2]
        nodes = []
        for hostport in netloc.split(","):
            host, _, port = hostport.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"bad cluster node {hostport!r} in {url_or_kind!r}")
            nodes.append(ClusterNode(host, int(port)))
        if parts.password is not None:
            options.setdefault("password", unquote(parts.password))
            if parts.username:
                options.setdefault("username", unquote(parts.username))
        options.setdefault("retry", Retry(NoBackoff(), 0))
        cluster = RedisCluster(startup_nodes=nodes, decode_responses=True, **options)
        return RedisStore(cluster, clock=clock, limits=limits, **store_opts)
    raise ValueError(
        f"unknown store {url_or_kind!r}; expected embedded, embedded:///dir, "
        "redis://host:port/db or redis+cluster://h1:p1,h2:p2"
    )


def __getattr__(name: str) -> Any:
    """Lazy ``RedisStore`` so the embedded default does not import redis."""
    if name == "RedisStore":
        from memlineage.store.redis_store import RedisStore

        return RedisStore
    raise AttributeError(name)
