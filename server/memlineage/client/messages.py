"""The request messages both clients send, built from the clients' Python arguments.

`MemLineageClient` and `AsyncMemLineageClient` differ only in how a call is made
(blocking or awaited); what a call sends is built here once, so the two cannot
drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlineage.client.convert import (
    ActArg,
    act_arguments,
    parse_actor,
    parse_creator,
    parse_operation,
    to_timestamp,
)
from memlineage.v1 import memlineage_pb2 as pb

__all__ = [
    "act",
    "check",
    "explain",
    "feedback",
    "filter_rank",
    "grant",
    "record",
    "revise",
    "run_sweep",
    "update_status",
    "watch",
]


def decision_context(
    request: Any, *, actor: str | None, budget: float | None, at: float | None
) -> None:
    """Set who asks, the budget and the decision time, each only when given."""
    if actor is not None:
        request.actor.CopyFrom(parse_actor(actor))
    if budget is not None:
        request.budget = budget
    if at is not None:
        request.time.CopyFrom(to_timestamp(at))


def record(
    namespace: str,
    memory_id: str,
    *,
    creator: str,
    confidence: float,
    type: str,
    tags: Sequence[str],
    claim: tuple[str, str, str] | None,
    volatility: str,
    context_id: str,
    dependencies: Sequence[str],
    created_at: float | None,
    actor: str | None,
    budget: float | None,
    at: float | None,
) -> pb.RecordRequest:
    memory = pb.Memory(
        id=memory_id,
        type=type,
        tags=list(tags),
        volatility=volatility,
        creator=parse_creator(creator),
        creator_confidence=confidence,
        context_id=context_id,
        dependencies=list(dependencies),
    )
    if claim is not None:
        subject, attribute, value = claim
        memory.claim.CopyFrom(pb.Claim(subject=subject, attribute=attribute, value=value))
    if created_at is not None:
        memory.created_at.CopyFrom(to_timestamp(created_at))
    request = pb.RecordRequest(namespace=namespace, memory=memory)
    decision_context(request, actor=actor, budget=budget, at=at)
    return request


def revise(
    namespace: str, memory_id: str, *, expected_version: int, **memory: Any
) -> pb.ReviseRequest:
    """A new version of ``memory_id`` over ``expected_version``: the memory (and who
    asks, the budget, the time) built as `record` builds them."""
    like = record(namespace, memory_id, **memory)
    request = pb.ReviseRequest(
        namespace=namespace, memory=like.memory, expected_version=expected_version
    )
    if like.HasField("actor"):
        request.actor.CopyFrom(like.actor)
    if like.HasField("budget"):
        request.budget = like.budget
    if like.HasField("time"):
        request.time.CopyFrom(like.time)
    return request


def check(
    namespace: str,
    operation: str,
    memory_id: str | Sequence[str],
    *,
    actor: str | None,
    budget: float | None,
    action: str,
    historical: bool,
    at: float | None,
) -> pb.CheckRequest:
    op = parse_operation(operation)
    ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
    request = pb.CheckRequest(
        namespace=namespace, operation=op, action=action, historical=historical
    )
    if op == pb.OPERATION_ACT:
        request.memory_ids.extend(ids)
    elif len(ids) == 1:
        request.memory_id = ids[0]
    else:
        raise ValueError(f"memory_id: {operation} takes one id, got {len(ids)}")
    decision_context(request, actor=actor, budget=budget, at=at)
    return request


def filter_rank(
    namespace: str,
    candidates: Sequence[tuple[str, float]],
    *,
    actor: str | None,
    budget: float | None,
    historical: bool,
    limit: int,
    at: float | None,
) -> pb.FilterRankRequest:
    request = pb.FilterRankRequest(
        namespace=namespace,
        historical=historical,
        limit=limit,
        candidates=[pb.Candidate(memory_id=i, similarity=s) for i, s in candidates],
    )
    decision_context(request, actor=actor, budget=budget, at=at)
    return request


def update_status(
    namespace: str,
    memory_id: str,
    action: pb.StatusAction,
    *,
    successor_id: str = "",
    reason: str,
    expected_version: int,
    actor: str | None,
    at: float | None,
) -> pb.UpdateStatusRequest:
    request = pb.UpdateStatusRequest(
        namespace=namespace,
        memory_id=memory_id,
        action=action,
        successor_id=successor_id,
        reason=reason,
        expected_version=expected_version,
    )
    decision_context(request, actor=actor, budget=None, at=at)
    return request


def act(
    namespace: str,
    action: str,
    args: Mapping[str, Sequence[str] | ActArg] | None,
    *,
    relies_on: Sequence[str],
    actor: str | None,
    budget: float | None,
    at: float | None,
) -> pb.CheckRequest:
    request = pb.CheckRequest(
        namespace=namespace,
        operation=pb.OPERATION_ACT,
        action=action,
        memory_ids=list(relies_on),
        arguments=act_arguments(args),
    )
    decision_context(request, actor=actor, budget=budget, at=at)
    return request


SHADOW_ACTIONS = {
    "status": pb.SHADOW_ACTION_UNSPECIFIED,
    "load": pb.SHADOW_ACTION_LOAD,
    "promote": pb.SHADOW_ACTION_PROMOTE,
    "drop": pb.SHADOW_ACTION_DROP,
}


def objection(
    namespace: str, memory_id: str, reason: str, actor: str | None, at: float | None
) -> pb.ObjectRequest:
    request = pb.ObjectRequest(namespace=namespace, memory_id=memory_id, reason=reason)
    decision_context(request, actor=actor, budget=None, at=at)
    return request


def shadow(action: str, files: Mapping[str, str] | None) -> pb.ShadowRequest:
    if action not in SHADOW_ACTIONS:
        raise ValueError(f"action: {action!r} is not one of {', '.join(SHADOW_ACTIONS)}")
    return pb.ShadowRequest(action=SHADOW_ACTIONS[action], files=dict(files or {}))


def grant(
    namespace: str,
    actions: Sequence[str],
    *,
    source: str,
    memory_id: str,
    arguments: Sequence[str],
    uses: int,
    expires_at: float | None,
    grant_id: str,
    actor: str | None,
    at: float | None,
    value: str = "",
    digest: str = "",
) -> pb.GrantRequest:
    message = pb.Grant(
        id=grant_id,
        actions=list(actions),
        arguments=list(arguments),
        source=source,
        memory_id=memory_id,
        uses=uses,
        value=value,
        digest=digest,
    )
    if expires_at is not None:
        message.expires_at.CopyFrom(to_timestamp(expires_at))
    request = pb.GrantRequest(namespace=namespace, grant=message)
    decision_context(request, actor=actor, budget=None, at=at)
    return request


def feedback(
    namespace: str,
    decision_id: str,
    memory_ids: Sequence[str],
    success: bool,
    note: str,
    at: float | None,
) -> pb.FeedbackRequest:
    request = pb.FeedbackRequest(
        namespace=namespace,
        decision_id=decision_id,
        memory_ids=list(memory_ids),
        success=success,
        note=note,
    )
    if at is not None:
        request.time.CopyFrom(to_timestamp(at))
    return request


def explain(
    namespace: str, memory_id: str, ancestor_depth: int, descendant_depth: int, decisions: int
) -> pb.ExplainRequest:
    return pb.ExplainRequest(
        namespace=namespace,
        memory_id=memory_id,
        ancestor_depth=ancestor_depth,
        descendant_depth=descendant_depth,
        decisions=decisions,
    )


def watch(namespace: str, after: str, from_oldest: bool) -> pb.WatchRequest:
    """A Watch from ``after``; ``from_oldest`` only counts before any event was seen."""
    return pb.WatchRequest(namespace=namespace, cursor=after, from_oldest=from_oldest and not after)


def run_sweep(namespace: str, batch: int, at: float | None) -> pb.RunSweepRequest:
    request = pb.RunSweepRequest(namespace=namespace, batch=batch)
    if at is not None:
        request.time.CopyFrom(to_timestamp(at))
    return request
