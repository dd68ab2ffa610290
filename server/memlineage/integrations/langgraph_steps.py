"""The steps a `GuardedLangGraphStore` plan yields (`langgraph_store`): batches for the
wrapped store and calls for the sidecar, as data, so one plan is driven sync or async."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from langgraph.store.base import Op, Result

from memlineage.client.errors import MemLineageError


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Run these ops on the wrapped store; the plan gets its results. From a
    ``protected`` step on (the batch's writes), `abatch` runs the rest of the plan to
    its end even if its caller is cancelled: a write ends with its record or rollback."""

    ops: list[Op]
    protected: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    """One sidecar call, as data so a driver may make it sync, in a thread or async."""

    method: Literal["record", "check", "filter_rank", "explain", "revise"]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Calls:
    """Make these calls; the plan gets each one's answer, or the error it raised (any:
    one raised in the driver skipped a rollback). ``protected``: as `StoreBatch`'s."""

    calls: list[Call]
    protected: bool = False


Step: TypeAlias = StoreBatch | Calls
Plan: TypeAlias = Generator[Step, Any, list[Result]]


def answer(reply: Any) -> Any:
    if isinstance(reply, Exception):
        raise reply
    return reply


def already_exists(reply: Any) -> bool:
    return isinstance(reply, MemLineageError) and getattr(reply.code, "name", "") == (
        "ALREADY_EXISTS"
    )
