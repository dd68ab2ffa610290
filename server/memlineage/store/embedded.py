"""In-process store: the zero-setup default, optionally persistent.

State lives in per-namespace dictionaries behind one re-entrant lock (so a
namespace can never see another's keys by construction).  With a data
directory every mutation is appended to a JSON-lines log *before* it is
applied, as the operation (not its effects): replaying the log re-runs the
same deterministic apply functions, so a cascade over 100,000 descendants
costs one log line.  ``compact()`` writes a snapshot and starts a new log
generation; a torn last line (crash mid-write) is ignored on replay.

The reliability bookkeeping follows the same rule: a record op carries no
confirmation/contradiction effects, its apply function recomputes them from the
claim group (deterministic), and feedback / schedule_review / unschedule_review
are ops of their own (``f`` / ``v`` / ``x``).  The snapshot adds the source
statistics and the review schedule (claim groups are rebuilt from the rows).

Reads hand out frozen MemoryRecords cached on each row (see ``_Row``): built on
the first read after a change, then the same object until the row, its history
or its derivations change; an access flush (``record_accesses``) drops only the
touched rows' copies.

Lineage events are produced by the same apply functions, under the same lock,
from the same log line: replay regenerates them with the same per-namespace
sequence numbers (the cursors), and the snapshot carries the retained events
and the sequence, so a restart resumes every reader's cursor.
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO, Any

import numpy as np

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.columns import ScoreColumns, score_columns_of
from memlineage.lineage.errors import (
    AlreadyExistsError,
    CursorExpiredError,
    CycleError,
    NotFoundError,
    TransitionError,
    UnknownDependencyError,
    VersionConflictError,
)
from memlineage.lineage.model import (
    CASCADE_MARKS,
    CASCADE_TRIGGERS,
    CLAIM_PEERS,
    CLAIM_RELEASE,
    TAINTED,
    CascadeResult,
    EventType,
    LineageEvent,
    MemoryRecord,
    Status,
    StatusChange,
)
from memlineage.lineage.validation import (
    StoreLimits,
    check_dependencies,
    check_transition,
    validate_new,
)
from memlineage.store.base import MAX_BATCH_IDS, LineageStore, cascade_reason
from memlineage.store.window import change_of, count_in

# Ops that change neither what a memory is nor how it is counted: the review schedule.
_SCHEDULE_OPS = frozenset({"v", "x"})


def _check_version(memory_id: str, actual: int, expected: int) -> None:
    """Compare-and-set: a stale version is refused, never silently overwritten."""
    if actual != expected:
        raise VersionConflictError(
            f"memory {memory_id!r} is at version {actual}, not {expected}",
            expected=expected, actual=actual)


_ROW_FIELDS = tuple(f for f in MemoryRecord.__dataclass_fields__ if f != "derivations")
_PENDING = Status.PENDING_VERIFICATION.value
_CURSOR_RE = re.compile(r"[0-9]{1,19}")
_MARKS = frozenset(s.value for s in CASCADE_MARKS)
_PEERS = frozenset(s.value for s in CLAIM_PEERS)
_DEFAULTS = {f.name: f.default for f in MemoryRecord.__dataclass_fields__.values()}
_TUPLES = ("tags", "dependencies", "confirmed_by", "contradicted_by")


_set = object.__setattr__
_ORDER = tuple(MemoryRecord.__dataclass_fields__)
_BEFORE = attrgetter(*_ORDER[:_ORDER.index("derivations")])
_AFTER = attrgetter(*_ORDER[_ORDER.index("derivations") + 1:])
"""The row's fields before and after ``derivations``, in MemoryRecord's positional order
(a positional build costs half a keyword one)."""

_FLOAT_COLUMNS = ("confidence", "created_at", "last_access", "access_count", "uses_ok",
                  "uses_failed", "derivations")
_INT_COLUMNS = ("volatility", "type", "creator", "confirm_at", "confirm_n", "contra_at",
                "contra_n")
_SCORED = frozenset({"creator_confidence", "created_at", "last_access", "access_count",
                     "uses_ok", "uses_failed", "volatility", "type", "creator_id",
                     "confirmed_by", "contradicted_by"})
"""The row fields the score columns mirror (derivations: ``_Row.adopt``)."""


class _Pairs:
    """Ragged per-row lists of interned sources (who confirmed / contradicted a row),
    each row's list contiguous in one growing ``pool`` at ``at[row]`` (``n[row]``
    long): a changed list is appended at the end (in place when it is already the
    last block), the old block becomes garbage, compacted when it outweighs the rest.
    A read gathers the blocks of the requested rows with numpy alone."""

    __slots__ = ("garbage", "pool", "used")

    def __init__(self) -> None:
        self.pool = np.zeros(64, dtype=np.int64)
        self.used = 0
        self.garbage = 0

    def _reserve(self, extra: int) -> None:
        need = self.used + extra
        if need > self.pool.shape[0]:
            new = np.zeros(max(need, 2 * self.pool.shape[0]), dtype=np.int64)
            new[:self.used] = self.pool[:self.used]
            self.pool = new

    def set(self, at: np.ndarray, n: np.ndarray, ix: int, old_n: int, srcs: list[int],
            appended: bool, rows: int) -> None:
        if appended and old_n and int(at[ix]) + old_n == self.used:
            tail = srcs[old_n:]  # the row's block is last: extend it in place
            self._reserve(len(tail))
            self.pool[self.used:self.used + len(tail)] = tail
            self.used += len(tail)
        else:
            self.garbage += old_n
            self._reserve(len(srcs))
            at[ix] = self.used
            self.pool[self.used:self.used + len(srcs)] = srcs
            self.used += len(srcs)
        n[ix] = len(srcs)
        if self.garbage > 1024 and self.garbage > self.used - self.garbage:
            self._compact(at, n, rows)

    def _compact(self, at: np.ndarray, n: np.ndarray, rows: int) -> None:
        everyone = np.arange(rows)
        _, srcs = self.gather(at, n, everyone)
        counts = n[:rows].astype(np.int64)
        starts = np.cumsum(counts) - counts
        self.pool = np.zeros(max(64, 2 * srcs.shape[0]), dtype=np.int64)
        self.pool[:srcs.shape[0]] = srcs
        at[:rows] = starts
        self.used, self.garbage = int(srcs.shape[0]), 0

    def gather(self, at: np.ndarray, n: np.ndarray,
               rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``rows``, source) pairs of the given rows, in row order."""
        counts = n[rows].astype(np.int64)
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(rows.shape[0], dtype=np.int64), counts)
        first = np.cumsum(counts) - counts
        offset = np.arange(total, dtype=np.int64) - first[owner] + at[rows].astype(
            np.int64)[owner]
        return owner, self.pool[offset]


class _Columns:
    """One namespace's score inputs as numpy columns, a row per memory (``index``).

    Rows are attached once (``attach``: when linked into the namespace) and kept up
    to date by ``_Row.__setattr__`` (``write``) and ``_Row.adopt``: the columns never
    go stale.  Arrays grow by doubling.  Strings are interned (``sources``,
    ``volatilities``, ``types``: append-only name tables).  Confirmations and
    contradictions are ragged: per row, the interned sources in the row's tuple
    order (``_Pairs``), gathered as (row, source) pairs for the requested rows.
    """

    def __init__(self, capacity: int = 64) -> None:
        self.n = 0
        self.index: dict[str, int] = {}
        for name in _FLOAT_COLUMNS:
            setattr(self, name, np.zeros(capacity, dtype=np.float64))
        for name in _INT_COLUMNS:
            setattr(self, name, np.zeros(capacity, dtype=np.int64))
        self.sources: list[str] = []
        self._source_ix: dict[str, int] = {}
        self.volatilities: list[str | None] = []
        self._volatility_ix: dict[str | None, int] = {}
        self.types: list[str] = []
        self._type_ix: dict[str, int] = {}
        self.confirm = _Pairs()
        self.contra = _Pairs()

    # declared for the type checker; set in __init__ / _grow
    confidence: np.ndarray
    created_at: np.ndarray
    last_access: np.ndarray
    access_count: np.ndarray
    uses_ok: np.ndarray
    uses_failed: np.ndarray
    derivations: np.ndarray
    volatility: np.ndarray
    type: np.ndarray
    creator: np.ndarray
    confirm_at: np.ndarray
    confirm_n: np.ndarray
    contra_at: np.ndarray
    contra_n: np.ndarray

    def source(self, name: str) -> int:
        ix = self._source_ix.get(name)
        if ix is None:
            ix = self._source_ix[name] = len(self.sources)
            self.sources.append(name)
        return ix

    def _intern_volatility(self, v: str | None) -> int:
        ix = self._volatility_ix.get(v)
        if ix is None:
            ix = self._volatility_ix[v] = len(self.volatilities)
            self.volatilities.append(v)
        return ix

    def _intern_type(self, t: str) -> int:
        ix = self._type_ix.get(t)
        if ix is None:
            ix = self._type_ix[t] = len(self.types)
            self.types.append(t)
        return ix

    def _grow(self) -> None:
        for name in (*_FLOAT_COLUMNS, *_INT_COLUMNS):
            old = getattr(self, name)
            new = np.zeros(2 * old.shape[0], dtype=old.dtype)
            new[:old.shape[0]] = old
            setattr(self, name, new)

    def attach(self, row: _Row) -> None:
        """Give ``row`` the next column row and copy its score inputs in."""
        ix = self.n
        if ix == self.confidence.shape[0]:
            self._grow()
        self.n = ix + 1
        self.index[row.id] = ix
        _set(row, "_cols", self)
        _set(row, "_ix", ix)
        self.derivations[ix] = len(row._kids)
        for name in _SCORED:
            self.write(row, name, getattr(row, name), fresh=True)

    def write(self, row: _Row, name: str, value: Any, fresh: bool = False) -> None:
        """Mirror ``row.name = value`` (called before the row's own write)."""
        ix = row._ix
        if name == "creator_confidence":
            self.confidence[ix] = value
        elif name in ("created_at", "last_access"):
            getattr(self, name)[ix] = np.nan if value is None else value
        elif name in ("access_count", "uses_ok", "uses_failed"):
            getattr(self, name)[ix] = value
        elif name == "volatility":
            self.volatility[ix] = self._intern_volatility(value)
        elif name == "type":
            self.type[ix] = self._intern_type(value)
        elif name == "creator_id":
            self.creator[ix] = self.source(value)
        elif name in ("confirmed_by", "contradicted_by"):
            new = tuple(value)
            old: tuple[str, ...] = () if fresh else tuple(getattr(row, name))
            if not new and not old:
                return
            if name == "confirmed_by":
                pairs, at, n = self.confirm, self.confirm_at, self.confirm_n
            else:
                pairs, at, n = self.contra, self.contra_at, self.contra_n
            pairs.set(at, n, ix, len(old), [self.source(s) for s in new],
                      new[:len(old)] == old, self.n)

    def rows_of(self, ids: list[str]) -> np.ndarray | None:
        """The rows of ``ids`` when every one is attached and none repeats, else None.

        Attached ids were validated when recorded, so a batch made only of them needs
        no id validation: the lookups run in C and duplicates are found on the row
        numbers (a mask over the rows when that is cheap, else a sort)."""
        if not ids:
            return None
        try:
            found = itemgetter(*ids)(self.index) if len(ids) > 1 else (self.index[ids[0]],)
        except (KeyError, TypeError):  # unknown, or not even hashable: the checked path
            return None
        at = np.fromiter(found, dtype=np.intp, count=len(ids))
        if len(ids) > 1:
            if self.n <= 64 * len(ids):
                seen = np.zeros(self.n, dtype=bool)
                seen[at] = True
                distinct = int(np.count_nonzero(seen))
            else:
                distinct = int(np.unique(at).shape[0])
            if distinct != len(ids):
                return None
        return at

    def take(self, ids: list[str], at: np.ndarray | None = None) -> ScoreColumns:
        """The columns of the attached ids among ``ids``, in order (``np.take``);
        ``at``: their rows, when the caller already looked them up (``rows_of``)."""
        if at is None:
            at = self.rows_of(ids)  # every id known (the usual case): the lookups in C
        if at is None:
            index = self.index
            ids = [i for i in ids if i in index]
            at = np.fromiter((index[i] for i in ids), dtype=np.intp, count=len(ids))
        c_row, c_src = self.confirm.gather(self.confirm_at, self.confirm_n, at)
        x_row, x_src = self.contra.gather(self.contra_at, self.contra_n, at)
        return ScoreColumns(
            ids=ids, confidence=self.confidence[at], created_at=self.created_at[at],
            last_access=self.last_access[at], access_count=self.access_count[at],
            uses_ok=self.uses_ok[at], uses_failed=self.uses_failed[at],
            derivations=self.derivations[at], volatility=self.volatility[at],
            type=self.type[at], creator=self.creator[at],
            confirm_row=c_row, confirm_source=c_src, contradict_row=x_row,
            contradict_source=x_src,
            sources=self.sources, volatilities=self.volatilities, types=self.types)


class _Row:
    """Mutable internal twin of MemoryRecord; frozen copies are handed out, cached.

    ``record()`` builds the frozen MemoryRecord once and hands out the same object
    until the row changes (``bare()``: the same without status history, for
    decisions; it is derived from ``_rec`` and only valid while ``_rec`` is set, so
    dropping ``_rec`` drops both).  Invalidation cannot be forgotten: every field assignment goes
    through ``__setattr__``, which drops the cached copies, and nothing is mutated
    in place: ``status_history`` and the other sequences are tuples that are
    reassigned, and the derivation list (``_kids``, the one growing list) changes
    only through ``adopt``, which drops them too.
    """

    __slots__ = (*_ROW_FIELDS, "_kids", "_rec", "_bare", "_cols", "_ix")

    def __init__(self) -> None:
        _set(self, "_kids", [])
        _set(self, "_rec", None)
        _set(self, "_bare", None)
        _set(self, "_cols", None)  # the namespace's _Columns once attached, at row _ix
        _set(self, "_ix", -1)

    def __setattr__(self, name: str, value: Any) -> None:
        cols = self._cols
        if cols is not None and name in _SCORED:
            cols.write(self, name, value)  # before the write: it may read the old value
        _set(self, name, value)
        _set(self, "_rec", None)  # _bare is only valid while _rec is set

    def invalidate(self) -> None:
        _set(self, "_rec", None)

    def mark(self, status: str, entry: StatusChange, cap: int) -> None:
        """Move to ``status`` with a history entry (capped) and a version bump: the
        cascade's hot step, three fields for one invalidation."""
        history = (*self.status_history, entry)
        if len(history) > cap:
            history = history[len(history) - cap:]
        _set(self, "status_history", history)
        _set(self, "status", status)
        _set(self, "version", self.version + 1)
        _set(self, "_rec", None)

    def adopt(self, child: str) -> None:
        """Record a derivation: ``child`` was recorded with this row as a dependency."""
        self._kids.append(child)
        self.invalidate()
        cols = self._cols
        if cols is not None:
            cols.derivations[self._ix] += 1.0

    def record(self) -> MemoryRecord:
        """The frozen record (with history and derivations), cached until a change."""
        rec = self._rec
        if rec is None:
            rec = MemoryRecord(*_BEFORE(self), tuple(sorted(self._kids)), *_AFTER(self))
            _set(self, "_rec", rec)
            _set(self, "_bare", None)  # derived from the previous _rec: stale
        return rec

    def bare(self) -> MemoryRecord:
        """The frozen record without status history (the same object when it has none)."""
        full = self._rec
        rec = self._bare
        if full is None or rec is None:
            rec = full = self.record()
            if full.status_history:
                rec = replace(full, status_history=())
            _set(self, "_bare", rec)
        return rec

    @classmethod
    def from_record(cls, rec: MemoryRecord) -> _Row:
        row = cls()
        for f in _ROW_FIELDS:
            setattr(row, f, getattr(rec, f))
        row.status_history = tuple(rec.status_history)
        return row

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _ROW_FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Row:
        row = cls()
        for f in _ROW_FIELDS:  # fields added later default (logs written before them)
            setattr(row, f, data[f] if f in data else _DEFAULTS[f])
        for f in _TUPLES:
            setattr(row, f, tuple(getattr(row, f)))
        row.status_history = tuple(StatusChange(*h) for h in row.status_history)
        if not isinstance(row.volatility, str | None):
            row.volatility = None  # numeric volatility of logs written before classes
        return row


def _event_to_json(e: LineageEvent) -> list[Any]:
    return [int(e.cursor), e.type, e.memory_id, e.at, e.root_id, e.status, e.previous_status,
            e.reason, e.successor, list(e.affected), e.version]


def _event_from_json(ns: str, d: list[Any]) -> LineageEvent:
    return LineageEvent(cursor=str(d[0]), type=d[1], namespace=ns, memory_id=d[2], at=d[3],
                        root_id=d[4], status=d[5], previous_status=d[6], reason=d[7],
                        successor=d[8], affected=tuple(d[9]), version=d[10])


class _ReviewQueue:
    """Next review time per id: a heap of (time, id) with lazy deletion plus a dict.

    ``schedule`` is O(log n); ``due`` pops the due entries (dropping stale ones:
    rescheduled or unscheduled ids), then pushes the live ones back, so it costs
    O((k + stale) log n) for k results and never looks at an entry that is not due.
    Stale entries are each dropped once; the heap is rebuilt from the dict when they
    outnumber the live ones, so it stays O(n).  ``examined`` counts popped entries
    (tests use it to check that non-due memories are never touched).
    """

    __slots__ = ("examined", "heap", "next")

    def __init__(self) -> None:
        self.heap: list[tuple[float, str]] = []
        self.next: dict[str, float] = {}
        self.examined = 0

    def __len__(self) -> int:
        return len(self.next)

    def schedule(self, memory_id: str, at: float) -> None:
        if self.next.get(memory_id) == at:
            return
        self.next[memory_id] = at
        heapq.heappush(self.heap, (at, memory_id))
        if len(self.heap) > 2 * len(self.next) + 64:
            self.rebuild()

    def unschedule(self, memory_id: str) -> bool:
        return self.next.pop(memory_id, None) is not None

    def rebuild(self) -> None:
        self.heap = [(t, i) for i, t in self.next.items()]
        heapq.heapify(self.heap)

    def due(self, now: float, limit: int) -> list[str]:
        heap, nxt = self.heap, self.next
        out: list[tuple[float, str]] = []
        seen: set[str] = set()
        while heap and len(out) < limit and heap[0][0] <= now:
            at, memory_id = heapq.heappop(heap)
            self.examined += 1
            if nxt.get(memory_id) != at or memory_id in seen:
                continue  # stale (rescheduled/unscheduled) or a duplicate entry: drop it
            seen.add(memory_id)
            out.append((at, memory_id))
        for entry in out:
            heapq.heappush(heap, entry)
        return [memory_id for _, memory_id in out]


@dataclass
class _Space:
    """Everything one namespace owns."""

    rows: dict[str, _Row] = field(default_factory=dict)
    claims: dict[tuple[str, str], str] = field(default_factory=dict)
    counters: dict[str, list[float]] = field(default_factory=dict)
    groups: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """Claim groups: every id ever recorded with (subject, attribute), in record order."""
    sources: dict[str, list[float]] = field(default_factory=dict)
    """Source statistics: creator id -> [ok, bad]."""
    review: _ReviewQueue = field(default_factory=_ReviewQueue)
    cols: _Columns = field(default_factory=_Columns)
    """Score inputs of every row, as numpy columns (``score_columns``)."""
    events: deque[LineageEvent] = field(default_factory=deque)
    seq: int = 0
    """Sequence number (cursor) of the last event ever appended in this namespace."""


class EmbeddedStore(LineageStore):
    """Thread-safe in-process backend; pass ``data_dir`` to survive restarts."""

    kind = "embedded"
    shares_records = True

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *,
                 clock: Clock = system_clock, limits: StoreLimits | None = None,
                 fsync: bool = False):
        super().__init__(clock=clock, limits=limits)
        self._lock = threading.RLock()
        self._snapshot = self._lock  # traversals hold the lock: a consistent snapshot
        self._changed = threading.Condition(self._lock)
        self._spaces: dict[str, _Space] = {}
        self._fsync = fsync
        self._log: IO[str] | None = None
        self._dir = Path(data_dir) if data_dir is not None else None
        self._generation = 0
        self.epoch = 0
        self.access_epoch = 0
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            with self._lock:
                self._open_dir()

    # -- persistence ---------------------------------------------------------------

    def _log_path(self, generation: int) -> Path:
        assert self._dir is not None
        return self._dir / f"log.{generation}.jsonl"

    def _open_dir(self) -> None:
        assert self._dir is not None
        snapshot = self._dir / "snapshot.json"
        if snapshot.exists():
            data = json.loads(snapshot.read_text(encoding="utf-8"))
            self._generation = data["generation"]
            for ns, sp in data["spaces"].items():
                space = self._space(ns)
                # All rows first: add_dependencies may have linked a row to a later one.
                rows = [_Row.from_json(row) for row in sp["rows"]]
                for row in rows:
                    space.rows[row.id] = row
                for row in rows:
                    self._link(ns, row)
                space.claims = {(s, a): i for s, a, i in sp["claims"]}
                for name, times in sp["counters"].items():
                    space.counters[name] = list(times)
                space.sources = {src: list(okbad) for src, okbad in
                                 sp.get("sources", {}).items()}
                for memory_id, at in sp.get("review", ()):
                    space.review.next[memory_id] = at
                space.review.rebuild()
                space.seq = sp.get("seq", 0)
                space.events.extend(_event_from_json(ns, e) for e in sp.get("events", ()))
        path = self._log_path(self._generation)
        if path.exists():
            self._replay(path)
        self._log = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the store

    def _replay(self, path: Path) -> None:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
        good = 0
        for line in lines:
            if not line:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                break  # torn tail from a crash mid-write: everything before it is intact
            self._apply(op)
            good += len(line) + 1
        if good < path.stat().st_size:
            with open(path, "r+b") as fh:
                fh.truncate(good)

    def _append(self, op: dict[str, Any]) -> None:
        """Write-ahead: the op is on disk (OS buffers, or fsynced) before it is applied.
        Every write passes here, under the lock: the write counters move here too."""
        kind = op["o"]
        if kind == "A":
            self.access_epoch += 1  # type: ignore[operator]
        elif kind not in _SCHEDULE_OPS:
            self.epoch += 1  # type: ignore[operator]
        if self._log is None:
            return
        self._log.write(json.dumps(op, separators=(",", ":")) + "\n")
        self._log.flush()
        if self._fsync:
            os.fsync(self._log.fileno())

    def _apply(self, op: dict[str, Any]) -> None:
        kind = op["o"]
        if kind == "r":
            row = _Row.from_json(op["r"])
            at = op.get("a", row.created_at)
            self._apply_record(op["n"], row, at,
                               op.get("v", at + self.limits.first_review_seconds))
        elif kind == "s":
            self._apply_status(op["n"], op["i"], Status(op["t"]), op["w"], op["u"], op["a"])
        elif kind == "d":
            self._apply_add(op["n"], op["i"], op["d"], op["a"])
        elif kind == "u":
            self._apply_update(op["n"], op["i"], op["c"], op.get("a", 0.0))
        elif kind == "A":
            self._apply_accesses(op["n"], op["m"])
        elif kind == "a":  # logs written before batched access recording
            self._apply_accesses(op["n"], dict.fromkeys(op["i"], (1, op["a"])))
        elif kind == "c":
            self._apply_counter(op["n"], op["k"], op["a"])
        elif kind == "f":
            self._apply_feedback(op["n"], op["i"], op["k"])
        elif kind == "v":
            self._apply_schedule(op["n"], op["t"], op["a"])
        elif kind == "x":
            self._apply_unschedule(op["n"], op["i"])

    def compact(self) -> None:
        """Snapshot the whole state and start a new, empty log generation."""
        if self._dir is None:
            return
        with self._lock:
            gen = self._generation + 1
            # Rows keep insertion order, so dependencies precede their dependents.
            data = {"generation": gen, "spaces": {
                ns: {"rows": [row.to_json() for row in sp.rows.values()],
                     "claims": [[s, a, i] for (s, a), i in sp.claims.items()],
                     "counters": sp.counters, "seq": sp.seq,
                     "sources": sp.sources,
                     "review": [[i, t] for i, t in sp.review.next.items()],
                     "events": [_event_to_json(e) for e in sp.events]}
                for ns, sp in self._spaces.items()}}
            tmp = self._dir / "snapshot.json.tmp"
            tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
            new_log = open(self._log_path(gen), "a", encoding="utf-8")  # noqa: SIM115
            os.replace(tmp, self._dir / "snapshot.json")
            old = self._log_path(self._generation)
            if self._log is not None:
                self._log.close()
            self._log, self._generation = new_log, gen
            old.unlink(missing_ok=True)

    def maybe_compact(self, max_log_bytes: int) -> bool:
        """Compact when the current log generation has grown past `max_log_bytes`
        (the server calls this periodically: every access flush is a log line)."""
        with self._lock:
            if self._log is None or os.fstat(self._log.fileno()).st_size <= max_log_bytes:
                return False
        self.compact()
        return True

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    # -- apply functions (shared by live calls and replay) ----------------------------

    def _space(self, ns: str) -> _Space:
        sp = self._spaces.get(ns)
        if sp is None:
            sp = self._spaces[ns] = _Space(
                events=deque(maxlen=max(1, self.limits.event_retention)))
        return sp

    def _emit(self, ns: str, sp: _Space, kind: EventType, memory_id: str, at: float,
              **fields: Any) -> None:
        """Append one event (caller holds the lock) and wake the waiting readers."""
        sp.seq += 1
        sp.events.append(LineageEvent(cursor=str(sp.seq), type=kind.value, namespace=ns,
                                      memory_id=memory_id, at=at, **fields))
        self._changed.notify_all()

    @staticmethod
    def _push_history(row: _Row, entry: StatusChange, cap: int) -> None:
        history = (*row.status_history, entry)
        if len(history) > cap:
            history = history[len(history) - cap:]
        row.status_history = history

    def _history(self, row: _Row, entry: StatusChange) -> None:
        self._push_history(row, entry, self.limits.history_length)

    def _link(self, ns: str, row: _Row) -> None:
        """Index a row: derivation links of its dependencies, its claim (no event)."""
        sp = self._space(ns)
        sp.rows[row.id] = row
        if row._cols is None:
            sp.cols.attach(row)
        for dep in row.dependencies:
            sp.rows[dep].adopt(row.id)  # type: ignore[index]
        if row.subject is not None:
            sp.claims[(row.subject, row.attribute)] = row.id
            sp.groups.setdefault((row.subject, row.attribute), []).append(row.id)

    def _compare_claims(self, sp: _Space, row: _Row) -> None:
        """Confirm/contradict the new row against the live members of its claim group."""
        members = sp.groups.get((row.subject, row.attribute))  # type: ignore[arg-type]
        if not members:
            return
        cx, value, rows, sources = row.creator_id, row.value, sp.rows, sp.sources
        for member_id in members:
            y = rows[member_id]
            cy = y.creator_id
            if y.status not in _PEERS or cy == cx:
                continue
            name, k = ("confirmed_by", 0) if y.value == value else ("contradicted_by", 1)
            theirs = getattr(y, name)
            if cx not in theirs:
                setattr(y, name, (*theirs, cx))
            ours = getattr(row, name)
            if cy not in ours:
                setattr(row, name, (*ours, cy))
            sources.setdefault(cx, [0.0, 0.0])[k] += 1.0
            sources.setdefault(cy, [0.0, 0.0])[k] += 1.0
        # The new memory's own lists are sorted (members' lists are in arrival order).
        row.confirmed_by = tuple(sorted(row.confirmed_by))
        row.contradicted_by = tuple(sorted(row.contradicted_by))

    def _apply_record(self, ns: str, row: _Row, at: float, review_at: float) -> None:
        self._compare_claims(self._space(ns), row)
        self._link(ns, row)
        self._spaces[ns].review.schedule(row.id, review_at)
        taint = row.status_history[-1] if row.status_history else None
        self._emit(ns, self._spaces[ns], EventType.RECORDED, row.id, at, status=row.status,
                   version=row.version, affected=tuple(row.dependencies),
                   root_id=taint.root_id if taint else None,
                   reason=taint.reason if taint else "")

    def _apply_status(self, ns: str, memory_id: str, target: Status, reason: str,
                      successor: str | None, now: float) -> tuple[list[str], int]:
        sp = self._spaces[ns]
        row = sp.rows[memory_id]
        previous = row.status
        self._history(row, StatusChange(now, previous, target.value, reason, memory_id))
        row.status = target.value
        row.version += 1
        if target is Status.SUPERSEDED:
            row.successor = successor
        claim = (row.subject, row.attribute)
        if target in CLAIM_RELEASE and sp.claims.get(claim) == memory_id:  # type: ignore[arg-type]
            del sp.claims[claim]  # type: ignore[arg-type]
        self._emit(ns, sp, EventType.STATUS_CHANGED, memory_id, now, status=target.value,
                   previous_status=previous, reason=reason, version=row.version,
                   successor=successor if target is Status.SUPERSEDED else None)
        if target not in CASCADE_TRIGGERS:
            return [], 0
        why = cascade_reason(target, reason)
        affected, visited = self._mark_descendants(sp, memory_id, memory_id, why, now)
        if affected:
            self._emit(ns, sp, EventType.CASCADED, memory_id, now, root_id=memory_id,
                       status=target.value, reason=why, affected=tuple(affected))
        return affected, visited

    def _mark_descendants(self, sp: _Space, start: str, root: str, why: str,
                          now: float) -> tuple[list[str], int]:
        """BFS over derivations from ``start``: cost is the descendants, never the store.

        Returns the ids re-marked pending_verification (BFS order) and how many
        descendants were visited."""
        rows, limit = sp.rows, self.limits.history_length
        seen = {start}
        queue = deque(rows[start]._kids)
        affected: list[str] = []
        while queue:
            child = queue.popleft()
            if child in seen:
                continue
            seen.add(child)
            r = rows[child]
            if r.status in _MARKS:
                r.mark(_PENDING, StatusChange(now, r.status, _PENDING, why, root), limit)
                affected.append(child)
            queue.extend(r._kids)
        return affected, len(seen) - 1

    def _apply_add(self, ns: str, memory_id: str, deps: list[str], now: float) -> None:
        sp = self._spaces[ns]
        row = sp.rows[memory_id]
        row.dependencies = tuple(row.dependencies) + tuple(deps)
        row.version += 1
        for dep in deps:
            sp.rows[dep].adopt(memory_id)
        self._emit(ns, sp, EventType.UPDATED, memory_id, now, version=row.version)
        tainted = next((d for d in deps if sp.rows[d].status in TAINTED), None)
        if tainted is not None and row.status in _MARKS:
            why = f"dependency {sp.rows[tainted].status}"
            previous = row.status
            self._history(row, StatusChange(now, previous, _PENDING, why, tainted))
            row.status = _PENDING
            self._emit(ns, sp, EventType.STATUS_CHANGED, memory_id, now, root_id=tainted,
                       status=_PENDING, previous_status=previous, reason=why,
                       version=row.version)
            affected, _ = self._mark_descendants(sp, memory_id, tainted, why, now)
            if affected:
                self._emit(ns, sp, EventType.CASCADED, memory_id, now, root_id=tainted,
                           status=sp.rows[tainted].status, reason=why,
                           affected=tuple(affected))

    def _apply_update(self, ns: str, memory_id: str, changes: dict[str, Any],
                      now: float) -> None:
        sp = self._spaces[ns]
        row = sp.rows[memory_id]
        for name, value in changes.items():
            setattr(row, name, tuple(value) if name == "tags" else value)
        row.version += 1
        self._emit(ns, sp, EventType.UPDATED, memory_id, now, version=row.version)

    def _locate(self, ids: list[str]) -> dict[str, str]:
        with self._lock:
            found: dict[str, str] = {}
            for ns, sp in self._spaces.items():
                for memory_id in ids:
                    if memory_id not in found and memory_id in sp.rows:
                        found[memory_id] = ns
            return found

    def _apply_accesses(self, ns: str, accesses: dict[str, Any]) -> int:
        """``accesses``: id -> (count, time); only the touched rows' caches drop."""
        sp = self._spaces.get(ns)
        if sp is None:
            return 0
        hit = 0
        rows = sp.rows
        for memory_id, (count, at) in accesses.items():
            row = rows.get(memory_id)
            if row is not None:
                row.access_count += count
                if row.last_access is None or at > row.last_access:
                    row.last_access = at
                hit += 1
        return hit

    def _apply_feedback(self, ns: str, ids: list[str], success: bool) -> int:
        sp = self._spaces.get(ns)
        if sp is None:
            return 0
        hit, k = 0, 0 if success else 1
        for memory_id in ids:
            row = sp.rows.get(memory_id)
            if row is None:
                continue
            if success:
                row.uses_ok += 1
            else:
                row.uses_failed += 1
            sp.sources.setdefault(row.creator_id, [0.0, 0.0])[k] += 1.0
            hit += 1
        return hit

    def _apply_schedule(self, ns: str, times: dict[str, float], now: float) -> int:
        sp = self._spaces.get(ns)
        if sp is None:
            return 0
        hit = 0
        for memory_id, at in times.items():
            row = sp.rows.get(memory_id)
            if row is None:
                continue
            sp.review.schedule(memory_id, at)
            row.reviewed_at = now
            hit += 1
        return hit

    def _apply_unschedule(self, ns: str, ids: list[str]) -> int:
        sp = self._spaces.get(ns)
        if sp is None:
            return 0
        return sum(sp.review.unschedule(memory_id) for memory_id in ids)

    def _apply_counter(self, ns: str, name: str, now: float) -> None:
        times = self._space(ns).counters.setdefault(name, [])
        bisect.insort(times, now)
        cut = bisect.bisect_left(times, now - self.limits.counter_retention_seconds)
        if cut:
            del times[:cut]

    # -- primitives -----------------------------------------------------------------

    def _get_row(self, ns: str, memory_id: str) -> _Row:
        sp = self._spaces.get(ns)
        row = sp.rows.get(memory_id) if sp is not None else None
        if row is None:
            raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="id")
        return row

    def record(self, rec: MemoryRecord, *, now: float | None = None) -> MemoryRecord:
        at = self._now(now)
        rec = validate_new(rec, now=at, limits=self.limits)
        with self._lock:
            sp = self._spaces.get(rec.namespace)
            rows = sp.rows if sp is not None else {}
            if rec.id in rows:
                raise AlreadyExistsError(f"memory {rec.id!r} already exists", field="id")
            taint: tuple[str, str] | None = None
            for i, dep in enumerate(rec.dependencies):
                parent = rows.get(dep)  # type: ignore[arg-type]
                if parent is None:
                    raise UnknownDependencyError(
                        f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]")
                if taint is None and parent.status in TAINTED:
                    taint = (dep, parent.status)  # type: ignore[assignment]
            row = _Row.from_record(rec)
            if taint is not None and row.status != _PENDING:
                row.status_history = (*row.status_history, StatusChange(
                    at, row.status, _PENDING, f"dependency {taint[1]}", taint[0]))
                row.status = _PENDING
            review_at = at + self.limits.first_review_seconds
            self._append({"o": "r", "n": rec.namespace, "r": row.to_json(), "a": at,
                          "v": review_at})
            self._apply_record(rec.namespace, row, at, review_at)
            return row.record()

    def _bulk_load(self, namespace: str, records: Iterable[MemoryRecord], *,
                   review_at: float) -> int:
        """Benches and tests only: insert many plain records fast, bypassing validation,
        dependency checks, claim comparison, events and the op log.

        Each record must be new, valid and without claim; its dependencies (if any)
        must be earlier records (their derivations are linked, the records'
        ``derivations`` ignored); all are scheduled for review at ``review_at``.  The
        score columns are kept as for any other write.  Refused on a persistent store (the rows
        would not be in its log).  Returns how many were loaded."""
        if self._dir is not None:
            raise RuntimeError("_bulk_load is for in-memory stores only")
        with self._lock:
            self.epoch += 1  # type: ignore[operator]
            sp = self._space(namespace)
            rows, nxt, attach = sp.rows, sp.review.next, sp.cols.attach
            n = 0
            for rec in records:
                row = _Row.from_record(rec)
                rows[row.id] = row
                attach(row)
                for dep in row.dependencies:  # earlier records of this load: derivations
                    rows[dep].adopt(row.id)  # type: ignore[index]
                nxt[row.id] = review_at
                n += 1
            sp.review.rebuild()
            return n

    def _change_status(self, namespace: str, memory_id: str, target: Status, *, reason: str,
                       successor: str | None, expected_version: int | None, now: float,
                       only_from: frozenset[Status] | None) -> CascadeResult:
        with self._lock:
            row = self._get_row(namespace, memory_id)
            if expected_version is not None:
                _check_version(memory_id, row.version, expected_version)
            if only_from is not None and Status(row.status) not in only_from:
                raise TransitionError(
                    f"memory {memory_id!r} is {row.status}, only "
                    f"{'/'.join(sorted(only_from))} can become {target.value} this way",
                    current=row.status, requested=target.value)
            check_transition(row.status, target, memory_id)
            if successor is not None and successor not in self._spaces[namespace].rows:
                raise NotFoundError(f"no memory {successor!r} in this namespace",
                                    field="successor")
            self._append({"o": "s", "n": namespace, "i": memory_id, "t": target.value,
                          "w": reason, "u": successor, "a": now})
            affected, visited = self._apply_status(namespace, memory_id, target, reason,
                                                   successor, now)
            root = row.record()
            return CascadeResult(root=root, marked=len(affected), visited=visited,
                                 affected=tuple(affected))

    def _update(self, namespace: str, memory_id: str, expected_version: int,
                changes: dict[str, Any], now: float) -> MemoryRecord:
        with self._lock:
            row = self._get_row(namespace, memory_id)
            _check_version(memory_id, row.version, expected_version)
            self._append({"o": "u", "n": namespace, "i": memory_id, "c": changes, "a": now})
            self._apply_update(namespace, memory_id, changes, now)
            return row.record()

    def _add_dependencies(self, namespace: str, memory_id: str, deps: tuple[str, ...],
                          expected_version: int, now: float) -> MemoryRecord:
        with self._lock:
            row = self._get_row(namespace, memory_id)
            _check_version(memory_id, row.version, expected_version)
            deps = check_dependencies(deps, namespace=namespace, memory_id=memory_id,
                                      limits=self.limits, existing=tuple(row.dependencies))
            rows = self._spaces[namespace].rows
            for i, dep in enumerate(deps):
                if dep not in rows:
                    raise UnknownDependencyError(f"no memory {dep!r} in this namespace",
                                                 field=f"dependencies[{i}]")
            seen: set[str] = set()
            for i, dep in enumerate(deps):  # a cycle iff memory_id is an ancestor of dep
                stack = [dep]
                while stack:
                    node = stack.pop()
                    if node == memory_id:
                        raise CycleError(f"{memory_id!r} is an ancestor of {dep!r}",
                                         field=f"dependencies[{i}]")
                    if node not in seen:
                        seen.add(node)
                        stack.extend(rows[node].dependencies)  # type: ignore[arg-type]
            self._append({"o": "d", "n": namespace, "i": memory_id, "d": list(deps), "a": now})
            self._apply_add(namespace, memory_id, list(deps), now)
            return row.record()

    def _load(self, namespace: str, ids: list[str],
              with_history: bool = True) -> dict[str, MemoryRecord]:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return {}
            rows = sp.rows
            out: dict[str, MemoryRecord] = {}
            if with_history:
                for memory_id in ids:
                    row = rows.get(memory_id)
                    if row is not None:
                        out[memory_id] = row._rec or row.record()
            else:
                for memory_id in ids:
                    row = rows.get(memory_id)
                    if row is not None:
                        out[memory_id] = (row._rec and row._bare) or row.bare()
            return out

    def score_columns(self, namespace: str, ids: Iterable[str]) -> ScoreColumns:
        """Columnar: ``np.take`` on the namespace's columns (see ``_Columns``).  A batch
        of distinct stored ids (the sweep's) skips id validation: they
        were validated when recorded (``_Columns.rows_of``); any other batch is checked
        as every store call checks it."""
        ns = self._ns(namespace)
        if type(ids) is list and len(ids) <= MAX_BATCH_IDS:
            with self._lock:
                sp = self._spaces.get(ns)
                at = sp.cols.rows_of(ids) if sp is not None else None
                if at is not None:
                    return sp.cols.take(list(ids), at)  # type: ignore[union-attr]
        wanted = self._ids(ids)
        with self._lock:
            sp = self._spaces.get(ns)
            if sp is None:
                return score_columns_of(())
            return sp.cols.take(wanted)

    def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None:
        with self._lock:
            sp = self._spaces.get(namespace)
            return sp.claims.get((subject, attribute)) if sp is not None else None

    def _record_accesses(self, namespace: str,
                         accesses: dict[str, tuple[int, float]]) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return 0
            rows = sp.rows
            live = {i: a for i, a in accesses.items() if i in rows}
            if not live:
                return 0
            self._append({"o": "A", "n": namespace, "m": live})
            return self._apply_accesses(namespace, live)

    def _incr_counter(self, namespace: str, name: str, now: float) -> None:
        with self._lock:
            self._append({"o": "c", "n": namespace, "k": name, "a": now})
            self._apply_counter(namespace, name, now)

    def _claim_group(self, namespace: str, subject: str,
                     attribute: str) -> list[MemoryRecord]:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return []
            return [sp.rows[i].record() for i in sp.groups.get((subject, attribute), ())]

    def _source_stats(self, namespace: str,
                      sources: list[str]) -> dict[str, tuple[float, float]]:
        with self._lock:
            sp = self._spaces.get(namespace)
            known = sp.sources if sp is not None else {}
            out: dict[str, tuple[float, float]] = {}
            for source in sources:
                ok, bad = known.get(source, (0.0, 0.0))
                out[source] = (ok, bad)
            return out

    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = [i for i in ids if sp is not None and i in sp.rows]
            if not live:
                return 0
            self._append({"o": "f", "n": namespace, "i": live, "k": success, "a": now})
            return self._apply_feedback(namespace, live, success)

    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]:
        with self._lock:
            sp = self._spaces.get(namespace)
            return sp.review.due(now, limit) if sp is not None else []

    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = {i: t for i, t in times.items() if sp is not None and i in sp.rows}
            if not live:
                return 0
            self._append({"o": "v", "n": namespace, "t": live, "a": now})
            return self._apply_schedule(namespace, live, now)

    def _unschedule_review(self, namespace: str, ids: list[str]) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = [i for i in ids if sp is not None and i in sp.review.next]
            if not live:
                return 0
            self._append({"o": "x", "n": namespace, "i": live})
            return self._apply_unschedule(namespace, live)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(ns for ns, sp in self._spaces.items() if sp.rows)

    def _count_change(self, namespace: str, name: str, window: float, now: float) -> float:
        with self._lock:
            sp = self._spaces.get(namespace)
            times = sp.counters.get(name) if sp is not None else None
            return change_of(times, window, now) if times else math.inf

    def _count(self, namespace: str, name: str, since: float, now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            times = sp.counters.get(name) if sp is not None else None
            return count_in(times, since, now) if times else 0

    # -- lineage events ---------------------------------------------------------------

    def _parse_cursor(self, cursor: str) -> str | None:
        return str(int(cursor)) if _CURSOR_RE.fullmatch(cursor) else None

    def _events_locked(self, namespace: str, after: str | None,
                       limit: int) -> tuple[list[LineageEvent], str]:
        sp = self._spaces.get(namespace)
        seq = sp.seq if sp is not None else 0
        retained = len(sp.events) if sp is not None else 0
        first = seq - retained + 1  # sequence number of the oldest retained event
        if after is None:
            start = first
        else:
            position = int(after)
            if position > seq:
                raise CursorExpiredError(
                    f"cursor {after} is ahead of this namespace's log (at {seq}): the store "
                    "was reset or the cursor is not from it; re-sync")
            if position < first - 1:
                raise CursorExpiredError(
                    f"events after cursor {after} were dropped (oldest retained is {first}); "
                    "re-sync")
            start = position + 1
        if sp is None or start > seq:
            return [], str(seq) if after is None else after
        events = sp.events
        lo = start - first
        hi = min(lo + limit, retained)
        out = [events[i] for i in range(lo, hi)]
        return out, out[-1].cursor

    def _events(self, namespace: str, after: str | None,
                limit: int) -> tuple[list[LineageEvent], str]:
        with self._lock:
            return self._events_locked(namespace, after, limit)

    def _wait_events(self, namespace: str, after: str | None, limit: int,
                     timeout: float) -> tuple[list[LineageEvent], str]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                events, cursor = self._events_locked(namespace, after, limit)
                remaining = deadline - time.monotonic()
                if events or remaining <= 0:
                    return events, cursor
                self._changed.wait(remaining)

    def _latest_cursor(self, namespace: str) -> str:
        with self._lock:
            sp = self._spaces.get(namespace)
            return str(sp.seq if sp is not None else 0)
