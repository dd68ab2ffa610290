"""Decisions as the sidecar returns and remembers them.

`DecisionRecord` adds identity (decision id, operation, memories, time, policy
version) to the evaluator's `Decision`. `DecisionJournal` keeps the recent ones
per memory for Explain and by id for Feedback, bounded, in this process; with a
`queue` it also queues each for the store (`decision_store.DecisionKeeper`, which
writes them in batches off the request path, where any sidecar finds them after a
restart); the JSON decision log (`decision_log.py`, hash-chained) is the durable trail.
"""

from __future__ import annotations

import itertools
import os
import threading
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from memlineage_dsl.decision import Decision

from memlineage.engine.decision_log import DecisionLog as DecisionLog  # re-export (engine/core.py)


class DecisionRecord(NamedTuple):
    """A decision as issued. A named tuple, not a frozen dataclass: FilterRank makes
    one per candidate, and a frozen dataclass's `__init__` (one `object.__setattr__`
    per field) costs ~3.5x as much to make."""

    decision_id: str
    decision: Decision
    namespace: str
    operation: str
    memory_ids: tuple[str, ...]
    actor: str
    decided_at: float
    policy_version: str
    grants_used: tuple[str, ...] = ()  # act: grants one use of which it consumed
    input: str | None = None  # what it read, as JSON (`decision_input`), when captured


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """Everything of a `DecisionRecord` but its id and time: what every issue of one
    reused decision shares (kept once, not once per issue)."""

    decision: Decision
    namespace: str
    operation: str
    memory_ids: tuple[str, ...]
    actor: str
    policy_version: str
    input: str | None = None  # what the decision read, when captured

    def record(self, decision_id: str, decided_at: float) -> DecisionRecord:
        return DecisionRecord(
            decision_id,
            self.decision,
            self.namespace,
            self.operation,
            self.memory_ids,
            self.actor,
            decided_at,
            self.policy_version,
            input=self.input,
        )


_PREFIX = os.urandom(4).hex()
_serial = itertools.count(1)  # next() on a count is atomic in CPython: no lock needed
# The serial leaves the process masked: ids of one tenant's consecutive decisions must
# not tell how many decisions (other tenants') came between them. A keyed bijection of
# 64 bits: add a random key, then splitmix64's finalizer (xor-shifts and odd
# multipliers, each invertible), then xor a second key; the journal inverts it. (A
# lone multiply leaves near-constant steps between consecutive ids for some keys.)
_MASK = (1 << 64) - 1
_ADD = int.from_bytes(os.urandom(8), "big")
_XOR = int.from_bytes(os.urandom(8), "big")
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_U1, _U2 = pow(_M1, -1, 1 << 64), pow(_M2, -1, 1 << 64)


def _unshift(y: int, k: int) -> int:
    """The x with ``x ^ (x >> k) == y`` (64 bits)."""
    x = y
    for _ in range(64 // k):
        x = y ^ (x >> k)
    return x


def _token(serial: int) -> str:
    x = (serial + _ADD) & _MASK
    x = ((x ^ (x >> 30)) * _M1) & _MASK
    x = ((x ^ (x >> 27)) * _M2) & _MASK
    return f"{(x ^ (x >> 31)) ^ _XOR:016x}"


def _untoken(token: int) -> int:
    x = _unshift(token ^ _XOR, 31)
    x = _unshift((x * _U2) & _MASK, 27)
    x = _unshift((x * _U1) & _MASK, 30)
    return (x - _ADD) & _MASK


def decision_id_of(now: float, serial: int) -> str:
    """Unique across sidecars: time (ms), a per-process random prefix, the serial
    (masked: it says nothing of the decisions issued between two ids)."""
    return f"d{int(now * 1000):x}-{_PREFIX}-{_token(serial)}"


def issue_decision_id(now: float) -> tuple[str, int]:
    """A new decision id and its serial (the journal's slot)."""
    serial = next(_serial)
    return decision_id_of(now, serial), serial


def _tokens(serials: list[int]) -> list[str]:
    """`_token` of each, in numpy's wrapping uint64 arithmetic: one pass for a batch."""
    x = np.array(serials, dtype=np.uint64) + np.uint64(_ADD)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_M2)
    x = (x ^ (x >> np.uint64(31))) ^ np.uint64(_XOR)
    # big-endian bytes in hex are the 16-digit tokens end to end: one hex(), then slices
    digits = x.astype(">u8").tobytes().hex()
    return [digits[i : i + 16] for i in range(0, len(digits), 16)]


def issue_decision_ids(now: float, count: int) -> tuple[list[str], list[int]]:
    """`count` new decision ids (one batch) and their serials."""
    head = f"d{int(now * 1000):x}-{_PREFIX}-"
    serials = [next(_serial) for _ in range(count)]
    if count < 8:  # numpy's per-call cost is more than a few ids'
        return [head + _token(n) for n in serials], serials
    return [head + t for t in _tokens(serials)], serials


def _serial_of(decision_id: str) -> int | None:
    """The serial a decision id of this process ends with (`issue_decision_id`)."""
    head, _, token = decision_id.rpartition("-")
    if not head.endswith(_PREFIX) or len(token) != 16:
        return None
    try:
        return _untoken(int(token, 16))
    except ValueError:
        return None


_MANY = 0x5DEECE66D
"""A slot's key for a decision on other than one memory (an act's)."""

JOURNAL_MOST = 100_000
"""A namespace's journal keeps at most this many decisions (fewer when the store keeps
fewer per namespace, `decision_retention`): with no data dir it is their only copy."""
JOURNAL_TOTAL = 200_000
"""... and at most this many in all namespaces (at least one namespace's worth): ~550 B
a decision, ~110 MB. Each namespace's ring alone was bounded: a token of 20 namespaces
filling each with FilterRanks held 5.5 MB a namespace, of 1,000 namespaces 5.5 GB (an
outside audit)."""
JOURNAL_BESIDE_STORE = 1_000
"""... and at most this many when the store keeps them too (Redis, a data dir): Explain
and Feedback flush to the store first and read it, so the journal only saves a read;
a ring per namespace of `decision_retention` (~400 B a decision) cost ~4 MB for each
namespace ever served (a review)."""


def _key(memory_ids: Sequence[str]) -> int:
    """A slot's key: its decision's one memory id's hash (equal ids, equal keys; a key
    shared by chance only costs reading that slot), or `_MANY`. A string caches its
    hash: one lookup."""
    return hash(memory_ids[0]) if len(memory_ids) == 1 else _MANY


class _Ring:
    """One namespace's newest `size` decisions: slot `position % size`, the positions
    counted per namespace, so no other namespace's decisions move this one's on.
    Grown as decisions come (a namespace with few holds few), then rewritten in turn.
    `where` finds a decision's slot by its serial; writes and reads hold `lock`."""

    __slots__ = ("keys", "lock", "next", "serials", "size", "slots", "times", "where")

    def __init__(self, size: int) -> None:
        self.size = size
        self.next = 0  # the next decision's position
        self.slots: list[DecisionRecord | DecisionContext] = []
        self.serials = array("q")  # per slot: its decision's serial
        self.times = array("d")  # per slot: when a reused one (a context) was issued
        self.keys = array("q")  # per slot: `_key` of its memory ids
        self.where: dict[int, int] = {}  # serial -> slot
        self.lock = threading.Lock()

    def place(
        self, serial: int, entry: DecisionRecord | DecisionContext, key: int, at: float
    ) -> int:
        """Keep `entry` in the next slot (the caller holds `lock`); 1 if the ring grew."""
        pos = self.next
        self.next = pos + 1
        if pos < self.size:  # still growing: slot `pos` is new
            self.slots.append(entry)
            self.serials.append(serial)
            self.times.append(at)
            self.keys.append(key)
            self.where[serial] = pos
            return 1
        i = pos % self.size
        self.where.pop(self.serials[i], None)
        self.slots[i] = entry
        self.serials[i] = serial
        self.times[i] = at
        self.keys[i] = key
        self.where[serial] = i
        return 0

    def held(self) -> int:
        return len(self.slots)

    def keep_newest(self, count: int) -> int:
        """Keep only the newest `count` decisions (the caller holds `lock`), in slots
        0 to count - 1, growing again from there; how many were dropped."""
        order = sorted(range(len(self.slots)), key=self.serials.__getitem__)[-count:]
        dropped = len(self.slots) - len(order)
        self.slots = [self.slots[i] for i in order]
        self.serials = array("q", (self.serials[i] for i in order))
        self.times = array("d", (self.times[i] for i in order))
        self.keys = array("q", (self.keys[i] for i in order))
        self.where = {serial: i for i, serial in enumerate(self.serials)}
        self.next = len(order)
        return dropped

    def at(self, i: int) -> DecisionRecord:
        return _record(self.serials[i], self.slots[i], self.times[i])


def _record(serial: int, entry: DecisionRecord | DecisionContext, when: float) -> DecisionRecord:
    """A slot's decision: a record as kept, or a reused one's rebuilt from its context."""
    if type(entry) is DecisionContext:
        return entry.record(decision_id_of(when, serial), when)
    return entry  # type: ignore[return-value]  # `type() is` does not narrow: a record here


class DecisionJournal:
    """The newest decisions of each namespace in this process, for Explain and Feedback.

    Each namespace has a ring of its own (`_Ring`, at most `limit` decisions), so how
    long a decision stays tells nothing of other namespaces' volume (before: one ring
    of 100,000 for all, so one tenant's traffic ended another's decisions early, and
    the moment a marker decision left told the total; an outside audit). Adding is a
    few list and array stores under the ring's lock; finding one by id a parse and a
    dict lookup. A reused decision is kept as its shared `DecisionContext` plus its
    serial and time (nothing allocated per issue but, with a `queue`, the (serial,
    context, time) it queues); its record is rebuilt when asked for. A memory's recent
    decisions (Explain, which the store adapters ask before each update) are found
    through each slot's `_key` (its memory id's hash): one vectorised comparison, then
    only the slots it names are read."""

    def __init__(
        self, per_memory: int = 20, limit: int = JOURNAL_MOST, total: int = JOURNAL_TOTAL
    ) -> None:
        self._per_memory = per_memory
        self.limit = limit  # per namespace
        self.total = total  # in all namespaces (`_grew`)
        self._rings: dict[str, _Ring] = {}
        self._held = 0  # decisions in all rings
        self._held_lock = threading.Lock()  # taken before a ring's lock, never after
        # Every decision kept is also appended here when set (one deque append: thread-
        # safe, no lock), for the store: a record, or (serial, context, time) of an issue.
        self.queue: deque[DecisionRecord | tuple[int, DecisionContext, float]] | None = None

    def _ring(self, namespace: str) -> _Ring:
        ring = self._rings.get(namespace)
        if ring is None:  # setdefault is atomic: two first decisions share one ring
            ring = self._rings.setdefault(namespace, _Ring(self.limit))
        return ring

    def put(self, serial: int, rec: DecisionRecord) -> None:
        """Keep `rec`, issued with `serial` (`issue_decision_id`)."""
        self._keep(serial, rec)
        if self.queue is not None:
            self.queue.append(rec)

    def _keep(self, serial: int, rec: DecisionRecord) -> None:
        """`rec` in its namespace's ring (not queued)."""
        ring = self._ring(rec.namespace)
        with ring.lock:
            grew = ring.place(serial, rec, _key(rec.memory_ids), 0.0)
        if grew:
            self._grew(grew)

    def put_many(self, serials: Sequence[int], recs: Sequence[DecisionRecord]) -> None:
        """`put` of each (a FilterRank's batch: one namespace, one lock)."""
        if not recs:
            return
        ns = recs[0].namespace
        ring = self._ring(ns)
        grew = 0
        others: list[tuple[int, DecisionRecord]] = []
        with ring.lock:
            place = ring.place
            for serial, rec in zip(serials, recs, strict=True):
                if rec.namespace != ns:  # not a FilterRank's: each to its own ring
                    others.append((serial, rec))
                    continue
                ids = rec.memory_ids
                grew += place(serial, rec, hash(ids[0]) if len(ids) == 1 else _MANY, 0.0)
        for serial, rec in others:  # after: never two rings' locks at once
            self._keep(serial, rec)
        if grew:
            self._grew(grew)
        if self.queue is not None:
            self.queue.extend(recs)  # in their order, each once

    def put_issue(self, serial: int, context: DecisionContext, decided_at: float) -> None:
        """Keep the decision `context` issued with `serial` at `decided_at`."""
        ring = self._ring(context.namespace)
        with ring.lock:
            grew = ring.place(serial, context, _key(context.memory_ids), decided_at)
        if grew:
            self._grew(grew)
        if self.queue is not None:
            self.queue.append((serial, context, decided_at))

    def _grew(self, count: int) -> None:
        """`count` more decisions held; past `total` in all, the rings holding the most
        keep only their newest, all cut to one size, until a tenth of `total` is free
        (one pass over the rings per tenth of `total` decisions): a namespace loses
        decisions to another only while it holds more than that one."""
        with self._held_lock:
            self._held += count
            if self._held <= max(self.total, self.limit):
                return
            rings = list(self._rings.values())
            sizes = [r.held() for r in rings]
            excess = self._held - max(self.total, self.limit) * 9 // 10
            # the highest level (>= 1) cutting every ring above it to it frees `excess`
            low, high = 1, max(sizes)
            while low < high:
                mid = (low + high + 1) // 2
                if sum(n - mid for n in sizes if n > mid) >= excess:
                    low = mid
                else:
                    high = mid - 1
            for ring, n in zip(rings, sizes, strict=True):
                if n > low:
                    with ring.lock:
                        self._held -= ring.keep_newest(low)

    def held(self) -> int:
        """Decisions held in all namespaces."""
        return self._held

    def recent(self, namespace: str, memory_id: str, limit: int) -> list[DecisionRecord]:
        """The newest decisions on `memory_id` in `namespace`, newest first."""
        limit = min(limit, self._per_memory)
        ring = self._rings.get(namespace)
        if ring is None or limit <= 0:
            return []
        with ring.lock:  # (the ring's arrays do not grow while numpy views them)
            keys = np.frombuffer(ring.keys, dtype=np.int64)
            # The slots that may hold one: its key, or several memories' (an act).
            maybe = np.flatnonzero((keys == _key((memory_id,))) | (keys == _MANY)).tolist()
            del keys
            # only copied under the lock (the namespace's decisions wait for it)
            slots, serials, times = ring.slots, ring.serials, ring.times
            found = [(serials[i], slots[i], times[i]) for i in maybe]
        # then the ones on this memory, newest first; only those returned are rebuilt
        mine = [f for f in found if memory_id in f[1].memory_ids]
        mine.sort(key=lambda f: f[0], reverse=True)
        return [_record(*f) for f in mine[:limit]]

    def get(self, namespace: str, decision_id: str) -> DecisionRecord | None:
        """The decision `decision_id` if `namespace` holds it still."""
        serial = _serial_of(decision_id)
        ring = self._rings.get(namespace)
        if serial is None or ring is None:
            return None
        with ring.lock:
            i = ring.where.get(serial)
            rec = ring.at(i) if i is not None else None
        return rec if rec is not None and rec.decision_id == decision_id else None
