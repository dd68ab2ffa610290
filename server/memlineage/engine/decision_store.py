"""Issued decisions kept in the store, for Explain and Feedback of any sidecar, after
a restart.

The journal (`records.DecisionJournal`) appends every decision it keeps to a queue
(one deque append on the request path); `DecisionKeeper.flush` encodes what is
queued as `KeptDecision`s and hands them to the store per namespace in one call
(`LineageStore.keep_decisions`: one script on Redis, one transaction in SQLite).
The server flushes with the access statistics (every `access_flush_seconds`), and
the engine before Explain and Feedback and on shutdown: another sidecar sees a
decision at most one flush interval late. The store keeps the newest
`decision_retention` per namespace. A store that keeps none (the embedded store
without a data directory) gets no queue: the journal is the only copy, as before.

While the store is down, the queue holds at most `max_pending` decisions (the
oldest go first) and a failed batch is retried at the next flush. A namespace whose
keys the store cannot use (StoreCorruptError, DATA_LOSS) is logged and retried the
same way, never raised: a flush writes every namespace, and the flush before one
namespace's Explain must not fail it, nor name another namespace's key to its caller.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from typing import Any

from memlineage_dsl.decision import Decision, ObligationOut, Reason

from memlineage.engine.fault_log import FaultLog
from memlineage.engine.records import DecisionJournal, DecisionRecord, decision_id_of
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import StoreCorruptError, StoreUnavailableError
from memlineage.store.base import LineageStore

log = logging.getLogger("memlineage.engine")


def detail_of(d: Decision) -> str:
    """What `KeptDecision.detail` holds of a decision (JSON)."""
    return json.dumps(
        {
            "c": d.compliance_score,
            "x": d.expected_cost,
            "r": [[r.policy, r.effect, r.message, r.priority, r.status] for r in d.reasons],
            "o": [[o.kind, list(o.args), o.policy] for o in d.obligations],
            "e": list(d.errors),
        },
        separators=(",", ":"),
        default=str,
    )


def kept_of(rec: DecisionRecord, detail: str | None = None) -> KeptDecision:
    d = rec.decision
    return KeptDecision(
        rec.decision_id,
        rec.namespace,
        rec.operation,
        rec.memory_ids,
        rec.actor,
        rec.decided_at,
        rec.policy_version,
        d.effect,
        detail if detail is not None else detail_of(d),
    )


def record_of(k: KeptDecision) -> DecisionRecord | None:
    """The decision a `KeptDecision` holds; None for one this version cannot read."""
    try:
        v: Any = json.loads(k.detail)
        d = Decision(
            k.effect,
            float(v["c"]),
            float(v["x"]),
            obligations=tuple(ObligationOut(str(o[0]), tuple(o[1]), str(o[2])) for o in v["o"]),
            reasons=tuple(
                Reason(str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4])) for r in v["r"]
            ),
            errors=tuple(str(e) for e in v["e"]),
        )
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None
    return DecisionRecord(
        k.decision_id,
        d,
        k.namespace,
        k.operation,
        k.memory_ids,
        k.actor,
        k.decided_at,
        k.policy_version,
    )


class DecisionKeeper:
    """Writes the journal's queue to the store in batches (see the module)."""

    def __init__(
        self, store: LineageStore, journal: DecisionJournal, max_pending: int = 200_000
    ) -> None:
        self.store = store
        self.max_pending = max_pending
        self._flushing = threading.Lock()
        self._retry: list[KeptDecision] = []  # a batch the store refused: next flush
        self._faults = FaultLog(log)  # a damaged namespace fails every flush: said once
        if store.keeps_decisions and journal.queue is None:
            journal.queue = deque(maxlen=max_pending)
        self._queue = journal.queue if store.keeps_decisions else None

    def pending(self) -> int:
        return (len(self._queue) if self._queue is not None else 0) + len(self._retry)

    def flush(self) -> int:
        """Write everything queued; returns how many decisions were written. Raises
        StoreUnavailableError when the store refused (those are retried next time); a
        namespace it finds damaged is logged and retried, not raised (see the module)."""
        queue = self._queue
        if queue is None:
            return 0
        with self._flushing:
            batch, self._retry = self._retry, []
            details: dict[int, str] = {}  # per Decision object: a reused one is encoded once
            popleft = queue.popleft
            for _ in range(len(queue)):  # what is queued now; later ones wait their turn
                try:
                    item = popleft()
                except IndexError:  # a full queue dropped its oldest meanwhile
                    break
                if isinstance(item, DecisionRecord):
                    rec = item
                else:  # (serial, context, time)
                    serial, ctx, at = item
                    rec = ctx.record(decision_id_of(at, serial), at)
                d = rec.decision
                detail = details.get(id(d))
                if detail is None:
                    detail = details[id(d)] = detail_of(d)
                batch.append(kept_of(rec, detail))
            by_ns: dict[str, list[KeptDecision]] = {}
            for k in batch:
                by_ns.setdefault(k.namespace, []).append(k)
            written, failed = 0, []
            error: StoreUnavailableError | None = None
            for ns, entries in by_ns.items():
                try:
                    self.store.keep_decisions(ns, entries)
                    written += len(entries)
                    self._faults.cleared(ns, f"kept decisions of {ns!r} are written again")
                except StoreUnavailableError as exc:
                    failed += entries
                    error = exc
                except StoreCorruptError as exc:  # that namespace's own reads say so
                    failed += entries
                    message = f"{len(entries)} kept decisions of {ns!r} not written: {exc}"
                    self._faults.failed(ns, str(exc), message)
            self._retry = failed[-self.max_pending :]
            if error is not None:
                raise error
            return written


__all__ = ["DecisionKeeper", "detail_of", "kept_of", "record_of"]
