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
"""Mixed into the key of a decision on other than one memory (an act's)."""


def _key(namespace: str, memory_ids: Sequence[str]) -> int:
    """A journal slot's key: its namespace's hash mixed with its decision's one memory
    id's (equal ids, equal keys; a key shared by chance only costs reading that slot),
    or with `_MANY`. The namespace's part: a memory's recent decisions are looked for
    among its own namespace's acts only (before: every namespace's, so one tenant's
    acts slowed another's Explain, and timed it; an outside audit). A string caches
    its hash: two lookups and an xor."""
    return hash(namespace) ^ (hash(memory_ids[0]) if len(memory_ids) == 1 else _MANY)


class DecisionJournal:
    """The last `limit` decisions of this process, for Explain and Feedback.

    A decision id ends with its serial, so a decision lives in slot `serial % limit`
    until the decision `limit` serials later takes the slot: adding (every
    decision's path) is one list store, with no dict to keep and nothing evicted
    but what the store replaces; finding one by id is a parse and an index.
    A reused decision is kept as its shared `DecisionContext` plus its serial and
    time in two typed arrays (nothing allocated per issue but, with a `queue`, the
    (serial, context, time) it queues); its record is rebuilt when asked for.
    A memory's recent decisions (Explain, which the store adapters ask before each
    update) are found through a third typed array, each slot's `_key` (its memory
    id's hash): one vectorised comparison, then only the slots it names are read.
    Before, Explain read all `limit` slots in Python: ~5-12 ms with the GIL held,
    on every update a LangGraph or Mem0 adapter made. Keeping a key costs each
    decision ~0.1 us (a FilterRank of 100: ~11 us, of ~1.6 ms)."""

    def __init__(self, per_memory: int = 20, limit: int = 100_000) -> None:
        self._per_memory = per_memory
        self._limit = limit
        self._slots: list[DecisionRecord | DecisionContext | None] = [None] * limit
        self._serials = array("q", bytes(8 * limit))
        self._times = array("d", bytes(8 * limit))
        self._keys = array("q", bytes(8 * limit))  # per slot: `_key` of its memory ids
        # Every decision kept is also appended here when set (one deque append: thread-
        # safe, no lock), for the store: a record, or (serial, context, time) of an issue.
        self.queue: deque[DecisionRecord | tuple[int, DecisionContext, float]] | None = None

    def put(self, serial: int, rec: DecisionRecord) -> None:
        """Keep `rec`, issued with `serial` (`issue_decision_id`). A list store is
        atomic: no lock."""
        i = serial % self._limit
        self._keys[i] = _key(rec.namespace, rec.memory_ids)
        self._slots[i] = rec
        if self.queue is not None:
            self.queue.append(rec)

    def put_many(self, serials: Sequence[int], recs: Sequence[DecisionRecord]) -> None:
        slots, keys, limit = self._slots, self._keys, self._limit
        for serial, rec in zip(serials, recs, strict=True):
            i = serial % limit
            ids = rec.memory_ids
            # `_key`, inlined
            keys[i] = hash(rec.namespace) ^ (hash(ids[0]) if len(ids) == 1 else _MANY)
            slots[i] = rec
        if self.queue is not None:
            self.queue.extend(recs)

    def put_issue(self, serial: int, context: DecisionContext, decided_at: float) -> None:
        """Keep the decision `context` issued with `serial` at `decided_at`. The
        context goes in last: until then the slot's old entry stays whole, and a
        reader rebuilding the id from a half-written slot finds a mismatch, not a
        wrong decision."""
        i = serial % self._limit
        self._serials[i] = serial
        self._times[i] = decided_at
        self._keys[i] = _key(context.namespace, context.memory_ids)
        self._slots[i] = context
        if self.queue is not None:
            self.queue.append((serial, context, decided_at))

    def _at(self, i: int) -> DecisionRecord | None:
        entry = self._slots[i]
        if type(entry) is DecisionContext:
            at = self._times[i]
            return entry.record(decision_id_of(at, self._serials[i]), at)
        return entry  # type: ignore[return-value]  # `type() is` does not narrow: a record here

    def recent(self, namespace: str, memory_id: str, limit: int) -> list[DecisionRecord]:
        """The newest decisions on `memory_id`, newest first."""
        limit = min(limit, self._per_memory)
        keys = np.frombuffer(self._keys, dtype=np.int64)
        # The slots that may hold one: its key, or several memories' (an act). A slot
        # rewritten meanwhile is read as it is now, and checked below as every one is.
        mine, acts = _key(namespace, (memory_id,)), _key(namespace, ())
        maybe = np.flatnonzero((keys == mine) | (keys == acts)).tolist()
        found = (self._at(i) for i in maybe)
        recs = [
            r
            for r in found
            if r is not None  # the slot may have moved on since
            and r.namespace == namespace
            and memory_id in r.memory_ids
        ]
        recs.sort(key=lambda r: _serial_of(r.decision_id) or 0, reverse=True)
        return recs[:limit]

    def get(self, decision_id: str) -> DecisionRecord | None:
        serial = _serial_of(decision_id)
        if serial is None:
            return None
        rec = self._at(serial % self._limit)
        return rec if rec is not None and rec.decision_id == decision_id else None
