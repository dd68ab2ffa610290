"""What every operation of the decision engine shares (`EngineBase`): its parts and
the helpers that read the store, score the records and issue decisions."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import Decision
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import DEFAULT_BUDGET, Creator, Request
from memlineage_dsl.lineage_bound import Bound

from memlineage.engine.access import AccessBuffer
from memlineage.engine.batch_views import Heights
from memlineage.engine.credibility import CredibilityCache
from memlineage.engine.decision_input import encode_input
from memlineage.engine.decision_store import DecisionKeeper
from memlineage.engine.outcomes import (
    store_down,
)
from memlineage.engine.policies import PolicyHolder, ServingPolicies
from memlineage.engine.records import (
    JOURNAL_BESIDE_STORE,
    JOURNAL_MOST,
    DecisionJournal,
    DecisionLog,
    DecisionRecord,
    issue_decision_id,
)
from memlineage.engine.reuse import (
    ACCESS_FACTS,
    DecisionReuse,
    NoReuse,
    Window,
)
from memlineage.engine.shadow import ShadowSet
from memlineage.engine.snapshot import StoreSnapshot
from memlineage.engine.view_cache import ViewCache
from memlineage.lineage.clock import Clock, ManualClock, system_clock
from memlineage.lineage.errors import (
    StoreUnavailableError,
    ValidationError,
)
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.times import show_time
from memlineage.scoring.batch import Memo, Scores, score, sources_of
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore

# The input of the decision a thread is about to issue (`_decide_safely` -> `_issue`).
_CAPTURED = threading.local()


@dataclass
class EngineBase:
    """What every operation of the engine shares: its parts (store, policies,
    clock, log, journal, caches) and the helpers that read the store, score and
    issue decisions. The operations are in `checks` (Check, FilterRank), `writes`
    (Record, UpdateStatus, Feedback) and `core` (sweep, Explain)."""

    store: LineageStore
    policies: PolicyHolder
    clock: Clock = system_clock
    log: DecisionLog = field(default_factory=lambda: DecisionLog(None))
    journal: DecisionJournal = field(default_factory=DecisionJournal)
    fail_mode: str = "closed"  # closed | degraded
    lineage_depth: int = 16
    record_access: bool = True
    # How far ahead of the clock a request may state its time (`max_future_seconds`).
    max_future_seconds: float = 300.0
    # The clock is a ManualClock the callers advance: a stated time moves it forward
    # (`_now`); set by the `simulation` setting, never during serving.
    simulation: bool = False
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    # How long a source's credibility is kept between its counters' changes (seconds)
    credibility_ttl: float = 1.0
    # Reuse a Check decision for the same request until the store is written or its
    # horizon passes (stores that count their writes: `LineageStore.epochs`).
    reuse_decisions: bool = True
    keep_views: bool = True  # see `views`
    # Each decision's log line carries what it read (`decision_input`): replayable.
    capture_inputs: bool = False
    # A candidate set deciding beside the serving one (`engine/shadow.py`), loaded
    # from `shadow_dir` when the admin asks for it without files.
    shadow: ShadowSet = field(default_factory=ShadowSet)
    shadow_dir: str | None = None
    # Built from the store (and scoring) in __post_init__
    credibility: CredibilityCache = field(init=False, repr=False)
    access: AccessBuffer = field(init=False, repr=False)
    reuse: DecisionReuse = field(init=False, repr=False)
    # The journal's decisions written to the store in batches (engine/decision_store.py)
    decisions: DecisionKeeper = field(init=False, repr=False)
    # score() memo for records the store shares (see scoring.batch.score)
    _memo: Memo = field(default_factory=dict, init=False, repr=False)
    _memo_for: ScoringConfig | None = field(default=None, init=False, repr=False)
    # divergent() heights of candidates' ancestries, kept across batches (batch_views)
    _heights: Heights = field(default_factory=dict, init=False, repr=False)
    # Views of one memory kept between fresh Checks (engine/view_cache.py): on a store
    # that stamps changes per memory, unless `keep_views` is off; None otherwise
    views: ViewCache | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.simulation and not isinstance(self.clock, ManualClock):
            raise TypeError("a simulation runs on a ManualClock the callers advance")
        self.credibility = CredibilityCache(self.store, self.scoring, ttl=self.credibility_ttl)
        # A simulation writes each read's statistics at once: its decisions then follow
        # the requests alone, as `memlineage simulate` does (flushed on wall time, a
        # policy reading `access_count` answered by how fast the requests came)
        self.access = AccessBuffer(self.store, max_pending=1 if self.simulation else 10_000)
        self.reuse = DecisionReuse(self.store) if self.reuse_decisions else NoReuse(self.store)
        # the journal keeps no more per namespace than the store does (Explain and
        # Feedback then find the same decisions with and without a copy in the store),
        # and only the newest beside a store that keeps them too
        most = JOURNAL_BESIDE_STORE if self.store.keeps_decisions else JOURNAL_MOST
        self.journal.limit = min(self.journal.limit, self.store.decision_retention, most)
        self.decisions = DecisionKeeper(self.store, self.journal)
        if self.keep_views and self.store.change_mark() is not None:
            self.views = ViewCache(self.store)

    @property
    def reused(self) -> int:
        """How many decisions were answered by reuse so far."""
        return self.reuse.reused

    def flush_access(self) -> int:
        return self.access.flush()

    def flush_decisions(self) -> int:
        """Write the decisions queued for the store (StoreUnavailableError: retried)."""
        return self.decisions.flush()

    def _flush_access_quietly(self) -> None:
        """Before Explain: a store that refuses writes but still reads (the embedded
        store on a full disk) answers with the statistics last written; what was not
        written stays buffered for the next flush."""
        with contextlib.suppress(StoreUnavailableError):
            self.access.flush()

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
        """The time a request is decided at: its stated `at`, at most
        `max_future_seconds` ahead of the clock (earlier times replay the past), or now.
        In a simulation a stated time moves the clock forward to it instead."""
        if self.simulation:
            return self._advance(at)
        now = self.clock()
        if at is None:
            return now
        if not math.isfinite(at) or at > now + self.max_future_seconds:
            raise ValidationError(
                f"is more than {self.max_future_seconds:g} s ahead of the server's clock "
                f"({show_time(now)}; setting max_future_seconds) or not a number",
                field="time",
            )
        return at

    def _known_volatility(self, volatility: str | None) -> None:
        """A volatility class this server's scoring knows: an unknown one would decay as
        the default class does (a typo, `hgih`, would silently mean no decay)."""
        if volatility is not None and volatility not in self.scoring.half_lives:
            raise ValidationError(
                f"unknown volatility class {volatility!r}; this server's classes: "
                f"{', '.join(sorted(self.scoring.half_lives))} (setting scoring.half_lives)",
                field="volatility",
                code="UNKNOWN_VOLATILITY",
            )

    def _now_spending(self, at: float | None) -> float:
        """The time of a request that spends or counts for good (an act: grant uses and
        action counters; a grant: whether it is live; a Record: the `calls()` counter of
        its creator): the server's clock. A stated time would decide it in another
        window (an expired grant live again at a past time, a rate window shifted, a
        burst of Records counted an hour ago so `calls()` never sees it) while its uses
        and counts are written for good, so a normal server refuses one; in a
        simulation it moves the clock as for any request."""
        if self.simulation:
            return self._advance(at)
        if at is not None:
            raise ValidationError(
                "a Record, an act or a grant is decided at the server's clock (it counts "
                "calls and actions and spends grant uses for good): state no time",
                field="time",
            )
        return self.clock()

    def _advance(self, at: float | None) -> float:
        """Simulation: no stated time is the clock's now; a later one moves the clock
        to it; an earlier one is refused (the clock never goes back)."""
        clock = self.clock
        assert isinstance(clock, ManualClock)
        if at is None:
            return clock()
        if not math.isfinite(at):
            raise ValidationError("is not a number", field="time")
        try:
            return clock.advance_to(at)
        except ValueError:
            raise ValidationError(
                f"{show_time(at)} is before the simulation clock ({show_time(clock())}): "
                "simulated time only moves forward",
                field="time",
            ) from None

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
        grants_used: tuple[str, ...] = (),
        reused_input: str | None = None,
    ) -> DecisionRecord:
        """The decision issued: logged, journaled. Its input is the one this thread
        captured deciding `d`, or `reused_input` (a reused decision's, as first read)."""
        decision_id, serial = issue_decision_id(now)
        pair = _CAPTURED.__dict__.pop("input", None)  # set by `_decide_safely`
        captured = pair[1] if pair is not None and pair[0] is d else reused_input
        rec = DecisionRecord(
            decision_id, d, ns, op, ids, actor.id, now, version, grants_used, captured
        )
        if self.log.sink is not None:
            self.log.write(rec)
        self.journal.put(serial, rec)
        return rec

    def _reads(self, compiled: CompiledPolicySet, op: str) -> frozenset[str]:
        """The attributes the operation's policies read (and a shadow candidate's)."""
        reads = compiled.plans[op].reads
        candidate = self.shadow.current
        return reads if candidate is None else reads | candidate.compiled.plans[op].reads

    @staticmethod
    def _fresh_capture() -> None:
        """Drop an input captured for a decision that was never issued (an operation
        that failed after deciding), so it cannot ride on the next one."""
        _CAPTURED.__dict__.pop("input", None)

    def _view(
        self,
        ns: str,
        ids: Sequence[str],
        op: str,
        compiled: CompiledPolicySet,
        loaded: Mapping[str, MemoryRecord] | None = None,
    ) -> tuple[dict[str, MemoryRecord], Bound | None]:
        """The records `ids` and the lineage the operation needs, in one store read;
        none when the caller already `loaded` them and no lineage is needed. With how
        far they hold it (`snapshot_of`'s `bound`; None: no lineage was loaded)."""
        return self._view_whole(ns, ids, op, compiled, loaded)

    def _view_scored(
        self,
        ns: str,
        ids: tuple[str, ...],
        op: str,
        compiled: CompiledPolicySet,
        reads: frozenset[str],
        now: float,
        epoch: int | None,
    ) -> tuple[dict[str, MemoryRecord], Bound | None, Scores | None, bool]:
        """`_view` and, when it has them, `_scores`: for one memory, from a view kept
        while nothing it holds changed (`views`), else read and kept. Not while inputs
        are captured for the log (they carry access statistics as read now). The flag
        says whether the scores are given (else the caller scores the records)."""
        views = self.views
        if views is None or len(ids) != 1 or self.capture_inputs:
            return *self._view(ns, ids, op, compiled), None, False
        up, down = self._depths(op, compiled)
        key = (ns, ids[0], up, down, not reads.isdisjoint(ACCESS_FACTS))
        kept = views.get(key)
        if kept is not None:
            # kept only whole (no record limit cut it): bound as it was read
            bound: Bound | None = (ids, up, down, False) if up or down else None
            timeless = kept.scoring is self.scoring and "value_score" not in reads
            if kept.scores is not None and timeless:
                return kept.records, bound, kept.scores, True
            return kept.records, bound, None, False
        mark = self.store.change_mark()
        records, bound = self._view_whole(ns, ids, op, compiled, depths=(up, down))
        if mark is None or (bound is not None and bound[3]) or ids[0] not in records:
            return records, bound, None, False
        scores = self._scores(ns, records, now, reads, epoch=epoch)
        views.keep(key, mark, records, scores, self.scoring)
        return records, bound, scores, True

    def _view_whole(
        self,
        ns: str,
        ids: Sequence[str],
        op: str,
        compiled: CompiledPolicySet,
        loaded: Mapping[str, MemoryRecord] | None = None,
        depths: tuple[int, int] | None = None,
    ) -> tuple[dict[str, MemoryRecord], Bound | None]:
        """`_view` (`depths`: `_depths` of `op`, when the caller has them already). Its
        bound says a walk was cut by the view's record limit (`bound[3]`): the
        records are then not the whole of each memory's lineage to `depths`."""
        up, down = depths or self._depths(op, compiled)
        if not up and not down:
            if loaded is not None and all(i in loaded for i in ids):
                return {i: loaded[i] for i in ids}, None
            return self.store.get_many(ns, ids), None
        view = self.store.lineage_view(ns, ids, ancestor_depth=up, descendant_depth=down)
        return view.records, (tuple(ids), up, down, view.truncated)

    def _depths(self, op: str, compiled: CompiledPolicySet) -> tuple[int, int]:
        """How far `_view` walks up (ancestors) and down (descendants) for `op`: the
        serving set's `walks` (worked out once per set), or, for another set `compiled`
        (a shadow candidate's own decision), worked out here."""
        serving = self.policies.current
        candidate = self.shadow.current
        if serving.compiled is compiled:
            return serving.walks(op, self.lineage_depth, candidate)
        return ServingPolicies(compiled, "", ()).walks(op, self.lineage_depth, candidate)

    def _bound(self, snap: StoreSnapshot, window: Window | None = None) -> None:
        """How fast this configuration's scores can fall: the snapshot's horizons, worked
        out only when the decision may be kept (an open reuse `window`)."""
        snap.half_life_min = self.scoring.min_half_life
        snap.value_decay = (self.scoring.beta, self.scoring.relevance_lambda)
        snap.timed = window is not None and window.table is not None

    def _decide_safely(
        self, compiled: CompiledPolicySet, req: Request, snap: StoreSnapshot, op: str
    ) -> Decision:
        """Counters are read lazily from the store during evaluation: honour fail mode.
        With `capture_inputs`, what it read goes with the decision this thread issues
        next (its log line's `input`, for `memlineage replay`)."""
        d = decide(compiled, req, snap)
        if d.errors:
            d = self._checked(d, op, snap)
        if self.shadow.current is not None:
            self.shadow.observe(op, req, snap, d)
        if self.capture_inputs:
            _CAPTURED.input = (d, encode_input(req, snap))
        return d

    def _checked(self, d: Decision, op: str, snap: StoreSnapshot) -> Decision:
        """`d` unless a rule failed because the store was unavailable."""
        if d.errors and snap.store_failed:
            if self.fail_mode != "degraded":
                raise StoreUnavailableError("lineage store unavailable during evaluation")
            return store_down(op)
        return d
