"""Whether the Redis a store talks to still holds what the store wrote there.

A Redis restarted without persistence (no AOF, or its files lost), a FLUSHALL, a
failover to an empty replica, or a cluster master that came back empty answers every
command as a fresh server: without a check the store would serve an empty lineage as
if it were the old one (every memory NOT_FOUND, every Record accepted, a revoked
memory's id free again). And a Redis that evicts keys under ``maxmemory`` removes a
record hash, a derivation list or a grant's uses one by one, breaking the lineage
silently. ``StoreIdentity`` checks both, on every connection redis-py opens (the
first of a restarted server's too, before it carries a command) and on every
``ping``:

- an identity key holding a random token, written (``SET NX``) by the first store to
  open on the Redis and read by every later one: ``{prefix}:store`` on one Redis; on
  a cluster one such key per primary, ``{prefix}:store:{tag}`` with a hash tag in a
  slot that primary serves (a key moves with its slot: a resharding keeps it, and a
  primary serving none of the keys yet gets one). A key this store saw and now finds
  absent or changed is data lost: the store answers every call UNAVAILABLE, naming
  it, from then on (health NOT_SERVING), until it is opened again (restart the
  sidecar to accept the store as Redis now holds it, or restore Redis's data first);
- ``maxmemory`` set with a ``maxmemory-policy`` other than ``noeviction``: every call
  is UNAVAILABLE, naming the setting, while it is so.

A store opened on a Redis that had already lost its data finds no key and writes one:
it cannot tell a new Redis from an emptied one (there is no head record outside
Redis, as the embedded store has).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import redis
import redis.exceptions as rex
from redis.cluster import RedisCluster, key_slot

log = logging.getLogger("memlineage.store")

_TAG_SEARCH = 200_000
"""Candidate hash tags tried for a slot (about 16384 are needed on average)."""


class StoreLostError(rex.ConnectionError):
    """A connection found the Redis emptied or evicting: the connection is refused."""


class StoreIdentity:
    """The identity keys a store saw, checked on connect and on ping (see module)."""

    def __init__(self, client: redis.Redis | RedisCluster, prefix: str):
        self.client = client
        self.prefix = prefix
        self.cluster = isinstance(client, RedisCluster)
        self.seen: dict[str, str] = {}  # identity key -> the token it held
        self.lost: str | None = None  # why the store stopped trusting Redis (sticky)
        self._lock = threading.Lock()
        self._tags: dict[int, str] = {}
        if isinstance(client, RedisCluster):
            client.user_on_connect_func = self.on_connect
        else:
            client.connection_pool.connection_kwargs["redis_connect_func"] = self._connect

    # -- what a connection checks ------------------------------------------------------

    def _connect(self, connection: Any) -> None:
        connection.on_connect()  # AUTH, SELECT, ...: what redis-py does without us
        self.on_connect(connection)

    def on_connect(self, connection: Any) -> None:
        """Check Redis over a new `connection` (a primary's, on a cluster); raise
        ``StoreLostError`` (a connection error: the call is UNAVAILABLE) when it is
        not the Redis the store saw, or evicts keys."""
        if self.lost is not None:
            raise StoreLostError(self.lost)

        def call(*args: Any) -> Any:
            connection.send_command(*args)
            return connection.read_response()

        try:
            self._check_eviction(call("INFO", "memory"))
            for key in self._keys_served(connection.host, connection.port):
                self._check_key(key, lambda k: call("GET", k), lambda k, t: call("SET", k, t, "NX"))
        except rex.ResponseError:  # a slot moved meanwhile: the next connection tells
            return

    # -- what a ping checks ------------------------------------------------------------

    def check(self) -> None:
        """The same checks through the client (at open, and on every ping): raise
        ``StoreLostError`` as a connection would."""
        if self.lost is not None:
            raise StoreLostError(self.lost)
        client = self.client
        if isinstance(client, RedisCluster):
            infos = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            single = isinstance(infos, dict) and "maxmemory_policy" in infos
            for info in [infos] if single else list(infos.values()):
                self._check_eviction(info)
            with self._lock:
                keys = list(self.seen)
            keys += self._unclaimed_primaries()
        else:
            self._check_eviction(client.info("memory"))
            keys = [self._plain_key()]
        for key in keys:
            self._check_key(key, client.get, lambda k, t: client.set(k, t, nx=True))

    # -- the checks --------------------------------------------------------------------

    def _check_key(self, key: str, get: Any, set_nx: Any) -> None:
        """`key` must hold the token seen before; one not seen yet is adopted (written
        first when absent: the first store on this Redis, or another store won)."""
        held = get(key)
        with self._lock:
            known = self.seen.get(key)
        if known is None:
            if held is None:
                set_nx(key, os.urandom(16).hex())
                held = get(key)
            if held is not None:
                with self._lock:
                    self.seen.setdefault(key, str(held))
            return
        if held == known:
            return
        what = "no longer exists" if held is None else f"holds another store's id {held!r}"
        self._lose(
            f"redis lost the store's data: its identity key {key} {what} (a restart "
            "without persistence, a FLUSHALL, a failover to an empty replica); every "
            "call is refused: restore Redis's data, or restart the sidecar to serve "
            "the store as Redis holds it now"
        )

    def _check_eviction(self, info: Any) -> None:
        if not isinstance(info, dict):
            info = _parse_info(str(info))
        policy = str(info.get("maxmemory_policy", "noeviction"))
        if int(info.get("maxmemory", 0) or 0) > 0 and policy != "noeviction":
            raise StoreLostError(
                f"redis evicts keys (maxmemory set, maxmemory-policy {policy}): an evicted "
                "record, derivation list or grant breaks the lineage silently; set "
                "maxmemory-policy noeviction (or no maxmemory)"
            )

    def _lose(self, why: str) -> None:
        with self._lock:
            first = self.lost is None
            if first:
                self.lost = why
        if first:
            log.error("%s", why)
        raise StoreLostError(why)

    # -- the keys ----------------------------------------------------------------------

    def _plain_key(self) -> str:
        return f"{self.prefix}:store"

    def _keys_served(self, host: str, port: int) -> list[str]:
        """The identity keys the node at host:port serves: on one Redis the one key; on
        a cluster those seen whose slot it serves, else a new one in its first slot."""
        if not self.cluster:
            return [self._plain_key()]
        slots = self._slots_of(host, port)
        with self._lock:
            mine = [k for k in self.seen if key_slot(k.encode()) in slots]
        if mine or not slots:
            return mine
        return [self._slot_key(min(slots))]

    def _unclaimed_primaries(self) -> list[str]:
        """A new identity key for each primary serving none of those seen."""
        assert isinstance(self.client, RedisCluster)
        out = []
        for node in self.client.get_primaries():
            slots = self._slots_of(node.host, node.port)
            with self._lock:
                served = any(key_slot(k.encode()) in slots for k in self.seen)
            if slots and not served:
                out.append(self._slot_key(min(slots)))
        return out

    def _slots_of(self, host: str, port: int) -> set[int]:
        assert isinstance(self.client, RedisCluster)
        cache = self.client.nodes_manager.slots_cache
        return {
            slot
            for slot, nodes in list(cache.items())
            if nodes and nodes[0].host == host and nodes[0].port == port
        }

    def _slot_key(self, slot: int) -> str:
        tag = self._tags.get(slot)
        if tag is None:
            for i in range(_TAG_SEARCH):
                if key_slot(str(i).encode()) == slot:
                    tag = self._tags[slot] = str(i)
                    break
            else:  # pragma: no cover - every slot is reached well before
                raise RuntimeError(f"no hash tag found for slot {slot}")
        return f"{self.prefix}:store:{{{tag}}}"


def _parse_info(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            out[name.strip()] = value.strip()
    return out
