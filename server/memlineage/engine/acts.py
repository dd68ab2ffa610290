"""The act gate: an action decided on every memory it relies on and on each of its
arguments, bound to the memories its value came from; the user's grants it covers
are spent atomically when it is allowed, and allowed actions are counted.

Acts are never reused: each may spend a grant use and moves the action counters.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from memlineage_dsl.codegen import cover, origins_of
from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import DENY, Decision, Reason
from memlineage_dsl.facts import (
    Argument,
    Creator,
    Grant,
    Memory,
    Request,
    UnknownMemory,
    action_in,
    action_itself,
    sha256_of,
    user_made,
)

from memlineage.engine.context import EngineBase
from memlineage.engine.decision_log import applied_before
from memlineage.engine.outcomes import store_down
from memlineage.engine.records import DecisionRecord
from memlineage.engine.snapshot import StoreSnapshot, acts_counter, snapshot_of
from memlineage.lineage.errors import StoreUnavailableError, ValidationError
from memlineage.lineage.grants import SHA256, GrantRecord, canonical_digest
from memlineage.lineage.validation import check_action_name, check_free_text, check_id, valid_id
from memlineage.store.arguments import MAX_BATCH_IDS

MAX_ARGUMENTS = 64
MAX_ARGUMENT_SOURCES = 256
MAX_ARGUMENT_VALUE = 4096
_SPEND_ATTEMPTS = 4  # a concurrent act spent a grant: decide again on fresh grants


@dataclass(frozen=True, slots=True)
class ActArgument:
    """An argument as the caller binds it: memory ids, not yet loaded."""

    name: str
    sources: tuple[str, ...] = ()
    value: str = ""
    digest: str = ""


def checked_arguments(args: Sequence[ActArgument]) -> tuple[ActArgument, ...]:
    """`args` checked, their `sha256:` digests in the one spelling grants are stored
    in (`canonical_digest`), so the two compare whatever case either was sent in."""
    if len(args) > MAX_ARGUMENTS:
        raise ValidationError(f"at most {MAX_ARGUMENTS} arguments", field="arguments")
    seen: set[str] = set()
    changed = False  # a `sha256:` digest not in its one spelling (`canonical_digest`)
    for i, a in enumerate(args):
        if not valid_id(a.name):  # the field named (formatted) only on the error path
            check_id(a.name, f"arguments[{i}].name")
        if a.name in seen:
            raise ValidationError(f"argument {a.name!r} is given twice", field=f"arguments[{i}]")
        seen.add(a.name)
        if len(a.sources) > MAX_ARGUMENT_SOURCES:
            raise ValidationError(
                f"at most {MAX_ARGUMENT_SOURCES} sources", field=f"arguments[{i}].sources"
            )
        for j, s in enumerate(a.sources):
            if not valid_id(s):
                check_id(s, f"arguments[{i}].sources[{j}]")
        for what, text in (("value", a.value), ("digest", a.digest)):
            if len(text) > MAX_ARGUMENT_VALUE:
                raise ValidationError(
                    f"at most {MAX_ARGUMENT_VALUE} characters", field=f"arguments[{i}].{what}"
                )
            if text:
                check_free_text(text, f"arguments[{i}].{what}")
        digest = canonical_digest(a.digest)
        # both given: the digest must be the value's, else a pinned grant's digest
        # could ride along with another value (an outside audit), in any case
        if a.value and digest.startswith(SHA256) and digest != sha256_of(a.value):
            raise ValidationError(
                "is not the sha256 of the argument's value (send one of them, or both agreeing)",
                field=f"arguments[{i}].digest",
            )
        if digest != a.digest:
            changed = True
    if not changed:
        return tuple(args)
    return tuple(replace(a, digest=canonical_digest(a.digest)) for a in args)


# Facts of grants a store hands out as shared immutable objects (the embedded store
# returns the same GrantRecord until a use or a new grant replaces it), built once per
# record object; a store that builds new objects (Redis) only misses.
_GRANT_FACTS: dict[int, tuple[GrantRecord, Grant]] = {}
_GRANT_FACTS_LIMIT = 50_000


def grant_facts(g: GrantRecord) -> Grant:
    """What policies see of a stored grant."""
    hit = _GRANT_FACTS.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    facts = _grant_facts(g)
    if len(_GRANT_FACTS) >= _GRANT_FACTS_LIMIT:
        _GRANT_FACTS.clear()
    _GRANT_FACTS[id(g)] = (g, facts)
    return facts


def _grant_facts(g: GrantRecord) -> Grant:
    return Grant(
        g.id,
        Creator.parse(g.issuer),
        g.actions,
        g.arguments,
        g.source,
        g.memory_id,
        g.uses,
        g.used,
        g.expires_at,
        g.created_at,
        g.value,
        canonical_digest(g.digest),  # a grant stored before digests were made canonical
    )


def _may_cover(g: GrantRecord, action: str, now: float) -> bool:
    """Only an effective grant naming the action can cover one of its arguments: the
    others are left out of the request (a namespace's spent and unrelated grants are
    never converted nor tried per argument, and a logged input stays small)."""
    return g.effective(now) and action_in(action, g.actions)


def grants_to_spend(req: Request, snap: StoreSnapshot) -> tuple[str, ...]:
    """One use of each grant that covers a non-user origin of an argument."""
    used: dict[str, None] = {}
    for a in req.args:
        for o in origins_of(snap, a):
            if user_made(o):
                continue
            g = cover(snap, req, a, o, req.time)
            if g is not None:
                used[g.id] = None
    return tuple(used)


_RACED = Decision(
    DENY,
    0.0,
    0.0,
    reasons=(
        Reason(
            "<grants>",
            DENY,
            "the grants this action needs were spent by concurrent actions meanwhile",
            0,
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class _Ask:
    """One act as asked, checked: what it is decided on (and retried on, when a
    concurrent act spent the grants it needed)."""

    ns: str
    action: str
    ids: tuple[str, ...]
    arguments: tuple[ActArgument, ...]
    actor: Creator
    spend: float
    now: float


_STRIPES = tuple(threading.Lock() for _ in range(64))
"""The counted actions' locks, a namespace to a stripe: bounded however many namespaces
come and go (a lock per namespace, kept for good, grew with every tenant ever seen);
two namespaces on one stripe only wait for each other."""


def _counting(ns: str) -> threading.Lock:
    """The lock of `ns`'s counted actions: an act an `acts()` rule counts reads the
    count, decides and adds itself as one step, so concurrent acts cannot all read the
    count below the limit (on Redis 20 concurrent payments got 8 and 10 ALLOWs against
    "at most 3 an hour"; an outside audit). Exact within one sidecar; sidecars sharing
    a Redis still race each other (README, "Bounds")."""
    return _STRIPES[hash(ns) % len(_STRIPES)]


class Acts(EngineBase):
    """`act`: the gate in front of every action an agent takes."""

    def act(
        self,
        ns: str,
        action: str,
        relied: Sequence[str],
        args: Sequence[ActArgument],
        actor: Creator,
        budget: float | None = None,
        time: float | None = None,
    ) -> DecisionRecord:
        arguments = checked_arguments(args)
        if arguments and not action:
            raise ValidationError("an act with arguments names its action", field="action")
        if action:
            check_action_name(action, "action")
        if not relied and not arguments:
            raise ValidationError(
                "names no memory and no argument (act names them in memory_ids or arguments)",
                field="memory_ids",
            )
        now = self._now_spending(time)
        spend = self._budget(budget)
        serving = self.policies.current
        self._fresh_capture()
        ids = tuple(dict.fromkeys([*relied, *(s for a in arguments for s in a.sources)]))
        if len(ids) > MAX_BATCH_IDS:  # named here: the store would call them `ids`
            raise ValidationError(
                f"name {len(ids)} memories in all (memory_ids and the arguments' sources), "
                f"the limit is {MAX_BATCH_IDS}",
                field="arguments" if arguments else "memory_ids",
            )
        ask = _Ask(ns, action, ids, arguments, actor, spend, now)
        counted = self._counted(serving, action)
        with _counting(ns) if counted else contextlib.nullcontext():
            return self._act_once(serving, ask, counted)

    def _counted(self, serving: Any, action: str) -> Sequence[Any]:
        """The `acts()` patterns `action` is counted under: the serving set's and a
        loaded shadow candidate's, so a candidate's own rate rule reads the actions
        allowed since it was loaded (before: only the serving set's were counted, and a
        candidate's new rule always read 0, so the shadow showed no disagreement where
        serving it would deny; an outside audit)."""
        if not action:
            return ()
        counted = serving.compiled.counts_action(action)
        candidate = self.shadow.current
        if candidate is not None:
            counted = [*counted, *candidate.compiled.counts_action(action)]
        return counted

    def _act_once(self, serving: Any, ask: _Ask, counted: Sequence[Any]) -> DecisionRecord:
        """Decide, spend the grants, count the action: one step per namespace for an
        action an `acts()` rule counts (`_counting`)."""
        ns, action, ids, actor, now = ask.ns, ask.action, ask.ids, ask.actor, ask.now
        decision: Decision = _RACED
        used: tuple[str, ...] = ()
        try:
            for _ in range(_SPEND_ATTEMPTS):
                decision, (req, snap) = self._decide_act(serving.compiled, ask)
                used = () if decision.effect == DENY else grants_to_spend(req, snap)
                if not used or self.store.use_grants(ns, used, now=now):
                    break
                decision, used = _RACED, ()
            if decision.effect != DENY and action:
                # once per counter: two spellings of one pattern share it
                for counter in dict.fromkeys(acts_counter(p) for p in counted):
                    self.store.incr_counter(ns, counter, now=now)
        except StoreUnavailableError:
            if self.fail_mode != "degraded":
                raise
            decision, used = store_down("act"), ()
        spent = f"the grant uses it spent ({', '.join(used)})" if used else ""
        counts = "the action count it moved" if decision.effect != DENY and action else ""
        taken = " and ".join(x for x in (spent, counts) if x)
        with applied_before(f"{taken} stay taken" if taken else "nothing changed"):
            return self._issue(decision, ns, "act", ids, actor, now, serving.version, used)

    def record_grant(
        self, grant: GrantRecord, actor: Creator, time: float | None = None
    ) -> GrantRecord:
        """Store a delegation issued by `actor` (a non-user's is kept but inert). Its
        issuer is stored by id, which must name the actor's kind (``user:alice``): the
        kind stated and the id's prefix cannot disagree on whether a user issued it."""
        if actor.id.partition(":")[0] != actor.kind:
            raise ValidationError(
                f"a grant's issuer is named {actor.kind}:NAME (its kind, then a name), "
                f"got {actor.id!r}",
                field="actor.id",
                code="CREATOR_KIND_MISMATCH",
            )
        return self.store.put_grant(replace(grant, issuer=actor.id), now=self._now_spending(time))

    def _decide_act(
        self, compiled: CompiledPolicySet, ask: _Ask
    ) -> tuple[Decision, tuple[Request, StoreSnapshot]]:
        ns, action, ids, arguments = ask.ns, ask.action, ask.ids, ask.arguments
        actor, spend, now = ask.actor, ask.spend, ask.now
        records, bound = self._view(ns, ids, "act", compiled) if ids else ({}, None)
        reads = self._reads(compiled, "act")
        snap, facts = snapshot_of(
            records,
            self.store,
            ns,
            now,
            scores=self._scores(ns, records, now, reads),
            reads=reads,
            bound=bound,
        )
        self._bound(snap)
        memories: tuple[Memory, ...] = tuple(facts.get(i) or UnknownMemory(i, ns) for i in ids)
        if not memories:
            memories = (action_itself(action, actor, now),)
        grants = (
            tuple(grant_facts(g) for g in self.store.grants(ns) if _may_cover(g, action, now))
            if arguments
            else ()
        )
        req = Request(
            "act",
            memories[0],
            actor,
            ns,
            spend,
            now,
            action,
            False,
            memories=memories,
            args=tuple(
                Argument(
                    a.name,
                    tuple(facts.get(s) or UnknownMemory(s, ns) for s in a.sources),
                    a.value,
                    a.digest,
                )
                for a in arguments
            ),
            grants=grants,
        )
        return self._decide_safely(compiled, req, snap, "act"), (req, snap)


__all__ = ["ActArgument", "Acts", "checked_arguments", "grant_facts", "grants_to_spend"]
