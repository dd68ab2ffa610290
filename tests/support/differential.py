"""An adapter beside the bare framework it wraps, fed the same input: each call's
outcome, and whether the wrapped one is the bare one's or a documented refusal
(the LangGraph and Mem0 fuzzes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memlineage.client import PolicyDenied

REFUSALS = (ValueError, PolicyDenied)
"""What the adapters document raising of their own: a value they or the sidecar
cannot use (the client's InvalidArgument is a ValueError), a denied decision."""

Outcome = tuple[str, Any]
"""("ok", the result) or (the exception's class name, the exception)."""


def outcome(call: Callable[[], Any]) -> Outcome:
    try:
        return "ok", call()
    except Exception as exc:  # compared with the other side's by `agrees`
        return type(exc).__name__, exc


def refused(o: Outcome) -> bool:
    return isinstance(o[1], REFUSALS)


def agrees(bare: Outcome, wrapped: Outcome) -> bool:
    """The wrapped call ended as the bare one did, or was refused as documented."""
    return wrapped[0] == bare[0] or refused(wrapped)
