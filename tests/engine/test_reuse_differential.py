"""Differential tests of decision reuse: an engine that reuses decisions (and one
that reissues tickets, and the servicer's Check byte memo) must answer exactly as an
engine deciding afresh over the same embedded store and ManualClock, after every
step of a seeded random run that mixes every write the engine and store offer
(record with claims and dependencies, revise, update, revoke / supersede / compress
/ confirm with their cascades, add_dependencies, feedback, access flushes, grants
and the acts that spend them, the governance sweep) with clock steps across every
threshold the policies below test.

The policies read each kind of fact the language offers: ancestors' status and
confidence, lineage, descendants, origins, reliability (own and along the chain),
value_score, access_count, last_access, calls(), acts(), tags, the claim (subject,
attribute, value, contradictions, confirmations), request.historical,
request.budget with costs (under each resolution strategy), request.actor and
age / since / created_at thresholds.

Every FilterRank is also compared, candidate by candidate, with a Check of that
candidate alone: a batch decides each memory as a Check of it would (its own lineage,
`engine/batch_views.py`), so the decisions they keep under one key agree. The plain
tests at the end are the minimal reproductions of the mismatches this suite found
before that held: a batch that missed an ancestor (its walk visited a record in one
direction only), a candidate capped by a parent another candidate brought in, or
walking lineage past its own depth.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from memlineage.engine.acts import ActArgument
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.grpc_api.auth import Authenticator
from memlineage.grpc_api.servicer import MemLineageService
from memlineage.grpc_api.wire import check_response_bytes
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import LineageError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord, Status
from memlineage.metrics import Metrics
from memlineage.store.embedded import EmbeddedStore
from memlineage.v1 import memlineage_pb2 as pb
from memlineage_dsl.facts import Creator
from support.ticketed import Ticketed

T0 = 1_767_225_600.0  # support.memories.T0
NS = "default"  # the local principal's namespace (the servicer's default)
USER = Creator("user", "user:alice")
AGENT = Creator("agent", "agent:planner")
ACTORS = (USER, AGENT)

# --------------------------------------------------------------------------- policies

LINEAGE_MLP = """
policy withdrawn_ancestor priority 70 {
  on read, derive, act
  when any(a in ancestors(memory) : a.status in [revoked, superseded, pending_verification])
  degrade mark_pending("an upstream memory was withdrawn")
  score 0.3
  cost 0.04
}

policy weak_chain priority 40 {
  on read
  when min(a in lineage(memory, 3) : a.confidence) < 0.5
  degrade downrank(0.5) "chain minimum {min(a in lineage(memory, 3) : a.confidence)}"
  cost 0.01
}

policy busy_root priority 90 {
  on delete, update
  when count(d in descendants(memory) : d.status == active) > 1
  deny "other memories are built on it"
}

policy withdrawn_use priority 30 {
  on read
  when any(d in descendants(memory, 2) : d.status == revoked or "retracted" in d.tags)
  degrade annotate("something built on it was withdrawn")
  cost 0.02
}

policy tool_origin priority 20 {
  on read
  when len(ancestors(memory)) >= 2 and any(o in origins(memory) : o.creator.kind == tool)
  degrade annotate("rests on tool output")
  score 0.8
  cost 0.03
}

policy unknown_read priority 50 {
  on read
  when unknown(memory)
  degrade annotate("unknown provenance")
  score 0.5
}

policy unknown_act priority 96 {
  on act, derive
  when unknown(memory)
  deny "no lineage: cannot act on it"
}
"""

SCORES_MLP = """
policy unreliable priority 60 {
  on read, act
  when memory.reliability < 0.35
  degrade annotate("unreliable") "reliability below 0.35"
  score 0.4
  cost 0.05
}

policy weakest_link priority 55 {
  on read
  when min(a in lineage(memory) : a.reliability) < 0.2
  deny "a link of its chain is below 0.2"
}

policy seldom_used priority 10 {
  on read
  when memory.value_score < 0.52
  degrade downrank(0.8) "seldom used"
  cost 0.01
}

policy popular priority 5 {
  on read
  when memory.access_count >= 3
  degrade annotate("popular") "read {memory.access_count} times"
  score 0.9
}

policy idle priority 6 {
  on read
  when memory.access_count > 0 and since(memory.last_access) > 20m
  degrade annotate("idle")
  score 0.95
}
"""

TIME_MLP = """
policy stale_price priority 50 {
  on read
  when "price" in memory.tags and age(memory) > 1h
  degrade refresh(memory.creator.id) "prices older than an hour"
  score 0.6
  cost if calls("tool:prices", 30m) >= 3 then 1000 else 0.02
}

policy price_quota priority 45 {
  on read
  when "price" in memory.tags and calls("tool:prices", 30m) >= 3
  degrade annotate("quota reached")
  score 0.8
  cost 0.01
}

policy old_reading priority 44 {
  on read
  when memory.type == "reading" and memory.created_at < now - 5m
  degrade annotate("old reading")
  cost 0.05
}

policy ancient priority 43 {
  on read, update
  when since(memory.created_at) > 2d
  deny "too old"
}

policy night priority 3 {
  on read
  when request.time > memory.created_at + 12h and memory.creator.kind == reasoning
  degrade annotate("a day-old thought")
}
"""

CLAIMS_MLP = """
policy contested priority 35 {
  on read
  when memory.contradictions > 0 and memory.confirmations == 0
  degrade require_confirmation("contested")
  score 0.5
  cost 0.03
}

policy window_seat priority 34 {
  on read
  when memory.subject == "user:alice" and memory.attribute == "seat" and memory.value == "window"
  degrade annotate("window seat")
}

policy history_only priority 80 {
  on read
  when memory.status in [superseded, archived, compressed] and not request.historical
  deny "only in a historical query"
}

policy revoked_read priority 100 {
  on read, act, derive, update
  when memory.status in [revoked, evicted]
  deny "revoked"
}

policy secret priority 95 {
  on read, act
  when "secret" in memory.tags and request.actor.kind != user
  deny "secrets are for users"
}

policy low_budget priority 1 {
  on read
  when request.budget < 0.5 and memory.creator.kind == agent
  degrade annotate("low budget")
  cost 0.2
}
"""

ACTS_MLP = """
actions payments = ["pay*", "transfer"]

policy payments_per_window priority 90 {
  on act, read
  when request.action in payments and acts(payments, 10m) >= 2
  deny "at most two payments in ten minutes"
}

policy busy_payer priority 12 {
  on read
  when memory.creator.kind == tool and acts("pay*", 10m) >= 1
  degrade annotate("payments under way")
}

policy undelegated priority 85 {
  on act
  when request.action in payments and any(a in request.args : not covered(a))
  deny "undelegated argument"
}

policy chatty_tool priority 11 {
  on read
  when memory.creator.kind == tool and calls(memory.creator.id, 10m) >= 4
  degrade annotate("chatty tool")
}
"""

STRATEGIES = ("deny_overrides", "priority", "cost_aware waive_penalty 0.5")


def _policy_dir(root: Path, strategy: str) -> str:
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "resolve.mlp": f"resolve {strategy}\n",
        "lineage.mlp": LINEAGE_MLP,
        "scores.mlp": SCORES_MLP,
        "time.mlp": TIME_MLP,
        "claims.mlp": CLAIMS_MLP,
        "acts.mlp": ACTS_MLP,
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return str(root)


# --------------------------------------------------------------------------- the world


class _Context:
    """What the servicer's handlers ask of a gRPC context (only on errors)."""

    def abort(self, code: object, details: str) -> None:
        raise AssertionError(f"the servicer aborted: {code} {details}")

    def invocation_metadata(self) -> tuple[()]:
        return ()


_PB_OPS = {
    "read": pb.OPERATION_READ,
    "update": pb.OPERATION_UPDATE,
    "delete": pb.OPERATION_DELETE,
    "derive": pb.OPERATION_DERIVE,
    "write": pb.OPERATION_WRITE,
}
_PB_KINDS = {"user": pb.CREATOR_KIND_USER, "agent": pb.CREATOR_KIND_AGENT}


@dataclass
class Memo:
    """What a run knows of the memories it recorded (to pick valid writes)."""

    depth: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)


class World:
    def __init__(self, policy_dir: str, lineage_depth: int = 16) -> None:
        self.clock = ManualClock(T0)
        self.store = EmbeddedStore(clock=self.clock)
        self.holder = PolicyHolder(policy_dir)

        def engine(reuse: bool) -> Engine:
            return Engine(
                self.store,
                self.holder,
                clock=self.clock,
                reuse_decisions=reuse,
                lineage_depth=lineage_depth,
            )

        self.fresh = engine(False)
        self.reusing = engine(True)
        self.ticketed = Ticketed(engine(True))
        self.service = MemLineageService(engine(True), Authenticator(), Metrics())
        self.engines = (self.fresh, self.reusing, self.ticketed.engine, self.service.engine)
        self.memo = Memo()
        self.compared = 0
        # FilterRank candidate sets, asked by the actors the Checks use: the decisions
        # of both are kept under the same keys.
        self.pool: list[tuple[Creator, list[tuple[str, float]]]] = []

    # -- writes
    def record(self, mid: str, creator: str, *deps: str, age: float = 0.0, **fields) -> bool:
        rec = MemoryRecord(
            id=mid,
            namespace=NS,
            creator_kind=creator.split(":")[0],
            creator_id=creator,
            created_at=self.clock() - age,
            dependencies=deps,
            **fields,
        )
        if not self.fresh.record(rec).recorded:
            return False
        self.memo.ids.append(mid)
        self.memo.depth[mid] = 1 + max((self.memo.depth[d] for d in deps), default=0)
        return True

    def flush_access(self) -> None:
        for e in self.engines:
            e.flush_access()

    # -- comparisons
    def check(
        self,
        op: str,
        ids: list[str],
        actor: Creator = USER,
        budget: float | None = None,
        action: str = "",
        historical: bool = False,
        time: float | None = None,
    ) -> str:
        kw: dict = {"budget": budget, "action": action, "historical": historical}
        if time is not None:
            kw["time"] = time
        want = self.fresh.check(NS, op, ids, actor, **kw)
        got = self.reusing.check(NS, op, ids, actor, **kw)
        where = (op, ids, actor.id, kw)
        assert got.decision == want.decision, (where, got.decision, want.decision)
        assert got.decision_id != want.decision_id
        if time is None:
            again = self.ticketed.decide(op, ids, actor, **kw)
            assert again == want.decision, (where, again, want.decision)
            if op != "act":
                self._service_check(op, ids[0], actor, budget, historical, want)
        self.compared += 1
        return want.decision.effect

    def _service_check(
        self, op: str, mid: str, actor: Creator, budget, historical: bool, want
    ) -> None:
        req = pb.CheckRequest(operation=_PB_OPS[op], memory_id=mid, historical=historical)
        if actor is not USER:
            req.actor.kind = _PB_KINDS[actor.kind]
            req.actor.id = actor.id
        else:  # the servicer's default actor is user:<namespace>: name alice
            req.actor.kind = pb.CREATOR_KIND_USER
            req.actor.id = USER.id
        if budget is not None:
            req.budget = budget
        got = pb.CheckResponse.FromString(self.service.Check(req.SerializeToString(), _Context()))
        expected = pb.CheckResponse()
        expected.ParseFromString(check_response_bytes(want))
        for msg in (got, expected):
            msg.decision.ClearField("decision_id")
            msg.decision.ClearField("decided_at")
        assert got == expected, (op, mid, actor.id, budget, historical, got, expected)

    def filter_rank(self, cands, actor: Creator = USER, **kw) -> None:
        want = self.fresh.filter_rank(NS, cands, actor, **kw)
        got = self.reusing.filter_rank(NS, cands, actor, **kw)

        def view(ranked):
            return [
                (
                    c.memory_id,
                    c.decision.decision,
                    c.rank_score,
                    c.kept,
                    c.reliability,
                    c.value_score,
                )
                for c in ranked
            ]

        assert view(got) == view(want), (cands, kw)
        for c in want:  # each candidate as a Check of it alone decides it
            alone = self.fresh.check(
                NS,
                "read",
                [c.memory_id],
                actor,
                budget=kw.get("budget"),
                historical=kw.get("historical", False),
            )
            assert c.decision.decision == alone.decision, (c.memory_id, cands, kw)
        self.compared += 1


# --------------------------------------------------------------------------- the run

CREATORS = (
    "user:alice",
    "user:bob",
    "agent:planner",
    "agent:scout",
    "tool:prices",
    "tool:search",
    "reasoning:planner",
)
TAGS = ("price", "secret", "retracted", "note", "draft")
STEPS = (0.0, 0.0, 0.0005, 1.0, 5.0, 30.0, 119.0, 300.0, 900.0, 1801.0, 3600.0, 7200.0)


def _seed_world(w: World) -> None:
    """Memories sitting just before the thresholds the policies test."""
    w.record("root", "user:alice", creator_confidence=0.9)
    w.record("tool1", "tool:search", type="tool_result", volatility="medium")
    w.record("price0", "tool:prices", age=3500.0, tags=("price",), type="tool_result")
    w.record("price1", "tool:prices", age=3599.0, tags=("price",), type="tool_result")
    w.record("reading", "tool:search", age=290.0, type="reading", volatility="high")
    w.record("thought", "reasoning:planner", creator_confidence=0.45, volatility="high")
    w.record("plan", "agent:planner", "root", "thought", creator_confidence=0.8)
    w.record("step", "agent:planner", "plan", "tool1")
    w.record("seat", "user:alice", subject="user:alice", attribute="seat", value="aisle")
    w.record("old", "agent:scout", age=2 * 86400.0 - 600.0, volatility="medium")


def _random_record(w: World, rng: random.Random, n: int) -> None:
    creator = rng.choice(CREATORS)
    shallow = [m for m in w.memo.ids if w.memo.depth[m] < 6]
    deps = tuple(dict.fromkeys(rng.sample(shallow, min(len(shallow), rng.choice((0, 0, 1, 2))))))
    fields: dict = {
        "creator_confidence": rng.choice((0.2, 0.45, 0.7, 1.0)),
        "tags": tuple(rng.sample(TAGS, rng.choice((0, 0, 1, 2)))),
        "volatility": rng.choice((None, "high", "medium", "low")),
        "type": rng.choice(("fact", "reading", "tool_result")),
    }
    if rng.random() < 0.3:
        fields.update(
            subject="user:alice",
            attribute=rng.choice(("seat", "city")),
            value=rng.choice(("aisle", "window", "Paris")),
        )
    with contextlib.suppress(LineageError):  # e.g. a cycle, a refused claim
        w.record(f"m{n}", creator, *deps, age=rng.choice((0.0, 0.0, 60.0, 3000.0)), **fields)


def _random_write(w: World, rng: random.Random, n: int) -> str:
    """One write of a random kind; returns its kind."""
    fresh, store, ids = w.fresh, w.store, w.memo.ids
    kind = rng.choice(
        (
            "record",
            "record",
            "record",
            "revise",
            "update",
            "revoke",
            "supersede",
            "compress",
            "confirm",
            "add_dependencies",
            "feedback",
            "feedback",
            "flush",
            "flush",
            "grant",
            "act",
            "act",
            "sweep",
        )
    )
    victim = rng.choice(ids)
    try:
        if kind == "record":
            _random_record(w, rng, n)
        elif kind == "revise":
            cur = store.get(NS, victim)
            new = MemoryRecord(
                id=cur.id,
                namespace=NS,
                creator_kind=cur.creator_kind,
                creator_id=cur.creator_id,
                subject=cur.subject,
                attribute=cur.attribute,
                value=rng.choice(("aisle", "window", "Paris")) if cur.subject else None,
                tags=tuple(rng.sample(TAGS, rng.choice((0, 1)))),
                creator_confidence=rng.choice((0.3, 0.9)),
                dependencies=tuple(cur.dependencies),
                volatility=cur.volatility,
                type=cur.type,
            )
            fresh.revise(new, cur.version, USER)
        elif kind == "update":
            cur = store.get(NS, victim)
            changes = rng.choice(
                (
                    {"tags": rng.sample(TAGS, 1)},
                    {"creator_confidence": rng.choice((0.1, 0.6, 1.0))},
                    {"type": "reading"},
                    {"volatility": rng.choice(("high", "low"))},
                )
            )
            store.update(NS, victim, cur.version, changes)
        elif kind in ("revoke", "confirm"):
            fresh.update_status(NS, victim, kind, USER, reason="test")
        elif kind in ("supersede", "compress"):
            successor = rng.choice(ids)
            if kind == "compress":  # a summary depending on it
                successor = f"sum{n}"
                if not w.record(successor, "agent:planner", victim):
                    return kind
            fresh.update_status(NS, victim, kind, USER, successor=successor, reason="test")
        elif kind == "add_dependencies":
            dep = rng.choice([m for m in ids if w.memo.depth[m] < 6])
            cur = store.get(NS, victim)
            store.add_dependencies(NS, victim, [dep], expected_version=cur.version)
            w.memo.depth[victim] = max(w.memo.depth[victim], w.memo.depth[dep] + 1)
        elif kind == "feedback":
            fresh.feedback(NS, "", rng.sample(ids, min(2, len(ids))), rng.random() < 0.4)
        elif kind == "flush":
            w.flush_access()
        elif kind == "grant":
            fresh.record_grant(
                GrantRecord(
                    id=f"g{n}",
                    namespace=NS,
                    issuer=USER.id,
                    actions=("pay*",),
                    arguments=("amount",),
                    memory_id=victim,
                    uses=rng.choice((1, 2)),
                    expires_at=w.clock() + rng.choice((600.0, 7200.0)),
                    created_at=w.clock(),
                ),
                USER,
            )
        elif kind == "act":
            engine = rng.choice(w.engines)  # acts are never reused: any engine
            engine.act(
                NS,
                rng.choice(("pay_bill", "transfer", "search")),
                rng.sample(ids, 1),
                [ActArgument("amount", (rng.choice(ids),))],
                rng.choice(ACTORS),
            )
        elif kind == "sweep":
            w.clock.advance(rng.choice((3600.0, 86400.0)))
            w.flush_access()
            fresh.sweep(NS)
    except LineageError:
        pass  # a refused write (a transition, a cycle, a version): nothing written
    return kind


def _requests(w: World, rng: random.Random) -> None:
    ids = w.memo.ids
    hot = list(dict.fromkeys(ids[:10] + ids[-4:]))  # asked again and again: reused
    for mid in rng.sample(hot, 3) + rng.sample(ids, 2):
        w.check(
            "read",
            [mid],
            rng.choice(ACTORS),
            budget=rng.choice((None, 0.0, 0.03, 0.3, 1.0)),
            historical=rng.random() < 0.2,
        )
    w.check(rng.choice(("update", "delete", "derive")), [rng.choice(ids)], rng.choice(ACTORS))
    w.check(
        "act",
        rng.sample(ids, min(2, len(ids))),
        rng.choice(ACTORS),
        action=rng.choice(("pay_bill", "transfer", "search")),
    )
    if not w.pool or rng.random() < 0.04:  # new candidate sets, asked again and again
        w.pool = [
            (
                rng.choice(ACTORS),
                [(m, round(rng.random(), 3)) for m in rng.sample(ids, min(6, len(ids)))],
            )
            for _ in range(3)
        ]
    ranker, cands = rng.choice(w.pool)
    w.filter_rank(
        cands,
        ranker,
        budget=rng.choice((None, 0.0, 0.3)),
        historical=rng.random() < 0.2,
        limit=rng.choice((0, 0, 3)),
    )
    if rng.random() < 0.2:  # a replay at an earlier time: decided afresh, never reused
        w.check("read", [rng.choice(ids)], time=w.clock() - rng.uniform(0.0, 1800.0))
    if rng.random() < 0.1:
        w.check("read", ["nobody"])  # an id the namespace does not hold


def _run(policy_dir: str, seed: int, steps: int) -> World:
    rng = random.Random(seed)
    w = World(policy_dir)
    _seed_world(w)
    writes: dict[str, int] = {}
    for n in range(steps):
        w.clock.advance(rng.choice(STEPS))
        if rng.random() < 0.35:
            kind = _random_write(w, rng, n)
            writes[kind] = writes.get(kind, 0) + 1
        _requests(w, rng)
    assert len(writes) >= 10, writes  # most kinds of write happened
    return w


@pytest.mark.parametrize(
    ("strategy", "seed"), [(s, i + 3 * k) for k in range(2) for i, s in enumerate(STRATEGIES)]
)
def test_reuse_equals_fresh_over_random_writes_and_time(
    tmp_path: Path, strategy: str, seed: int
) -> None:
    w = _run(_policy_dir(tmp_path / "policies", strategy), seed, steps=200)
    assert w.reusing.reused > w.compared // 8, (w.reusing.reused, w.compared)  # exercised
    assert w.ticketed.reissued > 40
    assert w.service.engine.reused > 40
    assert w.fresh.reused == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reuse_equals_fresh_where_a_contradicting_source_moved(
    tmp_path: Path, strategy: str
) -> None:
    """Seed 369 of a wider run (300 steps): a kept view of `seat` scored its reliability
    with the credibility of a source that contradicted it as it was before feedback on
    that source's own memories, and decided `weakest_link` at a replayed time where a
    fresh read did not (only the creator's statistics ended a kept view or decision)."""
    w = _run(_policy_dir(tmp_path / "policies", strategy), 369, steps=300)
    assert w.fresh.reused == 0 and w.reusing.reused > 0


def test_policy_set_is_time_exact(tmp_path: Path) -> None:
    """Every plan the random runs exercise can be reused (else they prove nothing)."""
    holder = PolicyHolder(_policy_dir(tmp_path / "p", STRATEGIES[0]))
    plans = holder.current.compiled.plans
    assert all(plans[op].reusable for op in ("read", "update", "delete", "derive", "act"))
    assert {"descendants", "ancestors", "lineage", "origins", "calls", "acts"} <= plans["read"].uses


# --------------------------------------------------------------------------- threshold walks


def test_each_threshold_crossing_is_seen_through_every_path(tmp_path: Path) -> None:
    """Time alone (no write) moves each memory across its thresholds: age 1 h, 5 min,
    2 d, 12 h; reliability decaying; value decaying; a counted call leaving its window;
    an idle memory turning idle."""
    w = World(_policy_dir(tmp_path / "p", STRATEGIES[2]))
    _seed_world(w)
    for k in range(3):  # calls of tool:prices fill the 30 min quota, then leave it
        w.clock.advance(60.0)
        w.record(f"q{k}", "tool:prices", tags=("price",), type="tool_result")
    w.check("read", ["seat"])
    w.flush_access()
    seen: dict[str, set[str]] = {}
    for _ in range(400):
        w.clock.advance(397.0)
        for mid in w.memo.ids:
            seen.setdefault(mid, set()).add(w.check("read", [mid], budget=0.03))
        w.filter_rank([(m, 0.5) for m in w.memo.ids])
    assert sum(len(s) > 1 for s in seen.values()) >= 4, seen
    assert w.reusing.reused > 1000


def test_archival_and_eviction_by_the_sweep_are_seen(tmp_path: Path) -> None:
    """Weeks pass: the sweep archives, then evicts, idle memories; every decision on
    them (historical or not, by Check, ticket, the servicer and FilterRank) follows."""
    w = World(_policy_dir(tmp_path / "p", STRATEGIES[0]))
    _seed_world(w)
    statuses: set[str] = set()
    for _ in range(16):
        for mid in w.memo.ids:
            for historical in (False, True):
                w.check("read", [mid], historical=historical)
                w.check("read", [mid], historical=historical)  # asked again: reused
        w.filter_rank([(m, 0.5) for m in w.memo.ids], historical=True)
        w.clock.advance(3 * 86400.0)
        w.flush_access()
        w.fresh.sweep(NS)
        statuses |= {w.store.get(NS, m).status for m in w.memo.ids}
    assert {Status.ARCHIVED, Status.EVICTED} <= statuses, statuses
    assert w.reusing.reused > 200


# --------------------------------------------------------------------------- mismatches found


def _minimal(tmp_path: Path, rule: str, lineage_depth: int = 16) -> World:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "rule.mlp").write_text(rule)
    return World(str(tmp_path / "p"), lineage_depth=lineage_depth)


DEEP_ANCESTOR = """
policy bad_root {
  on read
  when any(a in ancestors(memory) : "bad" in a.tags)
  deny "rests on a bad memory"
}
"""


def _decisions(w: World, engine: Engine, cands: list[tuple[str, float]]) -> dict[str, str]:
    return {c.memory_id: c.decision.decision.effect for c in engine.filter_rank(NS, cands, USER)}


def test_a_candidate_is_decided_within_its_own_lineage_depth(tmp_path: Path) -> None:
    """lineage_depth 1, z <- a <- b with z tagged bad. A Check of b loads b and a; its
    walk goes past a: fail-closed DENY, not kept (before: ALLOW, z unseen). A FilterRank
    of [a, b] loads z too (a's parent): a is DENY, and b is decided on its own view
    (b, a) as its Check was, by both engines (before the views: b DENY afresh, the kept
    ALLOW reused; a walk past the depth is now an error on either view)."""
    w = _minimal(tmp_path, DEEP_ANCESTOR, lineage_depth=1)
    w.record("z", "user:alice", tags=("bad",))
    w.record("a", "user:alice", "z")
    w.record("b", "user:alice", "a")
    alone = w.reusing.check(NS, "read", ["b"], USER).decision
    assert alone.effect == "deny" and "raise lineage_depth" in alone.errors[0]
    cands = [("a", 0.9), ("b", 0.8)]
    for engine in (w.fresh, w.reusing):
        ranked = {c.memory_id: c.decision.decision for c in engine.filter_rank(NS, cands, USER)}
        assert ranked["a"].effect == "deny" and not ranked["a"].errors
        assert ranked["b"] == alone
    w.filter_rank(cands)


WEAK_DESCENDANT = """
policy weak_use {
  on read
  when any(x in descendants(memory) : x.reliability < 0.5)
  degrade downrank(0.5) "something built on it is weak"
}
"""


def _co_parent(tmp_path: Path) -> World:
    """d depends on m and on p (a reasoning memory of confidence 0.3). A Check of m
    loads m and its descendant d, not d's other parent p: d is not capped by p."""
    w = _minimal(tmp_path, WEAK_DESCENDANT)
    w.record("m", "user:alice")
    w.record("p", "reasoning:r", creator_confidence=0.3)
    w.record("d", "user:alice", "m", "p")
    return w


def test_a_parent_another_candidate_brings_in_does_not_cap_a_candidate(tmp_path: Path) -> None:
    """A FilterRank of [p, m] loads p for itself; m is decided on its own view as its
    Check is, ALLOW, afresh and reused (before: DEGRADE afresh, ALLOW reused)."""
    w = _co_parent(tmp_path)
    assert w.reusing.check(NS, "read", ["m"], USER).decision.effect == "allow"
    cands = [("p", 0.9), ("m", 0.8)]
    assert _decisions(w, w.fresh, cands)["m"] == "allow"
    assert _decisions(w, w.reusing, cands)["m"] == "allow"


def test_a_check_after_a_filter_rank_answers_as_afresh(tmp_path: Path) -> None:
    """The other way round: what the FilterRank of [p, m] keeps for m is what a Check
    of m decides (before: the batch kept DEGRADE, a fresh Check said ALLOW)."""
    w = _co_parent(tmp_path)
    w.reusing.filter_rank(NS, [("p", 0.9), ("m", 0.8)], USER)
    assert w.fresh.check(NS, "read", ["m"], USER).decision.effect == "allow"
    assert w.reusing.check(NS, "read", ["m"], USER).decision.effect == "allow"


def test_two_filter_ranks_agree_across_candidate_sets(tmp_path: Path) -> None:
    """FilterRank alone: [m] keeps m's ALLOW, [p, m] answers it, and so does afresh."""
    w = _co_parent(tmp_path)
    w.filter_rank([("m", 0.8)])
    w.filter_rank([("p", 0.9), ("m", 0.8)])


DOWN_BEFORE_UP = """
policy bad_root {
  on read, act
  when any(a in ancestors(memory) : "bad" in a.tags)
  deny "rests on a bad memory"
}

policy retracted_use {
  on read, act
  when any(d in descendants(memory) : "retracted" in d.tags)
  degrade annotate("something built on it was retracted")
}
"""


def _down_before_up(tmp_path: Path) -> World:
    """a and z (tagged bad) <- c <- d <- b. A batch [a, b] reaches c first as a's
    child (level 1, walking down), so c is never walked up: z is not loaded."""
    w = _minimal(tmp_path, DOWN_BEFORE_UP)
    w.record("a", "user:alice")
    w.record("z", "tool:web", tags=("bad",))
    w.record("c", "agent:x", "a", "z")
    w.record("d", "agent:x", "c")
    w.record("b", "agent:x", "d")
    return w


def test_a_batch_loads_an_ancestor_first_reached_walking_down(tmp_path: Path) -> None:
    """Default lineage depth. A Check of b alone sees z among its ancestors: DENY. A
    FilterRank of [a, b] reaches c first as a's child; it is walked up all the same,
    z is loaded, and b is DENY there and in the Check after it (before: z was never
    loaded, b ALLOWed and that ALLOW kept and answered to the Check)."""
    w = _down_before_up(tmp_path)
    assert w.fresh.check(NS, "read", ["b"], USER).decision.effect == "deny"
    ranked = w.reusing.filter_rank(NS, [("a", 0.9), ("b", 0.8)], USER)
    assert {c.memory_id: c.decision.decision.effect for c in ranked}["b"] == "deny"
    assert w.reusing.check(NS, "read", ["b"], USER).decision.effect == "deny"


def test_an_act_relying_on_more_memories_sees_every_ancestor(tmp_path: Path) -> None:
    """The same load in the act gate: relying on [a, b] is denied as relying on [b] is
    (before: allowed, z unseen)."""
    w = _down_before_up(tmp_path)
    assert w.fresh.act(NS, "send", ["b"], [], USER).decision.effect == "deny"
    assert w.fresh.act(NS, "send", ["a", "b"], [], USER).decision.effect == "deny"
