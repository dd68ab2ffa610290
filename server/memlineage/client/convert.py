"""Python values <-> pb messages: ``"kind:id"`` actors and creators, operation
names, and epoch seconds <-> Timestamp."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from memlineage.v1 import memlineage_pb2 as pb

__all__ = [
    "from_timestamp",
    "parse_actor",
    "parse_creator",
    "parse_operation",
    "to_timestamp",
]

_KINDS: dict[str, pb.CreatorKind] = {
    "user": pb.CREATOR_KIND_USER,
    "tool": pb.CREATOR_KIND_TOOL,
    "reasoning": pb.CREATOR_KIND_REASONING,
    "agent": pb.CREATOR_KIND_AGENT,
    "system": pb.CREATOR_KIND_SYSTEM,
}

_OPERATIONS: dict[str, pb.Operation] = {
    "read": pb.OPERATION_READ,
    "write": pb.OPERATION_WRITE,
    "update": pb.OPERATION_UPDATE,
    "delete": pb.OPERATION_DELETE,
    "derive": pb.OPERATION_DERIVE,
    "act": pb.OPERATION_ACT,
}


def _kind_of(text: str, what: str) -> pb.CreatorKind:
    kind = text.split(":", 1)[0]
    if kind not in _KINDS or not text.strip():
        raise ValueError(f'{what}: {text!r} is not "kind:id" with kind one of {", ".join(_KINDS)}')
    return _KINDS[kind]


def parse_actor(text: str) -> pb.Actor:
    """``"tool:flight_api"`` -> Actor(kind=TOOL, id="tool:flight_api").

    The id keeps its kind prefix, as the policy language's ``Creator.parse`` does,
    so a policy comparing ``actor.id == "tool:flight_api"`` sees the same text.
    """
    return pb.Actor(kind=_kind_of(text, "actor"), id=text)


def parse_creator(text: str) -> pb.Creator:
    """``"user:alice"`` -> Creator(kind=USER, id="user:alice"); see `parse_actor`."""
    return pb.Creator(kind=_kind_of(text, "creator"), id=text)


def parse_operation(name: str) -> pb.Operation:
    """``"read"`` … ``"act"`` -> the pb enum; anything else is a ValueError."""
    try:
        return _OPERATIONS[name]
    except KeyError:
        raise ValueError(f"operation: {name!r} is not one of {', '.join(_OPERATIONS)}") from None


def to_timestamp(t: float) -> Timestamp:
    """Epoch seconds -> Timestamp, keeping the fraction as nanoseconds."""
    if not math.isfinite(t):
        raise ValueError(f"time: {t!r} is not a finite number of seconds")
    seconds = math.floor(t)
    nanos = round((t - seconds) * 1e9)
    if nanos >= 1_000_000_000:
        seconds, nanos = seconds + 1, nanos - 1_000_000_000
    return Timestamp(seconds=seconds, nanos=nanos)


def from_timestamp(ts: Timestamp) -> float:
    """Timestamp -> epoch seconds (an unset Timestamp is 0.0)."""
    return ts.seconds + ts.nanos / 1e9


@dataclass(frozen=True)
class ActArg:
    """One argument of an act: the memories its value came from (none: the agent's
    own choice), and the value or a digest of it for policies that compare."""

    sources: Sequence[str] = ()
    value: str = ""
    digest: str = ""


def act_arguments(args: Mapping[str, Sequence[str] | ActArg] | None) -> list[pb.ActArgument]:
    """`{"recipient": ["mem-1"], "amount": ActArg(["prompt"], value="100")}` as sent."""
    out = []
    for name, arg in (args or {}).items():
        if isinstance(arg, str):
            raise TypeError(f"args[{name!r}]: a list of memory ids or an ActArg, not a string")
        a = arg if isinstance(arg, ActArg) else ActArg(tuple(arg))
        out.append(
            pb.ActArgument(name=name, sources=list(a.sources), value=a.value, digest=a.digest)
        )
    return out
