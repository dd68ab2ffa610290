"""Revising a memory on Redis: ``_revise`` as ONE REVISE script call (all keys of the
namespace share its hash tag: cluster-legal), and ``_versions``.

What the script cannot do itself is read ahead: the caller reads the memory (the
refusals that depend on the stored version: ``check_revisable``), checks for a cycle
against the namespace's graph epoch (a pipeline per ancestor level, as
``add_dependencies`` does) and reads the memory's descendants, which the cascade needs
in KEYS. The script then refuses when the version, the epoch or the descendants are
no longer what was read (VERSION: the caller's conflict; RETRY and CLOSURE: read again),
so a revision is written whole or not at all. The epoch only for a revision adding a
dependency: one adding none closes no cycle (before, other writers' revisions moving
the epoch starved it into UNAVAILABLE)."""

from __future__ import annotations

import json
from typing import cast

from memlineage.lineage.errors import (
    NotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
    UnknownDependencyError,
    VersionConflictError,
)
from memlineage.lineage.model import CASCADE_MARKS, TAINTED, MemoryRecord
from memlineage.store.redis_codec import (
    FIELDS,
    JOINED,
    RECORD_REMEDY,
    decode_flat,
    encode_field,
    spaced,
)
from memlineage.store.redis_record import RedisRecord
from memlineage.store.revisions import (
    REVISED_FIELDS,
    RevisionOutcome,
    check_revisable,
    cycle_error,
    find_cycle,
    revision_reason,
)

_RETRIES = 32


class RedisRevise(RedisRecord):
    """``_revise`` (REVISE script) and ``_versions`` (the versions list); over
    ``RedisRecord`` for its descendant closure."""

    def _revise(self, rec: MemoryRecord, expected_version: int, now: float) -> RevisionOutcome:
        ns, memory_id, k = rec.namespace, rec.id, self.keys
        deps = list(cast("tuple[str, ...]", rec.dependencies))  # validate_new: plain ids
        for _ in range(_RETRIES):
            with self._guard(k.epoch(ns)):
                epoch = cast("str | None", self.client.get(k.epoch(ns))) or ""
            stored = self._load(ns, [memory_id], False).get(memory_id)
            if stored is None:
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
            check_revisable(stored, rec, expected_version)
            before = cast("tuple[str, ...]", stored.dependencies)
            added = [d for d in deps if d not in before]
            removed = [d for d in before if d not in deps]
            cycle = find_cycle(self._load, ns, memory_id, added)
            if cycle is not None:
                index, path = cycle
                raise cycle_error(deps.index(added[index]), path)
            sets: list[str] = []
            dels: list[str] = []
            for name in REVISED_FIELDS:
                value = getattr(rec, name)
                if value is None or (name in JOINED and not value):
                    dels.append(FIELDS[name])
                else:
                    sets += (FIELDS[name], encode_field(name, value))
            if rec.value != stored.value or rec.creator_id != stored.creator_id:
                dels += (FIELDS["confirmed_by"], FIELDS["contradicted_by"])
            closure = self._closure(ns, [memory_id], {memory_id})
            head = [
                k.record(ns, memory_id),
                k.history(ns, memory_id),
                k.derivations(ns, memory_id),
                k.epoch(ns),
                k.events(ns),
                k.review(ns),
                k.versions(ns, memory_id),
                *(k.record(ns, d) for d in deps),
                *(k.derivations(ns, d) for d in added),
                *(k.derivations(ns, d) for d in removed),
            ]
            for _ in range(_RETRIES):
                args = [
                    memory_id,
                    str(expected_version),
                    epoch if added else "*",  # no edge added: no cycle, whatever moved
                    len(deps),
                    len(added),
                    len(removed),
                    len(closure),
                    repr(now),
                    self.limits.history_length,
                    self._retention,
                    spaced(TAINTED),
                    spaced(CASCADE_MARKS),
                    revision_reason(expected_version),
                    f"revised: version {expected_version} replaced",
                    repr(now + self.limits.first_review_seconds),
                    " ".join(dels),
                    len(sets),
                    *sets,
                    *deps,
                    *closure,
                ]
                out = self._run("revise", head + k.triples(ns, closure), args, ns)
                if out[0] != 0 or out[1] != "CLOSURE":
                    break
                known = {memory_id, *closure}
                closure += self._closure(ns, out[2], known, start=True)
            else:
                raise StoreUnavailableError("the memory's descendants kept changing; retry later")
            if out[0] == 1:
                return RevisionOutcome(
                    self._load(ns, [memory_id])[memory_id], expected_version, tuple(out[3])
                )
            code = out[1]
            if code == "RETRY":
                continue  # an edge was added or moved since the cycle check: check again
            if code == "NOTFOUND":
                raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
            if code == "VERSION":
                raise VersionConflictError(
                    f"memory {memory_id!r} is at version {out[2]}, not {expected_version}",
                    expected=expected_version,
                    actual=int(out[2]),
                    field="expected_version",
                )
            i = int(out[2])
            raise UnknownDependencyError(
                f"no memory {deps[i]!r} in this namespace", field=f"dependencies[{i}]"
            )
        raise StoreUnavailableError("the namespace graph kept changing; retry later")

    def _versions(self, namespace: str, memory_id: str) -> list[MemoryRecord]:
        """The earlier versions, each entry of ``ml:{ns}:vs:<id>`` a record hash as JSON
        (REVISE's cjson.encode of HGETALL); an entry that is not is
        ``StoreCorruptError`` naming that key, the entry and the field."""
        key = self.keys.versions(namespace, memory_id)
        with self._guard(key):
            kept = cast("list[str]", self.client.lrange(key, 0, -1))
        out: list[MemoryRecord] = []
        for i, text in enumerate(kept):
            try:
                flat = json.loads(text)
                if not isinstance(flat, list) or not all(isinstance(x, str) for x in flat):
                    raise ValueError("not a JSON list of strings")
                out.append(decode_flat(namespace, memory_id, flat, (), []))
            except StoreCorruptError as exc:  # named the memory: name the entry
                raise StoreCorruptError(
                    key, f"entry {i}: {exc.problem}", store="redis", remedy=RECORD_REMEDY
                ) from None
            except (ValueError, RecursionError) as exc:
                raise StoreCorruptError(
                    key,
                    f"entry {i} is not a record hash as JSON ({exc})",
                    store="redis",
                    remedy=RECORD_REMEDY,
                ) from None
        return out
