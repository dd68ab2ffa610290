"""The decision engine: one store read per request or batch, then pure evaluation.

Semantics a caller relies on (README "Decisions"):
- `Check(op, id)` decides on the stored memory `id` of the caller's namespace;
  ids are scoped to their namespace, so an id it holds no record of has unknown
  provenance whatever other namespaces hold (nothing reveals what they hold);
- `Record` decides `write` (or `derive`, when it has dependencies) on the
  proposed memory, records it only if not denied, and supersedes the current
  memory of the same claim when the value changed;
- `UpdateStatus` decides `update` on the memory before revoking, superseding or
  confirming it;
- store unavailable: fail closed (raise `StoreUnavailableError`, UNAVAILABLE)
  or, with `fail_mode="degraded"`, decide Check and FilterRank without it: reads
  DEGRADE, every other operation DENY (the rest still raises).
"""

from __future__ import annotations

import fnmatch

from memlineage.engine.acts import Acts
from memlineage.engine.checks import Checks
from memlineage.engine.decision_store import record_of
from memlineage.engine.outcomes import (
    Explanation,
)
from memlineage.engine.records import (
    DecisionRecord,
)
from memlineage.engine.revisions import Revisions
from memlineage.engine.shadow import ShadowControl
from memlineage.engine.voice import Voice
from memlineage.engine.writes import Writes
from memlineage.lifecycle.sweep import SweepReport, sweep
from memlineage.lineage.errors import (
    ValidationError,
)
from memlineage.lineage.model import Walk
from memlineage.scoring.batch import credibilities, score, sources_of


class Engine(Checks, Writes, Revisions, Acts, ShadowControl, Voice):
    """The decision engine: Check and FilterRank (`checks`), Record, UpdateStatus and
    Feedback (`writes`), Revise (`revisions`), the governance sweep and Explain (here),
    over the parts and helpers of `context.EngineBase`."""

    # ------------------------------------------------------------ lifecycle
    def sweep(
        self, namespace: str | None = None, *, batch: int = 1000, time: float | None = None
    ) -> SweepReport:
        """One governance pass (a batch per namespace); see memlineage.lifecycle.sweep."""
        if batch < 1 or batch > 10_000:
            raise ValidationError("must be between 1 and 10000", field="batch")
        self.flush_access()
        return sweep(self.store, self.scoring, self._now(time), namespace=namespace, batch=batch)

    # ------------------------------------------------------------ explain
    def explain(
        self,
        ns: str,
        memory_id: str,
        *,
        ancestor_depth: int = 8,
        descendant_depth: int = 8,
        decisions: int = 20,
    ) -> Explanation:
        self._flush_access_quietly()
        self._flush_decisions_quietly()
        memory = self.store.get(ns, memory_id)
        up: Walk = self.store.ancestors(ns, memory_id, max_depth=ancestor_depth)
        down: Walk = self.store.descendants(ns, memory_id, max_depth=descendant_depth)
        nodes = {memory.id: memory, **{r.id: r for r in up.records + down.records}}
        edges = tuple(
            (str(getattr(dep, "id", dep)), r.id)
            for r in nodes.values()
            for dep in r.dependencies
            if str(getattr(dep, "id", dep)) in nodes
        )
        now = self.clock()
        stats = self.credibility.stats(ns, sources_of(nodes))
        proposal = self.store.proposal(ns, memory_id)
        return Explanation(
            memory,
            up.records,
            down.records,
            edges,
            self._recent_decisions(ns, memory_id, decisions),
            up.truncated or down.truncated,
            score(self.scoring, nodes, credibilities(self.scoring, stats), now),
            stats,
            tuple(
                g
                for g in self.store.grants(ns)
                if g.memory_id == memory.id
                or (g.source and fnmatch.fnmatchcase(memory.creator_id, g.source))
            ),
            now,
            self.store.versions(ns, memory_id),
            proposal,
            self.objections_left(proposal) if proposal is not None else 0,
        )

    def _recent_decisions(self, ns: str, memory_id: str, limit: int) -> tuple[DecisionRecord, ...]:
        """The journal's and the store's (any sidecar's, from before a restart) newest
        decisions on `memory_id`, each once, newest first."""
        recent = self.journal.recent(ns, memory_id, limit)
        if self.store.keeps_decisions and limit > 0:
            seen = {r.decision_id for r in recent}
            for kept in self.store.kept_decisions(ns, memory_id, limit):
                rec = record_of(kept) if kept.decision_id not in seen else None
                if rec is not None and rec.namespace == ns:
                    seen.add(rec.decision_id)
                    recent.append(rec)
            recent.sort(key=lambda r: r.decided_at, reverse=True)  # stable: ties keep order
        return tuple(recent[:limit])
