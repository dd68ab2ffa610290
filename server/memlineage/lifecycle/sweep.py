"""One governance sweep pass: examine the memories due for review, in batches.

Cost is proportional to what is examined: the store hands out only memories
whose next review is due (a sorted index), their values are computed with numpy
from the store's score columns (``score_columns``), and each is rescheduled by tier —
near a threshold soon, recently used often, cold rarely. Transitions:
- active / pending_verification with value < archive_below -> archived;
- archived for at least evict_after_archived with value < evict_below -> evicted,
  refused while it has an active (or pending) derivation or is still the current
  value of its claim;
every transition goes through the store's status change, so it is recorded in
the memory's history with its reason. With ``objection_window`` set, a memory an
agent owns is first *proposed* for its transition (a ``proposed`` Watch event with a
deadline) and moves only once the deadline passes with no objection (`_heard`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from memlineage.lineage.errors import LineageError, StoreCorruptError
from memlineage.lineage.model import MemoryRecord, Status
from memlineage.lineage.proposals import PENDING, Proposal, owners_of
from memlineage.scoring.batch import score_columns
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore

_LIVE = {Status.ACTIVE.value, Status.PENDING_VERIFICATION.value}
log = logging.getLogger("memlineage.sweep")


@dataclass(frozen=True, slots=True)
class Transition:
    memory_id: str
    from_status: str
    to_status: str
    reason: str


@dataclass
class SweepReport:
    examined: int = 0
    transitions: list[Transition] = field(default_factory=list)
    refused: list[Transition] = field(default_factory=list)
    # transitions proposed to an agent owner (it may object before the deadline)
    proposed: list[Transition] = field(default_factory=list)
    # what could not be read (a StoreCorruptError's message, naming the key), each
    # skipped for this pass
    unreadable: list[str] = field(default_factory=list)

    def merge(self, other: SweepReport) -> None:
        self.examined += other.examined
        self.transitions += other.transitions
        self.refused += other.refused
        self.proposed += other.proposed
        self.unreadable += other.unreadable

    def skip(self, namespace: str, what: str, exc: StoreCorruptError) -> None:
        """Log a value the store cannot read (once: here) and count it."""
        log.error("sweep of namespace %r: %s skipped: %s", namespace, what, exc.message)
        self.unreadable.append(exc.message)


def _heard(
    store: LineageStore,
    cfg: ScoringConfig,
    rec: MemoryRecord,
    to: Status,
    reason: str,
    now: float,
    report: SweepReport,
    p: Proposal | None,
) -> float | None:
    """The agent's voice: None when the move may happen now, else when to look again.
    An agent-owned memory's move is proposed first (its owners hear it on Watch) and
    happens only once the deadline passes with no objection; an objection postpones
    it (then it is proposed again), at most `max_objections` times."""
    owners = owners_of(rec.creator_id, rec.tags)
    if cfg.objection_window <= 0 or not owners:
        return None
    if p is not None and p.to_status == to.value and p.from_status == rec.status:
        if now < p.deadline:
            return p.deadline  # pending: its owners may still object; postponed: waiting
        if p.state == PENDING:
            return None  # the deadline passed with no objection: it happens
    proposal = Proposal(
        rec.id,
        rec.namespace,
        rec.status,
        to.value,
        reason,
        owners,
        now,
        now + cfg.objection_window,
        PENDING,
        p.objections if p is not None else (),
    )
    store.save_proposal(proposal, "proposed", now=now)
    report.proposed.append(Transition(rec.id, rec.status, to.value, reason))
    return proposal.deadline


def _archived_since(rec: MemoryRecord) -> float | None:
    for change in reversed(rec.status_history):
        if change.to_status == Status.ARCHIVED.value:
            return change.at
    return None


def _eviction_blocker(store: LineageStore, rec: MemoryRecord) -> str | None:
    if rec.derivations:
        children = store.get_many(rec.namespace, list(rec.derivations))
        live = sorted(c.id for c in children.values() if c.status in _LIVE)
        if live:
            return f"has active descendants ({', '.join(live[:3])})"
    if rec.subject is not None and rec.attribute is not None:
        current = store.current_claim(rec.namespace, rec.subject, rec.attribute)
        if current is not None and current.id == rec.id:
            return f"is the current value of {rec.subject}/{rec.attribute}"
    return None


def sweep_namespace(
    store: LineageStore, cfg: ScoringConfig, namespace: str, now: float, batch: int = 1000
) -> SweepReport:
    """Review at most `batch` due memories of one namespace. A value the store cannot
    read skips what needs it (the memory; the batch when its score inputs cannot be
    read), logged and in ``unreadable``; the rest goes on."""
    report = SweepReport()
    try:
        _sweep_batch(store, cfg, namespace, now, batch, report)
    except StoreCorruptError as exc:
        report.skip(namespace, "its batch", exc)
    return report


def _readable(
    store: LineageStore, namespace: str, ids: list[str], report: SweepReport
) -> tuple[dict[str, MemoryRecord], list[str]]:
    """The records of `ids` in one read; when one cannot be read, one read per id
    (only then), the unreadable ones skipped (and returned)."""
    try:
        return store.get_many(namespace, ids), []
    except StoreCorruptError:
        pass
    records: dict[str, MemoryRecord] = {}
    skipped: list[str] = []
    for rid in ids:
        try:
            records.update(store.get_many(namespace, [rid]))
        except StoreCorruptError as exc:
            report.skip(namespace, f"memory {rid!r}", exc)
            skipped.append(rid)
    return records, skipped


def _sweep_batch(
    store: LineageStore,
    cfg: ScoringConfig,
    namespace: str,
    now: float,
    batch: int,
    report: SweepReport,
) -> None:
    ids = store.due_for_review(namespace, now=now, limit=batch)
    if not ids:
        return
    records, skipped = _readable(store, namespace, ids, report)
    report.examined = len(records)
    # an unreadable memory is looked at again soon (not due for ever, filling batches)
    next_review: dict[str, float] = dict.fromkeys(skipped, now + cfg.near_interval)
    # Values only (no credibility needed): from the store's score columns, numpy over
    # the batch (the embedded store keeps them columnar; others build them from records).
    scored = score_columns(
        cfg, store.score_columns(namespace, list(records)), {}, now, reliability=False
    )
    values = dict(zip(scored.ids, scored.value.tolist(), strict=True))
    gone: list[str] = []
    # which of the batch have a proposal, and what it says (`_heard`): one read
    proposals: dict[str, Proposal] = {}
    if cfg.objection_window > 0:
        try:
            proposals = store.proposals(namespace, list(records))
        except StoreCorruptError:  # one by one: only the damaged ones are skipped
            for rid in list(records):
                try:
                    found = store.proposal(namespace, rid)
                except StoreCorruptError as exc:  # its owners' objections are not known
                    report.skip(namespace, f"memory {rid!r}", exc)
                    del records[rid]
                    next_review[rid] = now + cfg.near_interval
                    continue
                if found is not None:
                    proposals[rid] = found
    for rid, rec in records.items():
        try:
            later = _review(store, cfg, rec, values[rid], now, report, proposals.get(rid))
        except StoreCorruptError as exc:  # its history or its descendants
            report.skip(namespace, f"memory {rid!r}", exc)
            later = now + cfg.near_interval
        if later is None:
            gone.append(rid)
        else:
            next_review[rid] = later
    if gone:
        store.unschedule_review(namespace, gone)
    store.schedule_review(namespace, next_review, now=now)


def _review(
    store: LineageStore,
    cfg: ScoringConfig,
    rec: MemoryRecord,
    v: float,
    now: float,
    report: SweepReport,
    p: Proposal | None,
) -> float | None:
    """One memory's review (its move, heard or done): when to look at it again, None
    once evicted."""
    namespace, rid, status = rec.namespace, rec.id, rec.status
    move: tuple[Status, str] | None = None
    if status in _LIVE and v < cfg.archive_below:
        move = (Status.ARCHIVED, f"value {v:.3f} below {cfg.archive_below:g}")
    elif status == Status.ARCHIVED.value and v < cfg.evict_below:
        since = _archived_since(store.get(namespace, rid))  # with its status history
        if since is not None and now - since >= cfg.evict_after_archived:
            blocker = _eviction_blocker(store, rec)
            reason = f"value {v:.3f} below {cfg.evict_below:g}, archived since {since:.0f}"
            if blocker is None:
                move = (Status.EVICTED, reason)
            else:
                report.refused.append(
                    Transition(rid, status, Status.EVICTED.value, f"not evicted: {blocker}")
                )
    if move is None and p is not None:
        store.drop_proposal(namespace, rid)  # its value recovered: nothing to hear
    if move is not None:
        later = _heard(store, cfg, rec, move[0], move[1], now, report, p)
        if later is not None:
            return later
        try:
            if move[0] is Status.EVICTED:  # refused by the store if a child came meanwhile
                store.evict(namespace, rid, reason=f"sweep: {move[1]}", now=now)
            else:
                store.set_status(namespace, rid, move[0], reason=f"sweep: {move[1]}", now=now)
        except LineageError as exc:  # changed meanwhile: review again soon
            report.refused.append(Transition(rid, status, move[0].value, str(exc)))
            return now + cfg.near_interval
        report.transitions.append(Transition(rid, status, move[0].value, move[1]))
        if p is not None:
            store.drop_proposal(namespace, rid)
        if move[0] is Status.EVICTED:
            return None
    return now + _interval(cfg, rec, v, now)


def _interval(cfg: ScoringConfig, rec: MemoryRecord, value: float, now: float) -> float:
    """Near a threshold: soon. Recently used: often. Otherwise: rarely."""
    if min(abs(value - cfg.archive_below), abs(value - cfg.evict_below)) < cfg.near_margin:
        return cfg.near_interval
    last = rec.last_access if rec.last_access is not None else rec.created_at or now
    if now - last < cfg.hot_window:
        return cfg.hot_interval
    return cfg.cold_interval


def sweep(
    store: LineageStore,
    cfg: ScoringConfig,
    now: float,
    *,
    namespace: str | None = None,
    batch: int = 1000,
) -> SweepReport:
    """One pass over one namespace or all of them (a batch each)."""
    report = SweepReport()
    for ns in [namespace] if namespace else store.namespaces():
        report.merge(sweep_namespace(store, cfg, ns, now, batch))
    return report
