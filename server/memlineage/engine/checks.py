"""Check and FilterRank: decisions on stored memories, from one store read per
request or batch, reused while exact (`engine/reuse.py`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import DENY, Decision
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, Memory, MemoryFacts, Request, UnknownMemory
from memlineage_dsl.lineage_bound import Bound
from memlineage_dsl.schema import OPERATIONS

from memlineage.engine.batch_views import divergent
from memlineage.engine.context import EngineBase
from memlineage.engine.outcomes import (
    RankedCandidate,
    store_down,
)
from memlineage.engine.policies import ServingPolicies
from memlineage.engine.records import (
    DecisionContext,
    DecisionRecord,
    issue_decision_id,
    issue_decision_ids,
)
from memlineage.engine.reuse import (
    CLOSED,
    Reusable,
    ReuseKey,
    ReuseTicket,
    Window,
    lineage_ids,
    store_down_window,
)
from memlineage.engine.snapshot import StoreSnapshot, snapshot_of
from memlineage.lineage.errors import (
    StoreUnavailableError,
    ValidationError,
)
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.batch import Scores
from memlineage.scoring.formulas import rank_score


class Checks(EngineBase):
    """Check (one decision, with a reuse ticket) and FilterRank (one decision per
    candidate, ranked by `scoring.formulas.rank_score`)."""

    def check(
        self,
        ns: str,
        op: str,
        memory_ids: Sequence[str],
        actor: Creator,
        budget: float | None = None,
        action: str = "",
        historical: bool = False,
        time: float | None = None,
    ) -> DecisionRecord:
        return self.check_ticketed(ns, op, memory_ids, actor, budget, action, historical, time)[0]

    def check_ticketed(
        self,
        ns: str,
        op: str,
        memory_ids: Sequence[str],
        actor: Creator,
        budget: float | None = None,
        action: str = "",
        historical: bool = False,
        time: float | None = None,
        *,
        unanswered: StoreUnavailableError | None = None,
    ) -> tuple[DecisionRecord, ReuseTicket | None]:
        """`check`, plus a ticket when the decision is reusable: `reissue(ticket)`
        answers the same request again while the decision holds. `unanswered`: what the
        store answered a moment ago in this request (`reissue` raised it): the fail
        mode decides at once, the store is not asked again."""
        if op not in OPERATIONS:
            raise ValidationError(f"unknown operation {op!r}", field="operation")
        if not memory_ids:
            raise ValidationError("names no memory", field="memory_id")
        if op != "act" and len(memory_ids) != 1:
            raise ValidationError(f"{op} decides on exactly one memory", field="memory_ids")
        now = self._now(time)
        spend = self._budget(budget)
        serving = self.policies.current
        self._fresh_capture()
        ids = (memory_ids[0],) if len(memory_ids) == 1 else tuple(dict.fromkeys(memory_ids))
        # its counters: read before the store
        window = (
            self._window(serving, op, ns) if unanswered is None else store_down_window(unanswered)
        )
        key: ReuseKey = (ns, op, ids, actor.kind, actor.id, spend, action, historical)
        hit = window.lookup(key, now)
        if hit is not None:
            if hit.accessed and self.record_access:
                self.access.add(ns, ids, now)
            self.reuse.count()
            rec = self._issue(
                hit.decision, ns, op, ids, actor, now, serving.version, reused_input=hit.input
            )
            return rec, self._ticket(hit, serving, rec)
        try:
            if window.down is not None:  # asked once in this request: not again
                raise window.down
            reads = self._reads(serving.compiled, op)
            records, bound, scores, scored = self._view_scored(
                ns, ids, op, serving.compiled, reads, now, window.epoch
            )
        except StoreUnavailableError:
            if self.fail_mode != "degraded":
                raise
            return self._issue(store_down(op), ns, op, ids, actor, now, serving.version), None
        if not scored:
            scores = self._scores(ns, records, now, reads, epoch=window.epoch)
        snap, facts = snapshot_of(
            records, self.store, ns, now, scores=scores, reads=reads, bound=bound
        )
        self._bound(snap, window)
        memories: tuple[Memory, ...] = tuple(facts.get(i) or UnknownMemory(i, ns) for i in ids)
        req = Request(
            op,
            memories[0],
            actor,
            ns,
            spend,
            now,
            action,
            historical,
            memories=memories if op == "act" else (),
        )
        d = self._decide_safely(serving.compiled, req, snap, op)
        accessed = op == "read" and d.effect != DENY and ids[0] in records
        if accessed and self.record_access:
            self.access.add(ns, ids, now)
        rec = self._issue(d, ns, op, ids, actor, now, serving.version)
        # Only decisions on memories this namespace holds are kept: an id it does not
        # hold may be recorded at any time, which no stamp or counter of a memory covers.
        if not d.errors and all(i in records for i in ids):
            entry = window.keep(
                key, d, now, snap.horizon, accessed, tuple(records), snap.counted, rec.input
            )
            if entry is not None:
                return rec, self._ticket(entry, serving, rec)
        return rec, None

    def _window(self, serving: ServingPolicies, op: str, ns: str) -> Window:
        """The request's reuse window; closed while a shadow candidate is loaded, so
        that it compares every decision, as traffic weighs them (a decision reused
        from before the load was never compared: the diff table said 0 disagreed
        of traffic whose hottest request the candidate flips; an outside audit)."""
        if self.shadow.current is not None:
            return CLOSED
        return self.reuse.open(serving, op, ns)

    def _ticket(
        self, entry: Reusable, serving: ServingPolicies, rec: DecisionRecord
    ) -> ReuseTicket:
        return ReuseTicket(
            entry,
            serving,
            DecisionContext(
                rec.decision,
                rec.namespace,
                rec.operation,
                rec.memory_ids,
                rec.actor,
                rec.policy_version,
                rec.input,
            ),
            entry.accessed and self.record_access,
        )

    def reissue(self, ticket: ReuseTicket) -> tuple[str, float] | None:
        """The ticket's decision issued again now — a decision of its own (id, journal,
        log line, access, `reused`) — as `check` would for the same request; None
        once it no longer holds (a write, its horizon, a reload): ask `check`.
        StoreUnavailableError when the store did not answer: ask
        `check_ticketed(unanswered=error)`, which meets the fail mode at once."""
        if self.policies.current is not ticket.serving or self.shadow.current is not None:
            return None  # a reload, or a candidate to compare: decided afresh
        now = self.clock()
        if not self.reuse.still_holds(ticket, now):
            return None
        ctx = ticket.context
        if ticket.record_access:
            self.access.add(ctx.namespace, ctx.memory_ids, now)
        self.reuse.count()
        decision_id, serial = issue_decision_id(now)
        self.journal.put_issue(serial, ctx, now)
        if self.log.sink is not None:
            self.log.write(ctx.record(decision_id, now))
        return decision_id, now

    def filter_rank(
        self,
        ns: str,
        candidates: Sequence[tuple[str, float]],
        actor: Creator,
        *,
        budget: float | None = None,
        historical: bool = False,
        limit: int = 0,
        time: float | None = None,
    ) -> list[RankedCandidate]:
        """Decide `read` on every candidate from one lineage read; rank by
        `formulas.rank_score` (similarity x compliance x reliability and value terms x
        the down-rank factors); denied candidates are not kept."""
        if limit < 0:
            raise ValidationError("must be >= 0", field="limit")
        for i, (mid, sim) in enumerate(candidates):
            if not (math.isfinite(sim) and sim >= 0.0):
                # the rank multiplies it by its penalties: a negative one would rise
                raise ValidationError(
                    f"must be a finite number >= 0, got {sim!r} (a score in [-1, 1], as a "
                    "cosine similarity: clamp it at 0 or map it to (s + 1) / 2)",
                    field=f"candidates[{i}].similarity",
                )
            if not mid:
                raise ValidationError("must not be empty", field=f"candidates[{i}].memory_id")
        now = self._now(time)
        spend = self._budget(budget)
        serving = self.policies.current
        ids = list(dict.fromkeys(mid for mid, _ in candidates))
        window = self._window(serving, "read", ns)
        down = False
        try:
            if window.down is not None:  # the counters went unanswered: not asked again
                raise window.down
            records, bound = (
                self._view_whole(ns, ids, "read", serving.compiled) if ids else ({}, None)
            )
        except StoreUnavailableError:
            if self.fail_mode != "degraded":
                raise
            records, bound, down = {}, None, True
        reads = self._reads(serving.compiled, "read")
        scores = self._scores(ns, records, now, reads, rank=ids or ("",), epoch=window.epoch)
        assert scores is not None  # rank= always asks for values
        # the batch's facts, built for the first candidate that is not reused
        snap: StoreSnapshot | None = None
        facts: dict[str, MemoryFacts] = {}
        compiled, version = serving.compiled, serving.version
        # Candidates that another one's lineage touches are decided on their own view,
        # as a Check of each would be (`batch_views`); the others share the batch's.
        whole = bound is None or not bound[3]
        known = self._heights if whole and self.store.shares_records else None
        alone = divergent(records, ids, *self._depths("read", compiled), known)
        decision_ids, serials = issue_decision_ids(now, len(candidates))
        # One request object, re-pointed at each candidate (the evaluator keeps none).
        req = Request("read", UnknownMemory("", ns), actor, ns, spend, now, "", historical)
        issued: list[DecisionRecord] = []
        out: list[RankedCandidate] = []
        reliability_of, value_of = scores.reliability.get, scores.value.get
        downranks: dict[int, float] = {}  # per distinct decision: the product of its factors
        reusing = window.table is not None  # else no candidate is looked up nor kept
        # Records and candidates are built with tuple.__new__ (a NamedTuple's generated
        # __new__ costs ~3x as much; FilterRank makes one of each per candidate): the
        # fields given, then the defaults of the rest (`_RECORD_REST`, `_RANKED_REST`).
        scoring, who = self.scoring, actor.id
        new_tuple = tuple.__new__
        for (mid, sim), decision_id in zip(candidates, decision_ids, strict=True):
            ids1 = (mid,)
            view = alone.get(mid) if alone else None
            # a reuse key only where a decision is looked up or kept
            key = (ns, "read", ids1, actor.kind, who, spend, "", historical) if reusing else None
            if down:
                d = store_down("read")
            elif view is None:
                # (no call per candidate when nothing is reused: reuse off)
                reused = self._reused(window, key, now) if reusing else None
                if reused is not None:
                    d = reused
                else:
                    if snap is None:
                        snap, facts = self._facts(records, ns, now, scores, reads, window, bound)
                    d = self._evaluated(window, compiled, req, snap, facts, records, mid, key, now)
            else:
                # its own view holds its lineage as the batch's held it around it
                own = None if bound is None else ((mid,), bound[1], bound[2], bound[3])
                d, reliability, value = self._alone(window, compiled, req, view, own, mid, key, now)
            if view is None:
                reliability = reliability_of(mid, 1.0)
                value = value_of(mid, 1.0)
            downrank = downranks.get(id(d))
            if downrank is None:
                downrank = downranks[id(d)] = _downrank(d)
            rank = rank_score(scoring, sim, d.compliance_score, reliability, value, downrank)
            rec = new_tuple(
                DecisionRecord, (decision_id, d, ns, "read", ids1, who, now, version, *_RECORD_REST)
            )
            issued.append(rec)
            out.append(
                new_tuple(
                    RankedCandidate,
                    (mid, sim, rank, d.effect != DENY, rec, reliability, value, *_RANKED_REST),
                )
            )
        self.log.write_many(issued)
        self.journal.put_many(serials, issued)
        if limit:
            kept_now = [c for c in out if c.kept]
            if len(kept_now) > limit:
                keep = {id(c) for c in sorted(kept_now, key=_by_rank)[:limit]}
                # built whole, not `_replace`d: a namedtuple's _replace costs ~4x its new
                out = [
                    c
                    if id(c) in keep or not c.kept
                    else RankedCandidate(
                        c.memory_id,
                        c.similarity,
                        c.rank_score,
                        False,
                        c.decision,
                        c.reliability,
                        c.value_score,
                    )
                    for c in out
                ]
        kept = tuple(c.memory_id for c in out if c.kept and c.memory_id in records)
        if kept and self.record_access:
            self.access.add(ns, kept, now)
        return out

    def _alone(
        self,
        window: Window,
        compiled: CompiledPolicySet,
        req: Request,
        view: Mapping[str, MemoryRecord],
        bound: Bound | None,
        mid: str,
        key: ReuseKey | None,
        now: float,
    ) -> tuple[Decision, float, float]:
        """A candidate decided on its own view, as a Check of it alone (its scores and
        facts from those records only); with its reliability and value for the rank."""
        ns = req.namespace
        reads = self._reads(compiled, "read")
        scores = self._scores(ns, view, now, reads, rank=(mid,), epoch=window.epoch)
        assert scores is not None  # rank= always asks for values
        d = self._reused(window, key, now)
        if d is None:
            d = self._evaluated(
                window,
                compiled,
                req,
                *self._facts(view, ns, now, scores, reads, window, bound),
                view,
                mid,
                key,
                now,
            )
        return d, scores.reliability.get(mid, 1.0), scores.value.get(mid, 1.0)

    def _facts(
        self,
        records: Mapping[str, MemoryRecord],
        ns: str,
        now: float,
        scores: Scores,
        reads: frozenset[str],
        window: Window,
        bound: Bound | None,
    ) -> tuple[StoreSnapshot, dict[str, MemoryFacts]]:
        """The facts of a FilterRank's records and their snapshot, bounded for `window`:
        only once a candidate is evaluated (a batch of reused decisions needs none).
        `bound`: how far the records hold the lineage (`EngineBase._view`)."""
        snap, facts = snapshot_of(
            records, self.store, ns, now, scores=scores, reads=reads, bound=bound
        )
        self._bound(snap, window)
        return snap, facts

    def _reused(self, window: Window, key: ReuseKey | None, now: float) -> Decision | None:
        """A FilterRank candidate's kept decision, if it still holds. No `key`: the
        window is closed (reuse off), nothing to look up."""
        if key is None:
            return None
        hit = window.lookup(key, now)
        if hit is None:
            return None
        self.reuse.count()
        return hit.decision

    def _evaluated(
        self,
        window: Window,
        compiled: CompiledPolicySet,
        req: Request,
        snap: StoreSnapshot,
        facts: Mapping[str, Any],
        records: Mapping[str, MemoryRecord],
        mid: str,
        key: ReuseKey | None,
        now: float,
    ) -> Decision:
        """The read decision on one FilterRank candidate not reused: evaluated, and kept
        for reuse when it is exact for a memory this namespace holds (and `key` says
        the window is open)."""
        req.memory = facts.get(mid) or UnknownMemory(mid, req.namespace)
        snap.horizon = math.inf
        d = decide(compiled, req, snap)
        if d.errors:
            d = self._checked(d, "read", snap)
        if self.shadow.current is not None:
            self.shadow.observe("read", req, snap, d)
        if d.errors:
            return d
        if key is not None and mid in records and snap.horizon > now:
            read = (
                lineage_ids(records, mid, "descendants" in compiled.plans["read"].uses)
                if window.keeps_reads
                else ()
            )
            window.keep(key, d, now, snap.horizon, d.effect != DENY, read, snap.counted)
        return d


def _rest(cls: Any, given: int) -> tuple[Any, ...]:
    """The defaults of a named tuple's fields after the first `given`, in order (a
    field added there without a default fails here, at import, not in a request)."""
    return tuple(cls._field_defaults[f] for f in cls._fields[given:])


_RECORD_REST = _rest(DecisionRecord, 8)
_RANKED_REST = _rest(RankedCandidate, 7)


def _downrank(d: Decision) -> float:
    """The product of a decision's down-rank factors (1.0 without any)."""
    product = 1.0
    for o in d.obligations:
        if o.kind == "downrank" and o.args:
            product *= float(o.args[0])  # type: ignore[arg-type]  # the checker types downrank(number)
    return product


def _by_rank(c: RankedCandidate) -> float:
    """Best first; `sorted` is stable, so equal ranks keep the request order."""
    return -c.rank_score
