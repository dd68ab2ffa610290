"""What a decision read, as one JSON object (the decision log line's `input`), and
back: the request and every fact and count the evaluator saw, so `memlineage replay`
re-decides it against another policy set without the store, exactly.

The lineage is recorded with the decision (not read from the store's history): a
store keeps no past versions of a memory's scores or counters, and a replay must
see what the serving set saw. The cost is a larger log line, so it is opt-in
(`decision_log_inputs`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from memlineage_dsl.facts import (
    Argument,
    Creator,
    DictSnapshot,
    Grant,
    Memory,
    MemoryFacts,
    Request,
    UnknownMemory,
)
from memlineage_dsl.lineage_bound import Bound, LineageCut
from memlineage_dsl.schema import CREATOR_KINDS, OPERATIONS

from memlineage.engine.snapshot import SCORES, StoreSnapshot, acts_counter

__all__ = ["ReplaySnapshot", "decode_input", "encode_input"]

_FACT_FIELDS: tuple[str, ...] = tuple(MemoryFacts.__slots__)  # what a policy may read
_CREATOR = _FACT_FIELDS.index("creator")
_TUPLES = tuple(_FACT_FIELDS.index(n) for n in ("tags", "dependencies"))


def _fact(m: Memory) -> list[Any] | dict[str, Any]:
    """A known memory as its attribute values in `MemoryFacts` order (compact, and
    rebuilt positionally); one with no lineage as ``{"id", "namespace"}``."""
    if not isinstance(m, MemoryFacts):
        return {"id": m.id, "namespace": m.namespace}
    out: list[Any] = [getattr(m, n) for n in _FACT_FIELDS]
    creator = out[_CREATOR]
    out[_CREATOR] = [creator.kind, creator.id]  # the kind as the store holds it
    return out


def _unfact(v: list[Any] | dict[str, Any]) -> Memory:
    if isinstance(v, dict):
        return UnknownMemory(str(v["id"]), str(v.get("namespace", "default")))
    if len(v) != len(_FACT_FIELDS):
        raise ValueError(f"a memory has {len(_FACT_FIELDS)} attributes, got {len(v)}")
    values = list(v)
    kind, ident = values[_CREATOR]
    values[_CREATOR] = Creator(str(kind), str(ident))
    for i in _TUPLES:
        values[i] = tuple(values[i] or ())
    return MemoryFacts(*values)


def _grant(g: Grant) -> list[Any]:
    return [
        g.id,
        g.issuer.id,
        list(g.actions),
        list(g.arguments),
        g.source,
        g.memory_id,
        g.uses,
        g.used,
        None if math.isinf(g.expires_at) else g.expires_at,
        g.created_at,
        g.value,
        g.digest,
    ]


def _ungrant(v: list[Any]) -> Grant:
    return Grant(
        str(v[0]),
        Creator.parse(str(v[1])),
        tuple(v[2]),
        tuple(v[3]),
        str(v[4]),
        str(v[5]),
        int(v[6]),
        int(v[7]),
        math.inf if v[8] is None else float(v[8]),
        float(v[9]),
        str(v[10]),
        str(v[11]),
    )


def encode_input(req: Request, snap: StoreSnapshot) -> str:
    """The request and what it read, as compact JSON (an object)."""
    facts: dict[str, list[Any] | dict[str, Any]] = {i: _fact(m) for i, m in snap.memories.items()}
    for m in (req.memory, req.target, *req.memories, *(s for a in req.args for s in a.sources)):
        if m is not None and m.id not in facts:
            facts[m.id] = _fact(m)
    body: dict[str, Any] = {
        "op": req.op,
        "memory": req.memory.id,
        "target": req.target.id if req.target is not None else None,
        "memories": [m.id for m in req.memories],
        "actor": [req.actor.kind, req.actor.id],  # the kind as given: an id may name none
        "namespace": req.namespace,
        "budget": req.budget,
        "time": req.time,
        "action": req.action,
        "historical": req.historical,
        "args": [
            {
                "name": a.name,
                "sources": [s.id for s in a.sources],
                "value": a.value,
                "digest": a.digest,
            }
            for a in req.args
        ],
        "grants": [_grant(g) for g in req.grants],
        "counts": [[name, window, hit[0]] for (name, window), hit in snap.counts_read().items()],
        "scored": sorted(snap.scored),
        "facts": facts,
    }
    # how far the facts hold the lineage: a replay's walk past it fails as this
    # decision's did, one where it loaded none is approximate (a log without it, written
    # before it was always logged: the facts are taken as all there is)
    roots, up, down, cut = snap.bound or ((req.memory.id,), 0, 0, False)
    body["bound"] = [list(roots), up, down, cut]
    if snap.bound is not None:
        # the derivations a descendant walk would find not held (none walks down: {})
        held = snap.memories
        body["derivations"] = {
            i: list(rec.derivations)
            for i, rec in (snap.records.items() if down else ())
            if any(d not in held for d in rec.derivations)
        }
        # the ids past it the store did not hold (dangling: passed over, not a cut)
        body["absent"] = sorted(snap.absent)
    if req.target is not None:
        # An update (Revise) decides on the proposed version as `memory` and the stored
        # one as `target`, both of one id: `facts` holds the proposed one, so the
        # stored one goes beside it (before, a replay read the proposed version as
        # `target` too, and any rule comparing them replayed another answer)
        own = _fact(req.target)
        if own != facts[req.target.id]:
            body["target_facts"] = own
    return json.dumps(body, separators=(",", ":"))


class ReplaySnapshot(DictSnapshot):
    """The recorded facts, with the counts the decision read (a count it did not read
    is a replay the candidate set cannot make faithfully: `missing` names it)."""

    def __init__(self, facts: list[MemoryFacts], counts: dict[tuple[str, float], int]) -> None:
        super().__init__(facts)
        self.counts = counts
        self.missing: list[str] = []
        self.scored = SCORES  # the scores the logged facts carry as computed
        # the logged derivations of held memories with one not held (`bound`)
        self.derived: dict[str, tuple[str, ...]] = {}
        # walks into lineage the logged decision loaded none of (`_loaded`)
        self.unloaded: set[str] = set()

    def derivations(self, memory_id: str) -> tuple[str, ...]:
        return self.derived.get(memory_id, ())

    def ancestors(self, memory_id: str, depth: int | None = None) -> list[MemoryFacts]:
        try:
            return super().ancestors(memory_id, depth)
        except LineageCut as cut:
            if self._loaded(True, depth):  # past what it loaded: a cut, as it was
                raise
            # a dependency the logged decision loaded no ancestors to find
            self.unloaded.add(f"the lineage of `{memory_id}`")
            return list(cut.walked)

    def descendants(self, memory_id: str, depth: int | None = None) -> list[MemoryFacts]:
        if not self._loaded(False, depth):  # no derivations were logged: unknown
            self.unloaded.add(f"the descendants of `{memory_id}`")
        return super().descendants(memory_id, depth)

    def _loaded(self, up: bool, depth: int | None) -> bool:
        """Whether the logged decision loaded lineage this way (the candidate walks what
        the live engine would have loaded for it): when it loaded none, the walk decides
        on what the facts hold, and the replay is approximate (`unloaded`), not a cut
        saying "raise lineage_depth" nor a silent answer on less. A log without `bound`
        (before it): the facts are all there is."""
        bound = self.bound
        return bound is None or depth == 0 or (bound[1] if up else bound[2]) > 0

    def unscored(self, reads: frozenset[str]) -> list[str]:
        """The scores among `reads` (what a set's policies read) that the logged
        decision left at their default: a replay reading one is approximate."""
        return sorted((reads & SCORES) - self.scored)

    def _count(self, name: str, window: float) -> int:
        hit = self.counts.get((name, window))
        if hit is None:
            self.missing.append(f"{name} over {window:g}s")
            return 0
        return hit

    def calls(self, source: str | Creator, window_seconds: float, now: float) -> int:
        # StoreSnapshot keys calls by source, a creator by its id
        return self._count(str(source), window_seconds)

    def acts(self, pattern: str | tuple[str, ...], window_seconds: float, now: float) -> int:
        return self._count(acts_counter(pattern), window_seconds)


class BadInput(ValueError):
    """A logged input whose field is not one the log writes (said as is)."""


def _actor(v: object) -> Creator:
    """The asker as logged: ``[kind, id]`` (an id may name no kind: `Actor(user,
    "alice")`), or ``"kind:id"`` as logs before 2026-12-07 wrote it (the kind then
    read from the id: such a line misstated an actor whose id names none)."""
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) and x for x in v):
        if v[0] not in CREATOR_KINDS:
            raise BadInput(f"actor: {v[0]!r} is not a kind")
        return Creator(v[0], v[1])
    actor = str(v)
    if ":" not in actor:
        raise BadInput(f"actor: {actor!r} is not kind:id")
    return Creator.parse(actor)


def _bound(v: object) -> Bound:
    """A logged `bound`: [roots, up, down, cut]."""
    if (
        isinstance(v, list)
        and len(v) == 4
        and isinstance(v[0], list)
        and all(isinstance(r, str) for r in v[0])
        and all(type(n) is int and n >= 0 for n in v[1:3])
        and isinstance(v[3], bool)
    ):
        return (tuple(v[0]), v[1], v[2], v[3])
    raise BadInput(f"bound: {v!r} is not [roots, up, down, cut]")


def decode_input(text: str | dict[str, Any]) -> tuple[Request, ReplaySnapshot]:
    """The request and snapshot `encode_input` wrote. Raises ValueError/KeyError on a
    malformed input."""
    v: dict[str, Any] = json.loads(text) if isinstance(text, str) else text
    memories = {i: _unfact(d) for i, d in v["facts"].items()}
    known = [m for m in memories.values() if isinstance(m, MemoryFacts)]
    snap = ReplaySnapshot(known, {(str(n), float(w)): int(c) for n, w, c in v.get("counts", [])})
    bound = v.get("bound")
    if bound is not None:
        snap.bound = _bound(bound)
        derived = v.get("derivations") or {}
        if not isinstance(derived, dict):
            raise BadInput("derivations: not an object")
        snap.derived = {str(i): tuple(str(d) for d in ds) for i, ds in derived.items()}
        absent = v.get("absent") or []
        if not isinstance(absent, list) or not all(isinstance(i, str) for i in absent):
            raise BadInput("absent: not a list of ids")
        snap.absent = set(absent)
    scored = v.get("scored")  # absent (logs before 2026-12-07): taken as both
    if scored is not None:
        if not isinstance(scored, list) or not set(scored) <= SCORES:
            raise BadInput(f"scored: {scored!r} is not a list of scores")
        snap.scored = frozenset(scored)

    def ref(i: str) -> Memory:
        return memories.get(i) or UnknownMemory(i, str(v["namespace"]))

    target = v.get("target")
    if v.get("target_facts") is not None:  # the stored version, beside the proposed one
        own = _unfact(v["target_facts"])
        if target is None or own.id != target:
            raise BadInput("target_facts: not the facts of `target`")
        given: Memory | None = own
    else:  # logged before target_facts: the facts of its id (the proposed version)
        given = ref(target) if target is not None else None

    op, at = str(v["op"]), float(v["time"])
    if op not in OPERATIONS:
        raise BadInput(f"op: {op!r} is not an operation")
    if not math.isfinite(at):
        raise BadInput(f"time: {at!r} is not a finite time")
    req = Request(
        op,
        ref(v["memory"]),
        _actor(v["actor"]),
        str(v["namespace"]),
        float(v["budget"]),
        at,
        str(v["action"]),
        bool(v["historical"]),
        given,
        tuple(ref(i) for i in v["memories"]),
        tuple(
            Argument(a["name"], tuple(ref(s) for s in a["sources"]), a["value"], a["digest"])
            for a in v["args"]
        ),
        tuple(_ungrant(g) for g in v["grants"]),
    )
    return req, snap
