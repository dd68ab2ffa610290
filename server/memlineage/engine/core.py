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
  or, with `fail_mode="degraded"`, answer reads DEGRADE and everything else DENY.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import ALLOW, DENY, FIRED, Decision, Reason
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import DEFAULT_BUDGET, Creator, Memory, Request, UnknownMemory
from memlineage_dsl.schema import OPERATIONS

from memlineage.engine.access import AccessBuffer
from memlineage.engine.credibility import CredibilityCache
from memlineage.engine.decision_store import DecisionKeeper, record_of
from memlineage.engine.outcomes import (
    Explanation,
    RankedCandidate,
    RecordResult,
    StatusResult,
    store_down,
)
from memlineage.engine.policies import PolicyHolder, ServingPolicies
from memlineage.engine.records import (
    DecisionContext,
    DecisionJournal,
    DecisionLog,
    DecisionRecord,
    issue_decision_id,
    issue_decision_ids,
)
from memlineage.engine.reuse import (
    DecisionReuse,
    NoReuse,
    Reusable,
    ReuseKey,
    ReuseTicket,
    Window,
    lineage_ids,
)
from memlineage.engine.snapshot import StoreSnapshot, calls_counter, snapshot_of, to_facts
from memlineage.lifecycle.sweep import SweepReport, sweep
from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.errors import (
    NotFoundError,
    StoreUnavailableError,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.model import MemoryRecord, Status, Walk
from memlineage.lineage.validation import check_transition, validate_new
from memlineage.scoring.batch import Scores, credibilities, score, sources_of
from memlineage.scoring.config import ScoringConfig
from memlineage.scoring.formulas import rank_score
from memlineage.store.base import ClaimMovedError, LineageStore, record_digest


@dataclass
class Engine:
    store: LineageStore
    policies: PolicyHolder
    clock: Clock = system_clock
    log: DecisionLog = field(default_factory=lambda: DecisionLog(None))
    journal: DecisionJournal = field(default_factory=DecisionJournal)
    fail_mode: str = "closed"  # closed | degraded
    lineage_depth: int = 16
    record_access: bool = True
    max_future_seconds: float = 300.0
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    # None: built from the store and scoring in __post_init__
    credibility: CredibilityCache = None  # type: ignore[assignment]  # set in __post_init__
    # Reuse a Check decision for the same request until the store is written or its
    # horizon passes (stores that count their writes: `LineageStore.epochs`).
    reuse_decisions: bool = True
    access: AccessBuffer = None  # type: ignore[assignment]  # set in __post_init__
    reuse: DecisionReuse = field(init=False, repr=False)
    # The journal's decisions written to the store in batches (engine/decision_store.py)
    decisions: DecisionKeeper = field(init=False, repr=False)
    # score() memo for records the store shares (see scoring.batch.score)
    _memo: dict[int, Any] = field(default_factory=dict, init=False, repr=False)
    _memo_for: ScoringConfig | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.credibility is None:
            self.credibility = CredibilityCache(self.store, self.scoring)
        if self.access is None:
            self.access = AccessBuffer(self.store)
        self.reuse = DecisionReuse(self.store) if self.reuse_decisions else NoReuse(self.store)
        self.decisions = DecisionKeeper(self.store, self.journal)

    @property
    def reused(self) -> int:
        """How many decisions were answered by reuse so far."""
        return self.reuse.reused

    def flush_access(self) -> int:
        return self.access.flush()

    def flush_decisions(self) -> int:
        """Write the decisions queued for the store (StoreUnavailableError: retried)."""
        return self.decisions.flush()

    def _flush_decisions_quietly(self) -> None:
        """Before Explain and Feedback: a store that refuses fails the request itself."""
        with contextlib.suppress(StoreUnavailableError):
            self.decisions.flush()

    def _scores(
        self,
        ns: str,
        records: Mapping[str, MemoryRecord],
        now: float,
        reads: frozenset[str] | None = None,
        rank: Sequence[str] = (),
        epoch: int | None = None,
    ) -> Scores | None:
        """Reliability and value of the loaded records in one vectorised pass — only
        what the operation's policies read (`reads`), plus the value of `rank`ed ids.
        `epoch`: the namespace's write counter read before the records (credibility
        is then exact for it, see CredibilityCache)."""
        reads = reads or frozenset()
        value: bool | Sequence[str] = True if "value_score" in reads else rank
        if not value and "reliability" not in reads and not rank:
            return None
        cred = self.credibility.credibility(ns, sources_of(records), epoch)
        memo = None
        if self.store.shares_records:
            # per config: a memo made for another ScoringConfig is dropped
            if self._memo_for is not self.scoring:
                self._memo_for, self._memo = self.scoring, {}
            memo = self._memo
        return score(self.scoring, records, cred, now, value=value or False, memo=memo)

    # ------------------------------------------------------------ helpers
    def _now(self, at: float | None) -> float:
        now = self.clock()
        if at is None:
            return now
        if not math.isfinite(at) or at > now + self.max_future_seconds:
            raise ValidationError("is too far in the future or not a number", field="time")
        return at

    @staticmethod
    def _budget(budget: float | None) -> float:
        if budget is None:
            return DEFAULT_BUDGET
        if math.isnan(budget) or budget < 0:
            raise ValidationError("must be a non-negative number", field="budget")
        return budget

    def _issue(
        self,
        d: Decision,
        ns: str,
        op: str,
        ids: tuple[str, ...],
        actor: Creator,
        now: float,
        version: str,
    ) -> DecisionRecord:
        decision_id, serial = issue_decision_id(now)
        rec = DecisionRecord(decision_id, d, ns, op, ids, actor.id, now, version)
        if self.log.sink is not None:
            self.log.write(rec)
        self.journal.put(serial, rec)
        return rec

    def _view(
        self,
        ns: str,
        ids: Sequence[str],
        op: str,
        compiled: CompiledPolicySet,
        loaded: Mapping[str, MemoryRecord] | None = None,
    ) -> dict[str, MemoryRecord]:
        """The records `ids` and the lineage the operation needs, in one store read;
        none when the caller already `loaded` them and no lineage is needed."""
        uses = compiled.plans[op].uses
        # Reliability is capped by the chain a memory rests on: reads, actions and
        # derivations load the ancestors even when no rule walks them.
        chain = op in ("read", "act", "derive") or bool(uses & {"ancestors", "lineage"})
        up = self.lineage_depth if chain else 0
        down = self.lineage_depth if "descendants" in uses else 0
        if not up and not down:
            if loaded is not None and all(i in loaded for i in ids):
                return {i: loaded[i] for i in ids}
            return self.store.get_many(ns, ids)
        return self.store.lineage_view(ns, ids, ancestor_depth=up, descendant_depth=down).records

    # ------------------------------------------------------------ decisions
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
    ) -> tuple[DecisionRecord, ReuseTicket | None]:
        """`check`, plus a ticket when the decision is reusable: `reissue(ticket)`
        answers the same request again while the decision holds."""
        if op not in OPERATIONS:
            raise ValidationError(f"unknown operation {op!r}", field="operation")
        if not memory_ids:
            raise ValidationError("names no memory", field="memory_id")
        if op != "act" and len(memory_ids) != 1:
            raise ValidationError(f"{op} decides on exactly one memory", field="memory_ids")
        now = self._now(time)
        spend = self._budget(budget)
        serving = self.policies.current
        ids = (memory_ids[0],) if len(memory_ids) == 1 else tuple(dict.fromkeys(memory_ids))
        window = self.reuse.open(serving, op, ns)  # its counters: read before the store
        key: ReuseKey = (ns, op, ids, actor.kind, actor.id, spend, action, historical)
        hit = window.lookup(key, now)
        if hit is not None:
            if hit.accessed and self.record_access:
                self.access.add(ns, ids, now)
            self.reuse.count()
            rec = self._issue(hit.decision, ns, op, ids, actor, now, serving.version)
            return rec, self._ticket(hit, serving, rec)
        try:
            records = self._view(ns, ids, op, serving.compiled)
        except StoreUnavailableError:
            if self.fail_mode != "degraded":
                raise
            return self._issue(store_down(op), ns, op, ids, actor, now, serving.version), None
        reads = serving.compiled.plans[op].reads
        snap, facts = snapshot_of(
            records,
            self.store,
            ns,
            now,
            scores=self._scores(ns, records, now, reads, epoch=window.epoch),
            reads=reads,
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
            entry = window.keep(key, d, now, snap.horizon, accessed, tuple(records), snap.counted)
            if entry is not None:
                return rec, self._ticket(entry, serving, rec)
        return rec, None

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
            ),
            entry.accessed and self.record_access,
        )

    def reissue(self, ticket: ReuseTicket) -> tuple[str, float] | None:
        """The ticket's decision issued again now — a decision of its own (id, journal,
        log line, access, `reused`) — as `check` would for the same request; None
        once it no longer holds (a write, its horizon, a reload): ask `check`."""
        if self.policies.current is not ticket.serving:
            return None
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

    def _bound(self, snap: StoreSnapshot, window: Window | None = None) -> None:
        """How fast this configuration's scores can fall: the snapshot's horizons, worked
        out only when the decision may be kept (an open reuse `window`)."""
        snap.half_life_min = self.scoring.min_half_life
        snap.value_decay = (self.scoring.beta, self.scoring.relevance_lambda)
        snap.timed = window is not None and window.table is not None

    def _decide_safely(
        self, compiled: CompiledPolicySet, req: Request, snap: StoreSnapshot, op: str
    ) -> Decision:
        """Counters are read lazily from the store during evaluation: honour fail mode."""
        d = decide(compiled, req, snap)
        return self._checked(d, op, snap) if d.errors else d

    def _checked(self, d: Decision, op: str, snap: StoreSnapshot) -> Decision:
        """`d` unless a rule failed because the store was unavailable."""
        if d.errors and snap.store_failed:
            if self.fail_mode != "degraded":
                raise StoreUnavailableError("lineage store unavailable during evaluation")
            return store_down(op)
        return d

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
            if not math.isfinite(sim):
                raise ValidationError(
                    "must be a finite number", field=f"candidates[{i}].similarity"
                )
            if not mid:
                raise ValidationError("must not be empty", field=f"candidates[{i}].memory_id")
        now = self._now(time)
        spend = self._budget(budget)
        serving = self.policies.current
        ids = list(dict.fromkeys(mid for mid, _ in candidates))
        window = self.reuse.open(serving, "read", ns)
        down = False
        try:
            records = self._view(ns, ids, "read", serving.compiled) if ids else {}
        except StoreUnavailableError:
            if self.fail_mode != "degraded":
                raise
            records, down = {}, True
        reads = serving.compiled.plans["read"].reads
        scores = self._scores(ns, records, now, reads, rank=ids or ("",), epoch=window.epoch)
        assert scores is not None  # rank= always asks for values
        snap, facts = snapshot_of(records, self.store, ns, now, scores=scores, reads=reads)
        self._bound(snap, window)
        compiled, version = serving.compiled, serving.version
        decision_ids, serials = issue_decision_ids(now, len(candidates))
        # One request object, re-pointed at each candidate (the evaluator keeps none).
        req = Request("read", UnknownMemory("", ns), actor, ns, spend, now, "", historical)
        issued: list[DecisionRecord] = []
        out: list[RankedCandidate] = []
        reliability_of, value_of = scores.reliability.get, scores.value.get
        downranks: dict[int, float] = {}  # per distinct decision: the product of its factors
        for (mid, sim), decision_id in zip(candidates, decision_ids, strict=True):
            if down:
                d = store_down("read")
            else:
                d = self._candidate(
                    window,
                    compiled,
                    req,
                    snap,
                    facts,
                    records,
                    mid,
                    (ns, "read", (mid,), actor.kind, actor.id, spend, "", historical),
                    now,
                )
            reliability = reliability_of(mid, 1.0)
            value = value_of(mid, 1.0)
            downrank = downranks.get(id(d))
            if downrank is None:
                downrank = downranks[id(d)] = _downrank(d)
            rank = rank_score(self.scoring, sim, d.compliance_score, reliability, value, downrank)
            rec = DecisionRecord(decision_id, d, ns, "read", (mid,), actor.id, now, version)
            issued.append(rec)
            out.append(RankedCandidate(mid, sim, rank, d.effect != DENY, rec, reliability, value))
        self.log.write_many(issued)
        self.journal.put_many(serials, issued)
        if limit:
            keep = {
                id(c)
                for c in sorted((c for c in out if c.kept), key=lambda c: -c.rank_score)[:limit]
            }
            out = [c if id(c) in keep or not c.kept else replace(c, kept=False) for c in out]
        kept = tuple(c.memory_id for c in out if c.kept and c.memory_id in records)
        if kept and self.record_access:
            self.access.add(ns, kept, now)
        return out

    def _candidate(
        self,
        window: Window,
        compiled: CompiledPolicySet,
        req: Request,
        snap: StoreSnapshot,
        facts: Mapping[str, Any],
        records: Mapping[str, MemoryRecord],
        mid: str,
        key: ReuseKey,
        now: float,
    ) -> Decision:
        """The read decision on one FilterRank candidate: reused, or evaluated (and kept
        for reuse when it is exact for a memory this namespace holds)."""
        hit = window.lookup(key, now)
        if hit is not None:
            self.reuse.count()
            return hit.decision
        req.memory = facts.get(mid) or UnknownMemory(mid, req.namespace)
        snap.horizon = math.inf
        d = decide(compiled, req, snap)
        if d.errors:
            return self._checked(d, "read", snap)
        if mid in records:
            window.keep(
                key,
                d,
                now,
                snap.horizon,
                d.effect != DENY,
                lineage_ids(records, mid, "descendants" in compiled.plans["read"].uses),
                snap.counted,
            )
        return d

    # ------------------------------------------------------------ writes
    def record(
        self,
        proposed: MemoryRecord,
        actor: Creator | None = None,
        *,
        budget: float | None = None,
        time: float | None = None,
    ) -> RecordResult:
        """Validate fully, decide, then write. The decision is logged only when it is
        final: a DENY, or a write that the store accepted (never for a refused input)."""
        ns = proposed.namespace
        now = self._now(time)
        spend = self._budget(budget)
        # What the caller proposed, for an identical retry: created_at only if it set it.
        explicit_time = proposed.created_at is not None
        if not explicit_time:
            proposed = replace(proposed, created_at=now)
        proposed = validate_new(proposed, now=now, limits=self.store.limits)
        digest = record_digest(proposed, with_created_at=explicit_time)
        actor = actor or Creator(proposed.creator_kind, proposed.creator_id)
        op = "derive" if proposed.dependencies else "write"
        serving = self.policies.current
        deps = [str(getattr(d, "id", d)) for d in proposed.dependencies]
        # A concurrent Record of the same claim may move its holder between the read and
        # the write: the store then writes nothing (ClaimMovedError) and we decide again.
        for attempt in range(8):
            # One read: the id (must be new) and the dependencies with their lineage.
            records = self._view(ns, [proposed.id, *deps], op, serving.compiled)
            if proposed.id in records:
                # Recorded already: an identical retry answers the first outcome (nothing
                # is decided or written again); another memory is AlreadyExistsError.
                outcome = self.store.record_claim(proposed, now=now, digest=digest)
                replay = Decision(
                    ALLOW,
                    1.0,
                    0.0,
                    reasons=(
                        Reason(
                            "<replayed>",
                            ALLOW,
                            "an identical Record of this memory was applied already: its outcome",
                            0,
                            FIRED,
                        ),
                    ),
                )
                return RecordResult(
                    True,
                    self._issue(replay, ns, op, (proposed.id,), actor, now, serving.version),
                    outcome.memory,
                    outcome.superseded_id,
                    outcome.affected,
                )
            for i, dep in enumerate(deps):
                if dep not in records:
                    raise UnknownDependencyError(
                        f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                    )
            current = (
                self.store.current_claim(ns, proposed.subject, proposed.attribute)
                if proposed.subject and proposed.attribute
                else None
            )
            if current is not None:
                records = {**records, current.id: current}
            mine = to_facts(proposed, now)
            reads = serving.compiled.plans[op].reads
            scores = self._scores(ns, {**records, proposed.id: proposed}, now, reads)
            snap, facts = snapshot_of(
                records, self.store, ns, now, extra=[mine], scores=scores, reads=reads
            )
            target = facts[current.id] if current is not None else mine
            req = Request(op, mine, actor, ns, spend, now, target=target)
            d = self._decide_safely(serving.compiled, req, snap, op)
            if d.effect == DENY:
                return RecordResult(
                    False, self._issue(d, ns, op, (proposed.id,), actor, now, serving.version)
                )
            supersede = (
                current.id
                if current is not None
                and current.value != proposed.value
                and _supersedes(proposed, current)
                else None
            )
            # One atomic store step: the record, its claim-group comparison, the
            # supersession with its cascade, the rate counter (and the write counters).
            try:
                outcome = self.store.record_claim(
                    proposed,
                    now=now,
                    digest=digest,
                    holder=current.id if current is not None else None,
                    supersede=supersede,
                    count=calls_counter(proposed.creator_id),
                )
            except ClaimMovedError:
                if attempt == 7:
                    raise
                continue
            if outcome.memory.claim is not None and not outcome.replayed:
                self.credibility.invalidate_namespace(ns)
            rec = self._issue(d, ns, op, (proposed.id,), actor, now, serving.version)
            return RecordResult(True, rec, outcome.memory, outcome.superseded_id, outcome.affected)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def update_status(
        self,
        ns: str,
        memory_id: str,
        action: str,
        actor: Creator,
        *,
        successor: str | None = None,
        reason: str = "",
        expected_version: int | None = None,
        time: float | None = None,
    ) -> StatusResult:
        """Check existence, version and transition first, then decide, then apply; the
        decision is logged once it is final (a DENY, or the change applied)."""
        target = {
            "revoke": Status.REVOKED,
            "supersede": Status.SUPERSEDED,
            "confirm": Status.ACTIVE,
            "compress": Status.COMPRESSED,
        }.get(action)
        if target is None:
            raise ValidationError(f"unknown status action {action!r}", field="action")
        if action in ("supersede", "compress") and not successor:
            raise ValidationError(f"is required to {action}", field="successor_id")
        found = self.store.get_many(ns, [memory_id, *([successor] if successor else [])])
        current = found.get(memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id!r} not found", field="memory_id")
        if successor and successor not in found:
            raise NotFoundError(f"memory {successor!r} not found", field="successor_id")
        if action == "compress" and memory_id not in _dependency_ids(found[successor or ""]):
            raise ValidationError(
                f"summary {successor!r} must depend on {memory_id!r}", field="successor_id"
            )
        if expected_version is not None and current.version != expected_version:
            raise VersionConflictError(
                f"memory {memory_id!r} is at version {current.version}, not {expected_version}",
                field="expected_version",
                expected=expected_version,
                actual=current.version,
            )
        if action == "confirm" and current.status != Status.PENDING_VERIFICATION:
            raise TransitionError(
                f"memory {memory_id!r} is {current.status}, only "
                "pending_verification can be confirmed",
                current=current.status,
                requested="active",
            )
        check_transition(current.status, target, memory_id)
        now = self._now(time)
        serving = self.policies.current
        records = self._view(ns, [memory_id], "update", serving.compiled, loaded=found)
        reads = serving.compiled.plans["update"].reads
        snap, facts = snapshot_of(
            records, self.store, ns, now, scores=self._scores(ns, records, now, reads), reads=reads
        )
        memory = facts.get(memory_id) or UnknownMemory(memory_id, ns)
        d = self._decide_safely(
            serving.compiled,
            Request("update", memory, actor, ns, DEFAULT_BUDGET, now),
            snap,
            "update",
        )
        if d.effect == DENY:
            return StatusResult(
                False, self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
            )
        if action == "confirm":
            stored = self.store.confirm(
                ns,
                memory_id,
                reason=reason or "confirmed",
                expected_version=expected_version,
                now=now,
            )
            rec = self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
            return StatusResult(True, rec, stored)
        if action == "compress":
            result = self.store.set_status(
                ns,
                memory_id,
                Status.COMPRESSED,
                reason=reason or f"compressed into {successor}",
                expected_version=expected_version,
                now=now,
            )
        elif action == "revoke":
            result = self.store.revoke(
                ns, memory_id, reason=reason, expected_version=expected_version, now=now
            )
        else:
            result = self.store.supersede(
                ns,
                memory_id,
                successor or "",
                reason=reason,
                expected_version=expected_version,
                now=now,
            )
        rec = self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
        return StatusResult(True, rec, result.root, tuple(result.affected))

    def feedback(
        self,
        ns: str,
        decision_id: str,
        memory_ids: Sequence[str],
        success: bool,
        *,
        time: float | None = None,
    ) -> int:
        """A use that succeeded or failed: moves the memories' accuracy (uses_ok /
        uses_failed) and their sources' credibility."""
        now = self._now(time)
        ids = list(dict.fromkeys(memory_ids))
        known = self.journal.get(decision_id) if decision_id else None
        if known is None and decision_id and not ids:
            # Another sidecar's, or one from before a restart: the store's copy (found
            # only in the caller's namespace; with memory ids given, none is needed).
            self._flush_decisions_quietly()
            kept = self.store.kept_decision(ns, decision_id)
            known = record_of(kept) if kept is not None else None
        if known is not None:
            if known.namespace != ns:
                raise NotFoundError(f"decision {decision_id!r} not found", field="decision_id")
            ids = ids or list(known.memory_ids)
        if not ids:
            raise ValidationError("names no memory", field="memory_ids")
        records = self.store.get_many(ns, ids)
        updated = self.store.feedback(ns, list(records), success, now=now) if records else 0
        self.credibility.invalidate(ns, {r.creator_id for r in records.values()})
        return updated

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
        self.flush_access()
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
        return Explanation(
            memory,
            up.records,
            down.records,
            edges,
            self._recent_decisions(ns, memory_id, decisions),
            up.truncated or down.truncated,
            score(self.scoring, nodes, credibilities(self.scoring, stats), now),
            stats,
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


def _supersedes(new: MemoryRecord, current: MemoryRecord) -> bool:
    """A new value of a claim replaces the current one when it comes from the same
    source, or from the user (users are authoritative about what they said); a
    different value from another source is a contradiction, not a replacement."""
    return new.creator_id == current.creator_id or new.creator_kind == "user"


def _dependency_ids(rec: MemoryRecord) -> set[str]:
    return {str(getattr(d, "id", d)) for d in rec.dependencies}


def _downrank(d: Decision) -> float:
    """The product of a decision's down-rank factors (1.0 without any)."""
    product = 1.0
    for o in d.obligations:
        if o.kind == "downrank" and o.args:
            product *= float(o.args[0])  # type: ignore[arg-type]  # the checker types downrank(number)
    return product
