"""The request messages both clients send, built from the clients' Python arguments.

`MemLineageClient` and `AsyncMemLineageClient` differ only in how a call is made
(blocking or awaited); what a call sends is built here once, so the two cannot
drift apart.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from memlineage.client.convert import (
    ActArg,
    act_arguments,
    parse_actor,
    parse_creator,
    parse_operation,
    to_timestamp,
)
from memlineage.v1 import memlineage_pb2 as pb

INT32 = (-(2**31), 2**31 - 1)


def texts(name: str, value: Any) -> list[str]:
    """A list-of-strings argument, or TypeError naming `name`: a lone string was
    taken one character per item (`tags="urgent"`: six tags; `dependencies="m0"`:
    the memories "m" and "0"), and protobuf named no argument for an item that is not
    a string."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{name}: a list of strings, got the string {value!r}")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}]: {item!r} is not a string")
    return items


def number(name: str, value: Any) -> float:
    """A number argument as a float, or TypeError / ValueError naming `name` (an int
    past a float's range raised OverflowError from protobuf)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
        raise TypeError(f"{name}: {value!r} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name}: a number past a float's range") from None


def int32(name: str, value: int) -> int:
    """`value` for an int32 field of the request, or ValueError naming `name` (protobuf
    said only "Value out of range: N", a traceback in `memlineage explain --depth`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: {value!r} is not an integer")
    if not INT32[0] <= value <= INT32[1]:
        raise ValueError(f"{name}: {value} is out of range ({INT32[0]} to {INT32[1]})")
    return value


__all__ = [
    "REPLAYED",
    "VERSION_READ",
    "CheckOptions",
    "GrantFields",
    "MemoryFields",
    "RankOptions",
    "act",
    "check",
    "explain",
    "feedback",
    "filter_rank",
    "grant",
    "record",
    "replayed",
    "revise",
    "run_sweep",
    "update_status",
    "watch",
]


VERSION_READ = {"ancestor_depth": 1, "descendant_depth": 1, "decisions": 1}
"""`explain` keywords for a wrapper that reads only a record's version before its
Revise: the least lineage and decisions Explain walks (0 would mean its defaults,
8 levels each way and 20 decisions)."""

REPLAYED = "<replayed>"
"""The policy a Record's decision names when the sidecar held an identical record of
that id already and answered its first outcome (nothing decided or written again)."""


def replayed(response: pb.RecordResponse) -> bool:
    """Whether `response` answers an earlier identical Record (its retry, or the same
    lineage recorded again): the memory was there before this call."""
    reasons = response.decision.reasons
    return bool(reasons) and reasons[0].policy == REPLAYED


def decision_context(
    request: Any, *, actor: str | None, budget: float | None, at: float | None
) -> None:
    """Set who asks, the budget and the decision time, each only when given."""
    if actor is not None:
        request.actor.CopyFrom(parse_actor(actor))
    if budget is not None:
        request.budget = number("budget", budget)
    if at is not None:
        request.time.CopyFrom(to_timestamp(number("at", at)))


class _Creator(TypedDict):
    creator: str  # required (a base of its own: `Required[]` is not seen under
    # postponed annotations, so `__required_keys__` would miss it)


class MemoryFields(_Creator, total=False):
    """What ``record`` and ``revise`` take besides the memory's id (keyword only);
    the defaults apply to a key left out.

    ``creator`` (required) ``"kind:id"``; ``confidence`` the creator's, 1.0;
    ``type`` "fact"; ``tags`` (); ``claim`` ``(subject, attribute, value)`` or None;
    ``volatility`` a class name or ""; ``context_id`` ""; ``dependencies`` the ids it
    was derived from, (); ``created_at`` epoch seconds (None: now); ``actor`` who
    asks (None: the creator); ``budget`` what the step may spend; ``at`` the
    decision time (None: the sidecar's clock)."""

    confidence: float
    type: str
    tags: Sequence[str]
    claim: tuple[str, str, str] | None
    volatility: str
    context_id: str
    dependencies: Sequence[str]
    created_at: float | None
    actor: str | None
    budget: float | None
    at: float | None


class CheckOptions(TypedDict, total=False):
    """``check``'s keywords: ``actor`` who asks (None: the namespace's user, the
    sidecar's default caller), ``budget``, ``action`` (the act's name), ``historical`` (archived
    memories answer as history), ``at`` the decision time."""

    actor: str | None
    budget: float | None
    action: str
    historical: bool
    at: float | None


class RankOptions(TypedDict, total=False):
    """``filter_rank``'s keywords: ``actor``, ``budget``, ``historical`` as for
    ``check``; ``limit`` keeps at most that many (0: all kept); ``at``."""

    actor: str | None
    budget: float | None
    historical: bool
    limit: int
    at: float | None


class GrantFields(TypedDict, total=False):
    """``grant``'s keywords: ``source`` (a creator id or glob) or ``memory_id`` (one
    memory) that may fill ``arguments`` (all when empty) of the actions, ``uses``
    (1) times until ``expires_at`` (None: one hour); with ``value`` (or ``digest``)
    only an argument of exactly that value is covered; ``grant_id`` ("" : assigned);
    ``actor`` the issuer (None: the namespace's user); ``at`` only on a server in
    simulation mode (a normal one records a grant at its own clock)."""

    source: str
    memory_id: str
    arguments: Sequence[str]
    uses: int
    expires_at: float | None
    value: str
    digest: str
    grant_id: str
    actor: str | None
    at: float | None


def keywords(call: str, given: Mapping[str, Any], accepted: Any) -> None:
    """A misspelt or missing keyword is a TypeError, as for a spelt-out signature
    (`accepted`: the TypedDict the call's keywords are read by)."""
    unknown = sorted(set(given) - accepted.__required_keys__ - accepted.__optional_keys__)
    if unknown:
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
    missing = sorted(accepted.__required_keys__ - set(given))
    if missing:
        raise TypeError(f"{call}() missing required keyword argument {missing[0]!r}")


def record(namespace: str, memory_id: str, **fields: Unpack[MemoryFields]) -> pb.RecordRequest:
    keywords("record", fields, MemoryFields)
    memory = pb.Memory(
        id=memory_id,
        type=fields.get("type", "fact"),
        tags=texts("tags", fields.get("tags", ())),
        volatility=fields.get("volatility", ""),
        creator=parse_creator(fields["creator"]),
        creator_confidence=number("confidence", fields.get("confidence", 1.0)),
        context_id=fields.get("context_id", ""),
        dependencies=texts("dependencies", fields.get("dependencies", ())),
    )
    claim = fields.get("claim")
    if claim is not None:
        if isinstance(claim, str) or len(claim) != 3:
            raise ValueError(
                f"claim: is (subject, attribute, value), got {claim!r}"
            )  # before: "not enough values to unpack"
        subject, attribute, value = claim
        memory.claim.CopyFrom(pb.Claim(subject=subject, attribute=attribute, value=value))
    created_at = fields.get("created_at")
    if created_at is not None:
        memory.created_at.CopyFrom(to_timestamp(number("created_at", created_at)))
    request = pb.RecordRequest(namespace=namespace, memory=memory)
    decision_context(
        request, actor=fields.get("actor"), budget=fields.get("budget"), at=fields.get("at")
    )
    return request


def revise(
    namespace: str, memory_id: str, expected_version: int, **memory: Unpack[MemoryFields]
) -> pb.ReviseRequest:
    """A new version of ``memory_id`` over ``expected_version``: the memory (and who
    asks, the budget, the time) built as `record` builds them."""
    keywords("revise", memory, MemoryFields)
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
    namespace: str, operation: str, memory_id: str | Sequence[str], **options: Unpack[CheckOptions]
) -> pb.CheckRequest:
    keywords("check", options, CheckOptions)
    op = parse_operation(operation)
    ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
    request = pb.CheckRequest(
        namespace=namespace,
        operation=op,
        action=options.get("action", ""),
        historical=options.get("historical", False),
    )
    if op == pb.OPERATION_ACT:
        request.memory_ids.extend(ids)
    elif len(ids) == 1:
        request.memory_id = ids[0]
    else:
        raise ValueError(f"memory_id: {operation} takes one id, got {len(ids)}")
    decision_context(
        request, actor=options.get("actor"), budget=options.get("budget"), at=options.get("at")
    )
    return request


def filter_rank(
    namespace: str, candidates: Sequence[tuple[str, float]], **options: Unpack[RankOptions]
) -> pb.FilterRankRequest:
    keywords("filter_rank", options, RankOptions)
    request = pb.FilterRankRequest(
        namespace=namespace,
        historical=options.get("historical", False),
        limit=int32("limit", options.get("limit", 0)),
    )
    # Added in place, a float taken as it is: a search's candidates cost ~0.6 us each
    # (before, a Candidate built apart and a checked, named number: ~2.8 us each).
    add = request.candidates.add
    for n, (i, s) in enumerate(candidates):
        add(
            memory_id=i,
            similarity=s if type(s) is float else number(f"candidates[{n}].similarity", s),
        )
    decision_context(
        request, actor=options.get("actor"), budget=options.get("budget"), at=options.get("at")
    )
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
        memory_ids=texts("relies_on", relies_on),
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


def grant(namespace: str, actions: Sequence[str], **fields: Unpack[GrantFields]) -> pb.GrantRequest:
    keywords("grant", fields, GrantFields)
    message = pb.Grant(
        id=fields.get("grant_id", ""),
        actions=texts("actions", actions),
        arguments=texts("arguments", fields.get("arguments", ())),
        source=fields.get("source", ""),
        memory_id=fields.get("memory_id", ""),
        uses=int32("uses", fields.get("uses", 1)),
        value=fields.get("value", ""),
        digest=fields.get("digest", ""),
    )
    expires_at = fields.get("expires_at")
    if expires_at is not None:
        message.expires_at.CopyFrom(to_timestamp(number("expires_at", expires_at)))
    request = pb.GrantRequest(namespace=namespace, grant=message)
    decision_context(request, actor=fields.get("actor"), budget=None, at=fields.get("at"))
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
        memory_ids=texts("memory_ids", memory_ids),
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
        ancestor_depth=int32("ancestor_depth", ancestor_depth),
        descendant_depth=int32("descendant_depth", descendant_depth),
        decisions=int32("decisions", decisions),
    )


def watch(namespace: str, after: str, from_oldest: bool) -> pb.WatchRequest:
    """A Watch from ``after``; ``from_oldest`` only counts before any event was seen."""
    return pb.WatchRequest(namespace=namespace, cursor=after, from_oldest=from_oldest and not after)


def run_sweep(namespace: str, batch: int, at: float | None) -> pb.RunSweepRequest:
    request = pb.RunSweepRequest(namespace=namespace, batch=int32("batch", batch))
    if at is not None:
        request.time.CopyFrom(to_timestamp(number("at", at)))
    return request
