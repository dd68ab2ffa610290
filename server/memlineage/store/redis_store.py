"""Redis backend, standalone and Cluster with the same code.

Layout: ``RedisStore`` (this module) is the client-facing class: construction, the
write/access counters, ping, the namespace registry, rate counters, buffered accesses
and diagnostics.  It inherits its other parts, each a mixin over ``RedisBase``:

- ``redis_base``: the shared plumbing (``_guard``, ``_run``, the batch read ``_load``);
- ``redis_record``: Record (``record``, ``record_claim``: the RECORD script);
- ``redis_revise``: a new version of a memory (``revise``: the REVISE script) and the
  versions kept;
- ``redis_changes``: UpdateStatus with its cascade, AddDependencies with its cycle
  check, Update;
- ``redis_reliability``: claim groups, source statistics, feedback, review schedule;
- ``redis_events``: the Watch event log (cursors, paging, waiting);
- ``redis_decisions``: kept decisions (their stream, index and scripts).

The Lua of the lineage scripts is ``redis_scripts``, the key layout ``redis_keys``,
the record's field encoding ``redis_codec``.

The client is injected (``redis.Redis`` or ``redis.cluster.RedisCluster``, both
with ``decode_responses=True``).  Writes are single Lua scripts whose keys all
carry the namespace hash tag, so they are atomic and cluster-legal; reads are
one LOAD script call per batch (a BFS level of a lineage view): HGETALL plus the
derivation list (and the history list only when asked) of every id, all passed
in KEYS, one round trip to one node in a cluster.  Reads of buffered accesses
are flushed with one ACCESS script call (``record_accesses``).

Record atomicity (``redis_record``): one Record (``record_claim``) is one RECORD
script: the memory, its claim-group comparison, the supersession of the claim's old
holder with the whole cascade it starts (the holder's descendants are read first and
passed in KEYS; the script names any it finds missing and the call retries with
them), the rate counter, and the proposal's digest with the outcome (hash fields D,
R, A) for an identical retry, which answers that outcome and writes nothing.

Cascade atomicity (UpdateStatus, ``redis_changes``): the root's status change is one
script; descendants are marked breadth-first in chunks of ``cascade_chunk`` nodes,
each chunk one atomic script that also returns the chunk's children for the next
round.  A reader may observe a cascade half-way (some descendants already pending,
others not yet), but no descendant is ever missed: a memory recorded under a node
after that node was marked inherits pending_verification at record time (RECORD checks
its dependencies' statuses atomically).

Lineage events (``redis_events``): every writing script appends its events to the
namespace's stream (``ml:{ns}:ev``) in the same atomic step; a cascade appends one
``cascaded`` event per chunk.  Readers page with one script (which also tells a
trimmed gap from an up-to-date cursor) and wait with ``XREAD BLOCK``, which holds one
pooled connection for the duration of the wait.

Claim groups (``redis_reliability``; compared in ``redis_record``): a record with a
claim compares itself with the other members of the claim's group
(``ml:{ns}:cg:<subject>|<attr>``) inside RECORD.  Their record keys must be in KEYS,
so the group is read first (SMEMBERS) and the script re-checks its size (a group only
grows, so same size = same members); if it changed it answers RETRY with the members
it saw and the call retries with those (up to 32 times, then StoreUnavailableError).
Source statistics (``ml:{ns}:src``) and the review schedule (``ml:{ns}:rv``) are
single per-namespace keys written by the same scripts; the namespace registry
(``ml:namespaces``) is global and written after the record.

Kept decisions (``redis_decisions``): ``keep_decisions`` appends a batch to the
namespace's stream ``ml:{ns}:dec`` and indexes each id in ``ml:{ns}:dix`` (KEEP, one
script per chunk of ``_KEEP_CHUNK``), then trims both exactly to
``decision_retention``; a decision by id is one HGET + XRANGE (GET_DECISION), a
memory's recent ones a scan of the stream newest first, server-side, in
RECENT_DECISIONS calls of at most ``SCAN_PER_CALL`` entries (Redis serves other
clients between them; at most the retention in all). No counter moves: decisions are not lineage
state.

Revision atomicity (``redis_revise``): one REVISE script writes the new version, keeps
the old one (``ml:{ns}:vs:<id>``), moves the derivation links and cascades over every
descendant (passed in KEYS, as RECORD's), after checking the version, the graph epoch
and the closure the caller read.

Cycle check (``redis_changes``, ``redis_revise``): only ``add_dependencies`` and a
revision change the ancestors of an existing memory.  Each checks reachability
client-side (a pipeline per ancestor level) against the namespace's graph epoch, and
its script refuses (and the call retries) if another edge was added or moved in
between, so racing changes can never close a cycle.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, cast

import redis
import redis.exceptions as rex

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.validation import StoreLimits
from memlineage.store import redis_scripts
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE
from memlineage.store.redis_base import _UNAVAILABLE
from memlineage.store.redis_changes import RedisChanges
from memlineage.store.redis_codec import RECORD_REMEDY
from memlineage.store.redis_decisions import DECISION_SCRIPTS, RedisDecisions
from memlineage.store.redis_events import RedisEvents, block_slice
from memlineage.store.redis_grants import GRANT_SCRIPTS, RedisGrants
from memlineage.store.redis_identity import StoreIdentity
from memlineage.store.redis_keys import RedisKeys
from memlineage.store.redis_proposals import PROPOSAL_SCRIPTS, RedisProposals
from memlineage.store.redis_record import RedisRecord
from memlineage.store.redis_reliability import RedisReliability
from memlineage.store.redis_revise import RedisRevise
from memlineage.store.window import next_change


class RedisStore(
    RedisRevise,
    RedisRecord,
    RedisChanges,
    RedisReliability,
    RedisEvents,
    RedisDecisions,
    RedisGrants,
    RedisProposals,
):
    """Lineage store over an injected redis-py client (standalone or cluster);
    ``max_grants``: the grants a namespace holds at most (a smaller one for tests);
    ``wait_replicas``: replicas that must acknowledge each lineage write and grant use
    within ``wait_timeout`` seconds (``RedisBase._replicated``), 0 for none."""

    def __init__(
        self,
        client: redis.Redis | redis.cluster.RedisCluster,
        *,
        clock: Clock = system_clock,
        limits: StoreLimits | None = None,
        prefix: str = "ml",
        cascade_chunk: int = 2000,
        max_grants: int = MAX_GRANTS_PER_NAMESPACE,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
    ):
        super().__init__(clock=clock, limits=limits)
        if wait_replicas < 0 or not 0 < wait_timeout <= 60:
            raise ValueError(
                f"wait_replicas must be >= 0 and wait_timeout in (0, 60], got "
                f"{wait_replicas} and {wait_timeout}"
            )
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, round(wait_timeout * 1000))
        self._refreshing = threading.Lock()
        self.max_grants = max_grants
        self.kind = "cluster" if isinstance(client, redis.cluster.RedisCluster) else "redis"
        self.keys = RedisKeys(prefix)
        self.cascade_chunk = cascade_chunk
        self._scripts = {
            name: client.register_script(src) for name, src in redis_scripts.ALL.items()
        }
        self._decision_scripts = {
            name: client.register_script(src) for name, src in DECISION_SCRIPTS.items()
        }
        self._grant_scripts = {
            name: client.register_script(src) for name, src in GRANT_SCRIPTS.items()
        }
        self._proposal_scripts = {
            name: client.register_script(src) for name, src in PROPOSAL_SCRIPTS.items()
        }
        self._block_slice = block_slice(client)
        # Checked on every connection and ping (redis_identity); first now, when Redis
        # answers (else at the first connection).
        self._identity = StoreIdentity(client, prefix)
        with contextlib.suppress(*_UNAVAILABLE, rex.RedisError, OSError):
            self._identity.check()

    def epochs(self, namespace: str) -> tuple[int, int]:
        """The namespace's write and access counters, in one round trip: every writer
        (any sidecar on this Redis) moves them atomically with its writes. MGET answers
        nil for a key of another type as for an absent one, so a nil is looked at by
        TYPE (a second round trip, only until the counter exists)."""
        k = self.keys
        keys = [k.counter_of(namespace, "w"), k.counter_of(namespace, "a")]
        with self._guard(*keys):
            values = self.client.mget(keys)
        if None in values:  # absent, or (MGET answers nil for it) a key of another type
            absent = [key for key, value in zip(keys, values, strict=True) if value is None]
            found = self._wrong_type(absent, RECORD_REMEDY)
            if found is not None:
                raise found
        counts = []
        for key, value in zip(keys, values, strict=True):
            try:
                counts.append(int(value or 0))
            except ValueError:
                raise StoreCorruptError(
                    key, f"its value is not an integer: {value!r}", store="redis"
                ) from None
        return counts[0], counts[1]

    def close(self) -> None:
        self.client.close()

    def ping(self) -> bool:
        """PING every primary (one for a standalone Redis) within the client's
        timeouts, and check it still holds the store's data and evicts nothing
        (``redis_identity``): False when any does not answer or fails the check."""
        try:
            if isinstance(self.client, redis.cluster.RedisCluster):
                self.client.ping(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
            else:
                self.client.ping()
            self._identity.check()
        except (*_UNAVAILABLE, rex.RedisError, OSError):
            return False
        return True

    # -- reads ---------------------------------------------------------------------

    def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None:
        key = self.keys.claim(namespace, subject, attribute)
        with self._guard(key):
            return cast("str | None", self.client.get(key))

    def _record_accesses(self, namespace: str, accesses: dict[str, tuple[int, float]]) -> int:
        keys = [self.keys.record(namespace, i) for i in accesses]
        args: list[Any] = []
        for count, at in accesses.values():
            args += (count, repr(float(at)))
        return int(self._run("access", keys, args, namespace))

    # -- namespace registry and rate counters ------------------------------------------

    def namespaces(self) -> list[str]:
        with self._guard(self.keys.namespaces()):
            return sorted(cast("set[str]", self.client.smembers(self.keys.namespaces())))

    def _incr_counter(self, namespace: str, name: str, now: float) -> None:
        retention = self.limits.counter_retention_seconds
        member = f"{now!r}:{os.urandom(6).hex()}"
        self._run(
            "counter_add",
            [self.keys.counter(namespace, name)],
            [repr(now), member, repr(now - retention), int(retention * 1000)],
            namespace,
        )

    def _count(self, namespace: str, name: str, since: float, now: float) -> int:
        key = self.keys.counter(namespace, name)
        with self._guard(key):
            return int(self.client.zcount(key, f"({since!r}", repr(now)))

    def _count_with_change(
        self, namespace: str, name: str, window: float, now: float
    ) -> tuple[int, float]:
        """The count and when it next changes (`window.next_change`), in one round trip: the
        oldest event in the window leaves, or the first later one enters. Exact: an
        event added moves the namespace's write counter (`counter_add` counts)."""
        key, since = self.keys.counter(namespace, name), f"({now - window!r}"
        with self._guard(key):
            pipe = self.client.pipeline(transaction=True)  # one key: one slot
            pipe.zcount(key, since, repr(now))
            pipe.zrangebyscore(key, since, repr(now), start=0, num=1, withscores=True)
            pipe.zrangebyscore(key, f"({now!r}", "+inf", start=0, num=1, withscores=True)
            count, oldest, later = pipe.execute()
        return int(count), next_change(
            oldest[0][1] if oldest else None, later[0][1] if later else None, window
        )

    # -- diagnostics ------------------------------------------------------------------

    def memory_usage(self, namespace: str, memory_id: str) -> int | None:
        """Bytes Redis reports for the record hash (MEMORY USAGE), for the bench."""
        with self._guard():
            return self.client.memory_usage(self.keys.record(namespace, memory_id), samples=0)
