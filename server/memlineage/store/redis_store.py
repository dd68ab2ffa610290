"""Redis backend, standalone and Cluster with the same code.

The client is injected (``redis.Redis`` or ``redis.cluster.RedisCluster``, both
with ``decode_responses=True``).  Writes are single Lua scripts whose keys all
carry the namespace hash tag, so they are atomic and cluster-legal; reads are
one LOAD script call per batch (a BFS level of a lineage view): HGETALL plus the
derivation list (and the history list only when asked) of every id, all passed
in KEYS, one round trip to one node in a cluster.  Reads of buffered accesses
are flushed with one ACCESS script call (``record_accesses``).

Record atomicity: one Record (``record_claim``) is one RECORD script: the memory, its
claim-group comparison, the supersession of the claim's old holder with the whole
cascade it starts (the holder's descendants are read first and passed in KEYS; the
script names any it finds missing and the call retries with them), the rate counter,
and the proposal's digest with the outcome (hash fields D, R, A) for an identical
retry, which answers that outcome and writes nothing.

Cascade atomicity (UpdateStatus): the root's status change is one script; descendants are
marked breadth-first in chunks of ``cascade_chunk`` nodes, each chunk one
atomic script that also returns the chunk's children for the next round.  A
reader may observe a cascade half-way (some descendants already pending,
others not yet), but no descendant is ever missed: a memory recorded under a
node after that node was marked inherits pending_verification at record time
(RECORD checks its dependencies' statuses atomically).

Lineage events: every writing script appends its events to the namespace's
stream (``ml:{ns}:ev``) in the same atomic step; a cascade appends one
``cascaded`` event per chunk.  Readers page with one script (which also tells
a trimmed gap from an up-to-date cursor) and wait with ``XREAD BLOCK``, which
holds one pooled connection for the duration of the wait.

Claim groups: a record with a claim compares itself with the other members of
the claim's group (``ml:{ns}:cg:<subject>|<attr>``) inside RECORD.  Their record
keys must be in KEYS, so the group is read first (SMEMBERS) and the script
re-checks its size (a group only grows, so same size = same members); if it
changed it answers RETRY with the members it saw and the call retries with those
(up to 32 times, then StoreUnavailableError).  Source statistics (``ml:{ns}:src``)
and the review schedule (``ml:{ns}:rv``) are single per-namespace keys written by
the same scripts; the namespace registry (``ml:namespaces``) is global and
written after the record.

Kept decisions: ``keep_decisions`` appends a batch to the namespace's stream
``ml:{ns}:dec`` and indexes each id in ``ml:{ns}:dix`` (KEEP, one script per chunk
of ``_KEEP_CHUNK``), then trims both exactly to ``decision_retention``; a decision
by id is one HGET + XRANGE (GET_DECISION), a memory's recent ones one scan of the
stream newest first, server-side (RECENT_DECISIONS, at most the retention). No
counter moves: decisions are not lineage state.

Cycle check: only ``add_dependencies`` changes the ancestors of an existing
memory.  It checks reachability client-side (a pipeline per ancestor level)
against the namespace's graph epoch and its script refuses (and the call
retries) if another edge was added in between, so racing additions can never
close a cycle.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, cast

import redis
import redis.exceptions as rex

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import (
    AlreadyExistsError,
    CursorExpiredError,
    CycleError,
    NotFoundError,
    StoreUnavailableError,
    TransitionError,
    UnknownDependencyError,
    VersionConflictError,
)
from memlineage.lineage.model import (
    CASCADE_MARKS,
    CASCADE_TRIGGERS,
    CLAIM_RELEASE,
    TAINTED,
    CascadeResult,
    LineageEvent,
    MemoryRecord,
    Status,
    allowed_sources,
)
from memlineage.lineage.validation import StoreLimits, check_dependencies, validate_new
from memlineage.store import redis_scripts
from memlineage.store.base import (
    ANY_HOLDER,
    ClaimMovedError,
    LineageStore,
    RecordOutcome,
    cascade_reason,
    record_digest,
)
from memlineage.store.redis_codec import (
    FIELDS,
    JOINED,
    STORE_KEPT,
    decode,
    decode_event,
    decode_flat,
    encode_field,
    pairs,
    spaced,
)
from memlineage.store.redis_keys import RedisKeys
from memlineage.store.window import next_change

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
# redis-py's types say bytes | str: the casts below state that, and nothing more.
_GROUP_RETRIES = 32
_CURSOR_RE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_MAX_BLOCK_SECONDS = 5.0
_LOAD_CHUNK = 1000
"""Ids per LOAD script call: bounds how long one call holds the server."""
_KEEP_CHUNK = 500
"""Decisions per KEEP script call."""

# KEYS: stream, index; ARGV: retention, then (id, " memory ids ", KeptDecision JSON)...
_KEEP = """
local n = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    local eid = redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'm', ARGV[i + 1],
                           'd', ARGV[i + 2])
    redis.call('HSET', KEYS[2], ARGV[i], eid)
  end
end
local len = redis.call('XLEN', KEYS[1])
if len > n then
  for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', len - n)) do
    local f = e[2]
    for j = 1, #f, 2 do
      if f[j] == 'i' then redis.call('HDEL', KEYS[2], f[j + 1]) end
    end
  end
  redis.call('XTRIM', KEYS[1], 'MAXLEN', n)
end
return len
"""
# KEYS: stream, index; ARGV: decision id. The KeptDecision JSON, or nil.
_GET_DECISION = """
local eid = redis.call('HGET', KEYS[2], ARGV[1])
if not eid then return false end
local e = redis.call('XRANGE', KEYS[1], eid, eid)
if #e == 0 then return false end
local f = e[1][2]
for j = 1, #f, 2 do
  if f[j] == 'd' then return f[j + 1] end
end
return false
"""
# KEYS: stream; ARGV: " memory id ", limit, entries to scan at most. JSON texts, newest first.
_RECENT_DECISIONS = """
local want, limit, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out, last = {}, '+'
while budget > 0 and #out < limit do
  local chunk = redis.call('XREVRANGE', KEYS[1], last, '-', 'COUNT', math.min(256, budget))
  if #chunk == 0 then break end
  for _, e in ipairs(chunk) do
    local f, m, d = e[2], nil, nil
    for j = 1, #f, 2 do
      if f[j] == 'm' then m = f[j + 1] elseif f[j] == 'd' then d = f[j + 1] end
    end
    if m and d and string.find(m, want, 1, true) then
      out[#out + 1] = d
      if #out >= limit then break end
    end
  end
  budget = budget - #chunk
  last = '(' .. chunk[#chunk][1]
end
return out
"""


class RedisStore(LineageStore):
    """Lineage store over an injected redis-py client (standalone or cluster)."""

    def __init__(
        self,
        client: redis.Redis | redis.cluster.RedisCluster,
        *,
        clock: Clock = system_clock,
        limits: StoreLimits | None = None,
        prefix: str = "ml",
        cascade_chunk: int = 2000,
    ):
        super().__init__(clock=clock, limits=limits)
        self.client = client
        self.kind = "cluster" if isinstance(client, redis.cluster.RedisCluster) else "redis"
        self.keys = RedisKeys(prefix)
        self.cascade_chunk = cascade_chunk
        self._scripts = {
            name: client.register_script(src) for name, src in redis_scripts.ALL.items()
        }
        self._decision_scripts = {
            name: client.register_script(src)
            for name, src in (
                ("keep", _KEEP),
                ("get", _GET_DECISION),
                ("recent", _RECENT_DECISIONS),
            )
        }
        timeout = _socket_timeout(client)
        # An XREAD BLOCK longer than the socket timeout would look like a dead server.
        self._block_slice = (
            _MAX_BLOCK_SECONDS
            if timeout is None
            else min(_MAX_BLOCK_SECONDS, max(0.01, timeout / 2))
        )

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

    def epochs(self, namespace: str) -> tuple[int, int]:
        """The namespace's write and access counters, in one round trip: every writer
        (any sidecar on this Redis) moves them atomically with its writes."""
        k = self.keys
        with self._guard():
            w, a = self.client.mget(k.counter_of(namespace, "w"), k.counter_of(namespace, "a"))
        return int(w or 0), int(a or 0)

    def close(self) -> None:
        self.client.close()

    # -- writes ------------------------------------------------------------------

    def record(self, rec: MemoryRecord, *, now: float | None = None) -> MemoryRecord:
        return self._record(rec, now, None, ANY_HOLDER, None, None, replay=False).memory

    def record_claim(
        self,
        rec: MemoryRecord,
        *,
        now: float | None = None,
        digest: str | None = None,
        holder: str | None = ANY_HOLDER,
        supersede: str | None = None,
        count: str | None = None,
    ) -> RecordOutcome:
        """One RECORD script call does all of it (see ``LineageStore.record_claim``):
        the script refuses when the claim group, the claim holder or the holder's
        descendants are not what this call read, and the call re-reads and retries."""
        return self._record(rec, now, digest, holder, supersede, count, replay=True)

    def _record(
        self,
        rec: MemoryRecord,
        now: float | None,
        digest: str | None,
        holder: str | None,
        supersede: str | None,
        count: str | None,
        *,
        replay: bool,
    ) -> RecordOutcome:
        at = self._now(now)
        explicit_time = rec.created_at is not None
        rec = validate_new(rec, now=at, limits=self.limits)
        digest = digest or record_digest(rec, with_created_at=explicit_time)
        if supersede is not None:
            holder = supersede
        ns, k = rec.namespace, self.keys
        # validate_new resolved every MemoryRef: the dependencies are plain ids
        deps = list(cast("tuple[str, ...]", rec.dependencies))
        fields: list[str] = []
        for name, short in FIELDS.items():
            value = getattr(rec, name)
            if value is None or (name in JOINED and not value) or name in STORE_KEPT:
                continue
            fields += (short, encode_field(name, value))
        claim = rec.claim
        rkey = k.record(ns, rec.id)
        gkey = k.claim_group(ns, *claim) if claim else rkey
        old = (
            [k.record(ns, supersede), k.derivations(ns, supersede), k.history(ns, supersede)]
            if supersede
            else [rkey] * 3
        )
        base = [
            rkey,
            k.history(ns, rec.id),
            k.claim(ns, *claim) if claim else rkey,
            k.events(ns),
            gkey,
            k.sources(ns),
            k.review(ns),
            k.counter(ns, count) if count else rkey,
            *old,
        ]
        base += [k.record(ns, d) for d in deps]
        base += [k.derivations(ns, d) for d in deps]
        retention = self.limits.counter_retention_seconds
        why = f"superseded by {rec.id}"
        head = [
            rec.id,
            len(deps),
            "1" if claim else "0",
            spaced(TAINTED),
            repr(at),
            self.limits.history_length,
            len(fields),
            self._retention,
        ]
        tail = [
            repr(at + self.limits.first_review_seconds),
            rec.creator_id,
            "0" if rec.value is None else "1",
            rec.value or "",
            digest,
            "0" if holder == ANY_HOLDER else "1",
            holder or "",
            supersede or "",
            spaced(allowed_sources(Status.SUPERSEDED)),
            spaced(CASCADE_MARKS),
            why,
            cascade_reason(Status.SUPERSEDED, why),
            "1" if count else "0",
            f"{at!r}:{os.urandom(6).hex()}",
            repr(at - retention),
            int(retention * 1000),
        ]
        # The members' record keys must be in KEYS, so read the group first; the script
        # re-checks its size (a group only grows) and asks for a retry if it changed.
        # Likewise the holder's descendants (they only grow too): the script names the
        # ones it found missing.
        members: list[str] = []
        if claim:
            with self._guard():
                members = list(cast("set[str]", self.client.smembers(gkey)))
        closure = self._closure(ns, [supersede], {supersede}) if supersede else []
        for _ in range(_GROUP_RETRIES):
            keys = base + [k.record(ns, m) for m in members] + k.triples(ns, closure)
            out = self._run(
                "record",
                keys,
                [*head, len(members), *tail, len(closure), *fields, *deps, *closure],
                ns,
            )
            if out[0] != 0 or out[1] not in ("RETRY", "CLOSURE"):
                break
            if out[1] == "RETRY":
                members = out[2]  # the group as the script saw it: try again with those
            else:
                known = set(closure) | {supersede or ""}
                closure += self._closure(ns, out[2], known, start=True)
        else:
            raise StoreUnavailableError("the claim group kept changing; retry later")
        if out[0] == 2 and not replay:  # plain record(): an existing id is refused
            raise AlreadyExistsError(f"memory {rec.id!r} already exists", field="id")
        if out[0] == 0:
            code = out[1]
            if code == "EXISTS":
                raise AlreadyExistsError(f"memory {rec.id!r} already exists", field="id")
            if code == "HOLDER":
                raise ClaimMovedError(
                    f"the claim is held by {out[2] or None!r} now, not {holder!r}",
                    holder=out[2] or None,
                )
            if code == "TRANSITION":
                raise TransitionError(
                    f"memory {supersede!r} cannot go from {out[2]} to superseded",
                    current=out[2],
                    requested=Status.SUPERSEDED.value,
                )
            i = int(out[2])
            raise UnknownDependencyError(
                f"no memory {deps[i]!r} in this namespace", field=f"dependencies[{i}]"
            )
        # The namespace registry lives outside the namespace's slot, so it is written
        # after the atomic record (and again by a replay, should a crash have come in
        # between): it only ever says "holds memories", never which.
        with self._guard():
            self.client.sadd(k.namespaces(), ns)
        if out[0] == 2:
            stored = self._load(ns, [rec.id], False)[rec.id]
            return RecordOutcome(stored, out[2] or None, tuple(out[3].split()), True)
        superseded = out[5] or None
        affected = tuple(out[6])
        if out[1] == rec.status:
            return RecordOutcome(
                replace(
                    rec, confirmed_by=tuple(out[3].split()), contradicted_by=tuple(out[4].split())
                ),
                superseded,
                affected,
            )
        # Recorded pending (a tainted dependency, or the cascade it started): as stored.
        return RecordOutcome(self._load(ns, [rec.id])[rec.id], superseded, affected)

    def _closure(
        self, namespace: str, roots: list[str], known: set[str], *, start: bool = False
    ) -> list[str]:
        """The descendants of ``roots`` not in ``known`` (``start``: with the roots
        themselves), breadth first, one pipeline of derivation lists per level."""
        found: list[str] = []
        frontier = list(roots)
        if start:
            frontier = [r for r in roots if r not in known]
            known.update(frontier)
            found += frontier
        while frontier:
            with self._guard():
                pipe = self.client.pipeline(transaction=False)
                for node in frontier:
                    pipe.lrange(self.keys.derivations(namespace, node), 0, -1)
                replies = pipe.execute()
            nxt: list[str] = []
            for kids in replies:
                for kid in kids:
                    if kid not in known:
                        known.add(kid)
                        nxt.append(kid)
            found += nxt
            frontier = nxt
        return found

    def ping(self) -> bool:
        """PING every primary (one for a standalone Redis) within the client's
        timeouts: False when any does not answer."""
        try:
            if isinstance(self.client, redis.cluster.RedisCluster):
                self.client.ping(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
            else:
                self.client.ping()
        except (*_UNAVAILABLE, rex.RedisError, OSError):
            return False
        return True

    def _change_status(
        self,
        namespace: str,
        memory_id: str,
        target: Status,
        *,
        reason: str,
        successor: str | None,
        expected_version: int | None,
        now: float,
        only_from: frozenset[Status] | None,
    ) -> CascadeResult:
        k = self.keys
        rkey = k.record(namespace, memory_id)
        claim_key = rkey
        if target in CLAIM_RELEASE:
            with self._guard():
                subject, attribute = cast("list[str | None]", self.client.hmget(rkey, ["s", "a"]))
            if subject is not None and attribute is not None:
                claim_key = k.claim(namespace, subject, attribute)
        sources = allowed_sources(target)
        if only_from is not None:
            sources &= only_from
        cascades = target in CASCADE_TRIGGERS
        keys = [
            rkey,
            k.derivations(namespace, memory_id),
            k.history(namespace, memory_id),
            claim_key,
            k.record(namespace, successor) if successor else rkey,
            k.events(namespace),
        ]
        args = [
            target.value,
            spaced(sources),
            "" if expected_version is None else str(expected_version),
            repr(now),
            reason,
            memory_id,
            successor or "",
            self.limits.history_length,
            "1" if claim_key != rkey else "0",
            self._retention,
        ]
        out = self._run("set_status", keys, args, namespace)
        if out[0] == 0:
            code, detail = out[1], out[2]
            if code == "NOTFOUND":
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="id")
            if code == "VERSION":
                raise VersionConflictError(
                    f"memory {memory_id!r} is at version {detail}, not {expected_version}",
                    expected=expected_version or 0,
                    actual=int(detail),
                )
            if code == "NOSUCCESSOR":
                raise NotFoundError(f"no memory {successor!r} in this namespace", field="successor")
            raise TransitionError(
                f"memory {memory_id!r} cannot go from {detail} to {target.value}",
                current=detail,
                requested=target.value,
            )
        children = out[3]
        root = decode(namespace, memory_id, pairs(out[1]), out[2], children)
        affected: list[str] = []
        visited = 0
        if cascades:
            affected, visited = self._cascade(
                namespace,
                memory_id,
                memory_id,
                target.value,
                children,
                cascade_reason(target, reason),
                now,
            )
        return CascadeResult(
            root=root, marked=len(affected), visited=visited, affected=tuple(affected)
        )

    @property
    def _retention(self) -> int:
        return max(1, self.limits.event_retention)

    def _cascade(
        self,
        namespace: str,
        start: str,
        root: str,
        root_status: str,
        children: list[str],
        reason: str,
        now: float,
    ) -> tuple[list[str], int]:
        """BFS over derivation lists from ``start``, one atomic script per chunk of nodes
        (each appending one ``cascaded`` event); history on the marked descendants names
        ``root``.  Returns the ids marked (BFS order) and how many were visited."""
        seen = {start}
        frontier: list[str] = []
        for c in children:
            if c not in seen:
                seen.add(c)
                frontier.append(c)
        affected: list[str] = []
        args = [
            spaced(CASCADE_MARKS),
            repr(now),
            reason,
            root,
            self.limits.history_length,
            self._retention,
            root_status,
            start,
            len(self.keys.record(namespace, "")),
        ]
        events_key = self.keys.events(namespace)
        chunk = self.cascade_chunk
        while frontier:
            nxt: list[str] = []
            for i in range(0, len(frontier), chunk):
                part = frontier[i : i + chunk]
                keys = self.keys.triples(namespace, part)
                keys.append(events_key)
                marked, kids = self._run("cascade_mark", keys, args, namespace)
                affected.extend(marked)
                for c in kids:
                    if c not in seen:
                        seen.add(c)
                        nxt.append(c)
            frontier = nxt
        return affected, len(seen) - 1

    def _add_dependencies(
        self,
        namespace: str,
        memory_id: str,
        deps: tuple[str, ...],
        expected_version: int,
        now: float,
    ) -> MemoryRecord:
        k = self.keys
        for _ in range(32):  # optimistic: retried only if another edge was added meanwhile
            with self._guard():
                epoch = self.client.get(k.epoch(namespace)) or ""
            current = self.get(namespace, memory_id)
            if current.version != expected_version:
                raise VersionConflictError(
                    f"memory {memory_id!r} is at version {current.version}, not {expected_version}",
                    expected=expected_version,
                    actual=current.version,
                )
            stored = cast("tuple[str, ...]", current.dependencies)  # stored: plain ids
            deps = check_dependencies(
                deps, namespace=namespace, memory_id=memory_id, limits=self.limits, existing=stored
            )
            self._check_no_cycle(namespace, memory_id, deps)
            keys = [
                k.record(namespace, memory_id),
                k.history(namespace, memory_id),
                k.epoch(namespace),
                k.derivations(namespace, memory_id),
                k.events(namespace),
            ]
            keys += [k.record(namespace, d) for d in deps]
            keys += [k.derivations(namespace, d) for d in deps]
            args = [
                memory_id,
                len(deps),
                str(expected_version),
                epoch,
                " ".join((*stored, *deps)),
                spaced(TAINTED),
                spaced(CASCADE_MARKS),
                repr(now),
                self.limits.history_length,
                self._retention,
                *deps,
            ]
            out = self._run("add_dependencies", keys, args, namespace)
            if out[0] == 1:
                if out[1]:
                    self._cascade(namespace, memory_id, out[1], out[4], out[3], out[2], now)
                return self.get(namespace, memory_id)
            if out[1] == "NODEP":
                i = int(out[2])
                raise UnknownDependencyError(
                    f"no memory {deps[i]!r} in this namespace", field=f"dependencies[{i}]"
                )
            if out[1] == "NOTFOUND":
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="id")
            if out[1] == "VERSION":
                raise VersionConflictError(
                    f"memory {memory_id!r} is at version {out[2]}, not {expected_version}",
                    expected=expected_version,
                    actual=int(out[2]),
                )
        raise StoreUnavailableError("the namespace graph kept changing; retry later")

    def _check_no_cycle(self, namespace: str, memory_id: str, deps: tuple[str, ...]) -> None:
        """Refuse if ``memory_id`` is an ancestor of a new dependency (BFS, a pipeline per
        level over the ``d`` fields)."""
        origin = {d: i for i, d in enumerate(deps)}
        frontier = list(deps)
        first = True
        while frontier:
            if memory_id in frontier:
                i = origin[memory_id]
                raise CycleError(
                    f"{memory_id!r} is an ancestor of {deps[i]!r}", field=f"dependencies[{i}]"
                )
            with self._guard():
                pipe = self.client.pipeline(transaction=False)
                for node in frontier:
                    pipe.hmget(self.keys.record(namespace, node), ["S", "d"])
                replies = pipe.execute()
            nxt: list[str] = []
            for node, (status, joined) in zip(frontier, replies, strict=True):
                if first and status is None:  # same precedence as the embedded store
                    i = origin[node]
                    raise UnknownDependencyError(
                        f"no memory {node!r} in this namespace", field=f"dependencies[{i}]"
                    )
                for parent in (joined or "").split():
                    if parent not in origin:
                        origin[parent] = origin[node]
                        nxt.append(parent)
            frontier, first = nxt, False

    def _update(
        self,
        namespace: str,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        now: float,
    ) -> MemoryRecord:
        sets: list[str] = []
        dels: list[str] = []
        for name, value in changes.items():
            short = FIELDS[name]
            if value is None or (name in JOINED and not value):
                dels.append(short)
            else:
                sets += (short, encode_field(name, value))
        k = self.keys
        keys = [
            k.record(namespace, memory_id),
            k.derivations(namespace, memory_id),
            k.history(namespace, memory_id),
            k.events(namespace),
        ]
        out = self._run(
            "update",
            keys,
            [str(expected_version), " ".join(dels), repr(now), self._retention, memory_id, *sets],
            namespace,
        )
        if out[0] == 0:
            if out[1] == "NOTFOUND":
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="id")
            raise VersionConflictError(
                f"memory {memory_id!r} is at version {out[2]}, not {expected_version}",
                expected=expected_version,
                actual=int(out[2]),
            )
        return decode(namespace, memory_id, pairs(out[1]), out[2], out[3])

    # -- reads ---------------------------------------------------------------------

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
            replies = self._run("load", keys, [per])
            for j, memory_id in enumerate(part):
                flat = replies[per * j]
                if flat:
                    out[memory_id] = decode_flat(
                        namespace,
                        memory_id,
                        flat,
                        replies[per * j + 2] if with_history else (),
                        replies[per * j + 1],
                    )
        return out

    def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None:
        with self._guard():
            return cast(
                "str | None", self.client.get(self.keys.claim(namespace, subject, attribute))
            )

    def _record_accesses(self, namespace: str, accesses: dict[str, tuple[int, float]]) -> int:
        keys = [self.keys.record(namespace, i) for i in accesses]
        args: list[Any] = []
        for count, at in accesses.values():
            args += (count, repr(float(at)))
        return int(self._run("access", keys, args, namespace))

    # -- reliability and review schedule ------------------------------------------------

    def _claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        with self._guard():
            members = list(
                cast(
                    "set[str]",
                    self.client.smembers(self.keys.claim_group(namespace, subject, attribute)),
                )
            )
        return list(self._load(namespace, members).values())

    def _source_stats(self, namespace: str, sources: list[str]) -> dict[str, tuple[float, float]]:
        names = [f"{s}|{kind}" for s in sources for kind in ("ok", "bad")]
        with self._guard():
            values = self.client.hmget(self.keys.sources(namespace), names)
        return {
            s: (float(values[2 * i] or 0.0), float(values[2 * i + 1] or 0.0))
            for i, s in enumerate(sources)
        }

    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in ids]
        keys.append(self.keys.sources(namespace))
        return int(
            self._run("feedback", keys, ["j", "|ok"] if success else ["q", "|bad"], namespace)
        )

    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]:
        with self._guard():
            return cast(
                "list[str]",
                self.client.zrangebyscore(
                    self.keys.review(namespace), "-inf", repr(now), start=0, num=limit
                ),
            )

    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in times]
        keys.append(self.keys.review(namespace))
        args: list[str] = [repr(now)]
        for memory_id, at in times.items():
            args += (memory_id, repr(at))
        return int(self._run("schedule_review", keys, args))

    def _unschedule_review(self, namespace: str, ids: list[str]) -> int:
        with self._guard():
            return int(self.client.zrem(self.keys.review(namespace), *ids))

    def namespaces(self) -> list[str]:
        with self._guard():
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
        with self._guard():
            return int(
                self.client.zcount(self.keys.counter(namespace, name), f"({since!r}", repr(now))
            )

    def _count_with_change(
        self, namespace: str, name: str, window: float, now: float
    ) -> tuple[int, float]:
        """The count and when it next changes (`window.next_change`), in one round trip: the
        oldest event in the window leaves, or the first later one enters. Exact: an
        event added moves the namespace's write counter (`counter_add` counts)."""
        key, since = self.keys.counter(namespace, name), f"({now - window!r}"
        with self._guard():
            pipe = self.client.pipeline(transaction=True)  # one key: one slot
            pipe.zcount(key, since, repr(now))
            pipe.zrangebyscore(key, since, repr(now), start=0, num=1, withscores=True)
            pipe.zrangebyscore(key, f"({now!r}", "+inf", start=0, num=1, withscores=True)
            count, oldest, later = pipe.execute()
        return int(count), next_change(
            oldest[0][1] if oldest else None, later[0][1] if later else None, window
        )

    # -- lineage events ---------------------------------------------------------------

    def _parse_cursor(self, cursor: str) -> str | None:
        m = _CURSOR_RE.fullmatch(cursor)
        if m is None:
            return None
        ms, seq = int(m.group(1)), int(m.group(2))
        if ms >= 2**64 or seq >= 2**64:
            return None
        return f"{ms}-{seq}"

    def _events(
        self, namespace: str, after: str | None, limit: int
    ) -> tuple[list[LineageEvent], str]:
        out = self._run("events", [self.keys.events(namespace)], [after or "", limit])
        if out[0] == 0:
            if out[1] == "EXPIRED":
                raise CursorExpiredError(
                    f"events after cursor {after} were dropped (the oldest retained follows "
                    f"{out[2]}); re-sync"
                )
            raise CursorExpiredError(
                f"cursor {after} is ahead of this namespace's log (at {out[2]}): the store "
                "was reset or the cursor is not from it; re-sync"
            )
        events = [decode_event(namespace, entry_id, flat) for entry_id, flat in out[2]]
        if events:
            return events, events[-1].cursor
        return events, out[1] if after is None else after

    def _wait_events(
        self, namespace: str, after: str | None, limit: int, timeout: float
    ) -> tuple[list[LineageEvent], str]:
        deadline = time.monotonic() + timeout
        key = self.keys.events(namespace)
        while True:
            events, cursor = self._events(namespace, after, limit)
            remaining = deadline - time.monotonic()
            if events or remaining <= 0:
                return events, cursor
            block_ms = max(1, int(min(remaining, self._block_slice) * 1000))
            with self._guard():  # wakes on the first new entry; read it via _events
                self.client.xread({key: cursor}, count=1, block=block_ms)

    def _latest_cursor(self, namespace: str) -> str:
        with self._guard():
            last = cast(
                "list[tuple[str, Any]]", self.client.xrevrange(self.keys.events(namespace), count=1)
            )
        return last[0][0] if last else "0-0"

    # -- kept decisions -----------------------------------------------------------------

    @property
    def keeps_decisions(self) -> bool:
        return True

    def keep_decisions(self, namespace: str, entries: Sequence[KeptDecision]) -> None:
        retention = max(1, self.decision_retention)
        entries = entries[-retention:]  # older ones would be trimmed at once
        keys = [self.keys.decisions(namespace), self.keys.decision_index(namespace)]
        script = self._decision_scripts["keep"]
        for start in range(0, len(entries), _KEEP_CHUNK):
            args: list[Any] = [retention]
            for e in entries[start : start + _KEEP_CHUNK]:
                args += (e.decision_id, f" {' '.join(e.memory_ids)} ", e.to_json())
            with self._guard():
                script(keys=keys, args=args)

    def kept_decisions(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        if limit <= 0:
            return []
        with self._guard():
            texts = self._decision_scripts["recent"](
                keys=[self.keys.decisions(namespace)],
                args=[f" {memory_id} ", limit, max(1, self.decision_retention)],
            )
        found = (KeptDecision.from_json(t) for t in texts)
        return [k for k in found if k is not None and memory_id in k.memory_ids]

    def kept_decision(self, namespace: str, decision_id: str) -> KeptDecision | None:
        with self._guard():
            text = self._decision_scripts["get"](
                keys=[self.keys.decisions(namespace), self.keys.decision_index(namespace)],
                args=[decision_id],
            )
        return KeptDecision.from_json(text) if text else None

    def decisions_kept(self, namespace: str) -> int:
        """How many decisions the namespace's stream holds (XLEN), for tests."""
        with self._guard():
            return int(self.client.xlen(self.keys.decisions(namespace)))

    # -- diagnostics ------------------------------------------------------------------

    def memory_usage(self, namespace: str, memory_id: str) -> int | None:
        """Bytes Redis reports for the record hash (MEMORY USAGE), for the bench."""
        with self._guard():
            return self.client.memory_usage(self.keys.record(namespace, memory_id), samples=0)


def _socket_timeout(client: Any) -> float | None:
    """The client's socket timeout (standalone pool or cluster node settings), if any."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None)
    timeout = (kwargs or {}).get("socket_timeout")
    return float(timeout) if timeout else None
