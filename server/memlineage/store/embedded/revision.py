"""The embedded store's revision (``_revise``): every check under the lock, then ONE
op ("V", one SQLite transaction) applied by ``State.apply_revise``, so a killed
process leaves the revision whole or absent. A mixin of ``EmbeddedStore``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from memlineage.lineage.errors import UnknownDependencyError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.base import LineageStore
from memlineage.store.embedded.row import Row
from memlineage.store.embedded.space import Space
from memlineage.store.embedded.state import State
from memlineage.store.revisions import (
    REVISED_FIELDS,
    RevisionOutcome,
    check_revisable,
    cycle_error,
    find_cycle,
)


class RevisionMixin(LineageStore):
    """``_revise`` and ``_versions``; the attributes are ``EmbeddedStore``'s."""

    _lock: threading.RLock
    _state: State
    _spaces: dict[str, Space]

    if TYPE_CHECKING:

        def _append(self, op: dict[str, Any]) -> None: ...

        def _get_row(self, ns: str, memory_id: str) -> Row: ...

    def _revise(self, rec: MemoryRecord, expected_version: int, now: float) -> RevisionOutcome:
        ns, memory_id = rec.namespace, rec.id
        with self._lock:
            row = self._get_row(ns, memory_id)
            check_revisable(row.record(), rec, expected_version)
            rows = self._spaces[ns].rows
            deps = cast("tuple[str, ...]", rec.dependencies)  # validate_new: plain ids
            for i, dep in enumerate(deps):
                if dep not in rows:
                    raise UnknownDependencyError(
                        f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                    )
            added = [d for d in deps if d not in row.dependencies]
            cycle = find_cycle(self._load, ns, memory_id, added)
            if cycle is not None:
                index, path = cycle
                raise cycle_error(deps.index(added[index]), path)
            new = {f: getattr(rec, f) for f in REVISED_FIELDS}
            new["tags"], new["dependencies"] = list(rec.tags), list(deps)
            review_at = now + self.limits.first_review_seconds
            self._append({"o": "V", "n": ns, "i": memory_id, "r": new, "a": now, "v": review_at})
            affected = self._state.apply_revise(ns, memory_id, new, now, review_at)
            return RevisionOutcome(row.record(), expected_version, tuple(affected))

    def _versions(self, namespace: str, memory_id: str) -> list[MemoryRecord]:
        with self._lock:
            sp = self._spaces.get(namespace)
            kept = sp.versions.get(memory_id, []) if sp is not None else []
            return [Row.from_json(k).record() for k in kept]
