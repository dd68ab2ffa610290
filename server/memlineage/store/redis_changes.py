"""Changes to an existing memory on Redis: status changes and the breadth-first
cascade they start (chunked CASCADE_MARK scripts), added dependencies with the
client-side cycle check, and field updates."""

from __future__ import annotations

import logging
from typing import Any, cast

from memlineage.lineage.errors import (
    CycleError,
    NotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
    TransitionError,
    UnknownDependencyError,
    VersionConflictError,
)
from memlineage.lineage.model import (
    CASCADE_MARKS,
    CASCADE_TRIGGERS,
    CLAIM_RELEASE,
    EVICTION_BLOCKERS,
    TAINTED,
    CascadeResult,
    MemoryRecord,
    Status,
    allowed_sources,
)
from memlineage.lineage.validation import check_dependencies
from memlineage.store.base import cascade_reason
from memlineage.store.changes import live_derivations
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_codec import (
    FIELDS,
    JOINED,
    decode,
    encode_field,
    pairs,
    spaced,
)

log = logging.getLogger("memlineage.store")
_US = "\x1f"  # the separator of a pending cascade's note (as of history entries)


class RedisChanges(RedisBase):
    """UpdateStatus with its cascade, AddDependencies with its cycle check, Update."""

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
        idle_only: bool = False,
    ) -> CascadeResult:
        k = self.keys
        rkey = k.record(namespace, memory_id)
        claim_key = rkey
        if target in CLAIM_RELEASE:
            with self._guard(rkey):
                subject, attribute = cast("list[str | None]", self.client.hmget(rkey, ["s", "a"]))
            if subject is not None and attribute is not None:
                claim_key = k.claim(namespace, subject, attribute)
        sources = allowed_sources(target)
        if only_from is not None:
            sources &= only_from
        cascades = target in CASCADE_TRIGGERS
        walk_reason = cascade_reason(target, reason)
        keys = [
            rkey,
            k.derivations(namespace, memory_id),
            k.history(namespace, memory_id),
            claim_key,
            k.record(namespace, successor) if successor else rkey,
            k.events(namespace),
            k.pending_cascades(namespace),
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
            _US.join((memory_id, target.value, walk_reason, repr(now))) if cascades else "",
        ]
        if cascades:  # before the walk's note: maintenance finds it by the registry
            self._register(namespace)
        kids: list[str] = []
        if idle_only:  # the derivations' records go in KEYS: read the list first
            with self._guard(k.derivations(namespace, memory_id)):
                kids = cast("list[str]", self.client.lrange(keys[1], 0, -1))
        for _ in range(32):
            out = self._run(
                "set_status",
                keys + [k.record(namespace, c) for c in kids],
                [*args, "1" if idle_only else "", spaced(EVICTION_BLOCKERS), *kids],
                namespace,
            )
            if out[0] != 0 or out[1] != "CLOSURE":
                break
            kids += [c for c in out[2] if c not in kids]  # recorded since the read
        else:
            raise StoreUnavailableError("the memory's derivations kept changing; retry later")
        if out[0] == 0 and out[1] == "LIVE":
            raise live_derivations(memory_id, out[3], target, out[2])
        if out[0] == 0:
            code, detail = out[1], out[2]
            if code == "NOTFOUND":
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
            if code == "VERSION":
                raise VersionConflictError(
                    f"memory {memory_id!r} is at version {detail}, not {expected_version}",
                    expected=expected_version or 0,
                    actual=int(detail),
                )
            if code == "NOSUCCESSOR":
                raise NotFoundError(f"no memory {successor!r} in this namespace", field="successor")
            if cascades and detail == target.value:
                # a retry of a change whose cascade was stopped (its sidecar killed,
                # Redis gone): the walk is finished before the refusal is answered
                self._resume_cascade(namespace, memory_id)
            raise TransitionError(
                f"memory {memory_id!r} cannot go from {detail} to {target.value}",
                current=detail,
                requested=target.value,
            )
        children = out[3]
        root = decode(namespace, memory_id, pairs(out[1]), out[2], children, k.tag(namespace))
        affected: list[str] = []
        visited = 0
        if cascades:
            affected, visited = self._cascade(
                namespace,
                memory_id,
                memory_id,
                target.value,
                children,
                walk_reason,
                now,
            )
        return CascadeResult(
            root=root, marked=len(affected), visited=visited, affected=tuple(affected)
        )

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
        ``root``.  Returns the ids marked (BFS order) and how many were visited.

        A descendant whose version is damaged is marked all the same, its version left
        as it is (CASCADE_MARK), and logged at ERROR naming its key: every read of it
        answers DATA_LOSS until the version is mended, and then it is pending. A chunk
        meeting a key of another type writes nothing and stops the cascade:
        ``StoreCorruptError`` naming the key, saying what was kept."""
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
                try:
                    marked, kids, damaged = self._run("cascade_mark", keys, args, namespace)
                except StoreCorruptError as exc:  # the chunk wrote nothing; what came before stays
                    remedy = _cascade_stopped(start, len(affected))
                    raise StoreCorruptError(
                        exc.path, exc.problem, store="redis", remedy=remedy
                    ) from None
                affected.extend(marked)
                for d in damaged:
                    log.error(
                        "redis %s: the value of field 'V' (version) is missing or not an "
                        "integer; the cascade from %r marked it pending_verification and "
                        "left the version as it is (write it again as the store wrote it)",
                        self.keys.record(namespace, d),
                        root,
                    )
                for c in kids:
                    if c not in seen:
                        seen.add(c)
                        nxt.append(c)
            frontier = nxt
        with self._guard(self.keys.pending_cascades(namespace)):  # the walk is done
            self.client.hdel(self.keys.pending_cascades(namespace), start)
        return affected, len(seen) - 1

    def _resume_cascade(self, namespace: str, start: str) -> int:
        """Walk again the cascade noted for ``start`` (see ``ml:{ns}:pc``), if one is:
        marking is idempotent (a marked descendant is skipped, its children still
        walked), so a walk stopped half-way is finished and its note removed. Returns
        how many it marked."""
        key = self.keys.pending_cascades(namespace)
        with self._guard(key):
            note = cast("str | None", self.client.hget(key, start))
        if note is None:
            return 0
        parts = note.split(_US)
        if len(parts) != 4:
            raise StoreCorruptError(
                key, f"field {start!r} is not root, status, reason and time", store="redis"
            )
        root, root_status, reason, at = parts
        with self._guard(self.keys.derivations(namespace, start)):
            children = cast(
                "list[str]", self.client.lrange(self.keys.derivations(namespace, start), 0, -1)
            )
        affected, _ = self._cascade(
            namespace, start, root, root_status, children, reason, float(at)
        )
        if affected:
            log.warning(
                "redis: the cascade from %r in namespace %r had stopped half-way; "
                "resumed, %d more descendants marked",
                start,
                namespace,
                len(affected),
            )
        return len(affected)

    def finish_cascades(self, min_age: float = 0.0, now: float | None = None) -> int:
        """Resume every cascade noted at least ``min_age`` seconds ago and not finished
        (a sidecar killed, or Redis stopped, mid-walk); the store's maintenance, run by
        the sidecar at start and then periodically. Returns how many were resumed."""
        import time

        now = time.time() if now is None else now
        with self._guard(self.keys.namespaces()):
            spaces = sorted(cast("set[str]", self.client.smembers(self.keys.namespaces())))
        noted: list[tuple[str, dict[str, str]]] = []
        for first in range(0, len(spaces), 1000):  # one round trip per 1,000 namespaces
            part = spaces[first : first + 1000]
            pipe = self.client.pipeline(transaction=False)
            for ns in part:
                pipe.hgetall(self.keys.pending_cascades(ns))
            with self._guard(*(self.keys.pending_cascades(ns) for ns in part)):
                found = cast("list[dict[str, str]]", pipe.execute())
            noted += [(ns, notes) for ns, notes in zip(part, found, strict=True) if notes]
        resumed = 0
        for ns, notes in noted:
            for start, note in sorted(notes.items()):
                at = note.rsplit(_US, 1)[-1]
                try:
                    age = now - float(at)
                except ValueError:
                    age = min_age  # malformed: `_resume_cascade` names it
                if age < min_age:
                    continue
                try:
                    self._resume_cascade(ns, start)
                except StoreCorruptError as exc:  # that walk stays noted; the others go on
                    log.error("redis: the cascade from %r cannot be resumed: %s", start, exc)
                    continue
                resumed += 1
        return resumed

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
            with self._guard(k.epoch(namespace)):
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
            keys.append(k.pending_cascades(namespace))
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
            self._register(namespace)  # before a cascade's note, as `_set_status`
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
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
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
            records = [self.keys.record(namespace, node) for node in frontier]
            with self._guard(*records):
                pipe = self.client.pipeline(transaction=False)
                for key in records:
                    pipe.hmget(key, ["S", "d"])
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
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
            raise VersionConflictError(
                f"memory {memory_id!r} is at version {out[2]}, not {expected_version}",
                expected=expected_version,
                actual=int(out[2]),
            )
        return decode(namespace, memory_id, pairs(out[1]), out[2], out[3], k.tag(namespace))


def _cascade_stopped(start: str, marked: int) -> str:
    """The end of the ``StoreCorruptError`` of a cascade chunk: the change that started
    the cascade and the chunks before were written (one script each), this one not."""
    return (
        f"the change of {start!r} is kept, and so are the {marked} descendants the "
        "cascade marked before this chunk; it marked none of the others (mend the key, "
        "then set the descendants it did not reach to pending_verification)"
    )
