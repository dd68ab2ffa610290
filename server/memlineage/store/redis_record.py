"""Recording a new memory on Redis: ``record`` and ``record_claim``, one RECORD
script call each (see ``memlineage.store.redis_store`` for its atomicity), and the
client-side read of a superseded holder's descendants it passes in KEYS."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import cast

from memlineage.lineage.errors import (
    AlreadyExistsError,
    StoreUnavailableError,
    TransitionError,
    UnknownDependencyError,
)
from memlineage.lineage.model import (
    CASCADE_MARKS,
    TAINTED,
    MemoryRecord,
    Status,
    allowed_sources,
)
from memlineage.lineage.validation import validate_new
from memlineage.store.base import (
    ANY_HOLDER,
    ClaimMovedError,
    RecordOutcome,
    cascade_reason,
    record_digest,
)
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_codec import (
    FIELDS,
    JOINED,
    STORE_KEPT,
    encode_field,
    spaced,
)

_GROUP_RETRIES = 32
_UNREGISTERED = (
    "the memory was recorded, its namespace not added to the registry (restore the key "
    "from a backup, or DEL it and SADD every namespace again; the same Record repeated "
    "then registers the namespace)"
)
"""The end of the ``StoreCorruptError`` of a registry of another type: met after the
record's script, in another slot, it cannot join it."""


class RedisRecord(RedisBase):
    """Record (RECORD script) and the descendant closure it needs."""

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
            k.claim_peers(ns, *claim) if claim else rkey,
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
        # The members' record keys must be in KEYS, so read them first: the claim's peers
        # (the members still live when last seen), or its whole group when the peers hash
        # may miss one that came back (see redis_keys); the script re-checks them and
        # asks for a retry with what it saw if they changed. Likewise the holder's
        # descendants (they only grow): the script names the ones it found missing.
        members, whole = self._claim_members(ns, claim) if claim else ([], True)
        closure = self._closure(ns, [supersede], {supersede}) if supersede else []
        for _ in range(_GROUP_RETRIES):
            keys = base + [k.record(ns, m) for m in members] + k.triples(ns, closure)
            out = self._run(
                "record",
                keys,
                [
                    *head,
                    len(members),
                    *tail,
                    len(closure),
                    "1" if whole else "0",
                    *fields,
                    *deps,
                    *closure,
                ],
                ns,
            )
            if out[0] != 0 or out[1] not in ("RETRY", "CLOSURE"):
                break
            if out[1] == "RETRY":  # the members as the script saw them: try with those
                members, whole = out[2], out[3] == "1"
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
        self._register(ns, _UNREGISTERED)
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

    def _claim_members(self, ns: str, claim: tuple[str, str]) -> tuple[list[str], bool]:
        """The members a Record of `claim` compares with: its peers hash's, when that is
        whole (its "~" is the namespace's claim revivals counter), else the whole group
        (True), from which the script makes the peers hash whole again."""
        k = self.keys
        gkey, pkey, revivals = (
            k.claim_group(ns, *claim),
            k.claim_peers(ns, *claim),
            k.claim_revivals(ns),
        )
        with self._guard(gkey, pkey, revivals):
            pipe = self.client.pipeline(transaction=False)
            pipe.get(revivals)
            pipe.hgetall(pkey)
            now, peers = pipe.execute()
            if peers.pop("~", None) == (now or "0"):
                return list(peers), False
            return list(cast("set[str]", self.client.smembers(gkey))), True

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
            lists = [self.keys.derivations(namespace, node) for node in frontier]
            with self._guard(*lists):
                pipe = self.client.pipeline(transaction=False)
                for key in lists:
                    pipe.lrange(key, 0, -1)
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
