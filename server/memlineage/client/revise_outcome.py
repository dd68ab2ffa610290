"""Whether a Revise whose answer never came was applied, for the adapters that keep
a store and its record in step (LangGraph, Mem0, `GuardedStore`).

A Revise is never re-sent: an UNAVAILABLE or DEADLINE_EXCEEDED answer may come after
the sidecar recorded the new version (the connection lost on the way back, the
sidecar stopped mid-call). An adapter that then put the old value back left the old
text credited to the new writer: a hidden, injected note served as the user's and
driving a payment (an outside audit). So the adapter reads the record again
(`settled`): at the version it revised, nothing was written and the old value goes
back; one version on, by this writer, the Revise was applied and the new value
stays; anything else, or no answer, and the item is taken out of the store
(`OutcomeUnknown`), so it is never served under another writer's lineage."""

from __future__ import annotations

from typing import Any

from memlineage.client.errors import DeadlineExceeded, MemLineageError, Unavailable

UNKNOWN_OUTCOME: tuple[type[MemLineageError], ...] = (Unavailable, DeadlineExceeded)
"""The errors of a call that may have been applied all the same."""


class OutcomeUnknown(MemLineageError):
    """A put or update whose new version the sidecar may or may not have recorded and
    whose record could not be read again: the item was removed from the store (or
    the write not made), so it is never served under the wrong lineage. Put it
    again."""


def settled(found: Any, expected_version: int, writer: str) -> bool | None:
    """From the record read again (`found`: Explain's answer, or the error it
    raised): False when it is still at `expected_version` (the Revise was not
    applied), True when it is one version on with `writer` its creator (applied),
    None when it cannot tell."""
    if isinstance(found, BaseException):
        return None
    memory = found.memory
    if memory.version == expected_version:
        return False
    if memory.version == expected_version + 1 and memory.creator.id == writer:
        return True
    return None


def unknown(memory_id: str, cause: MemLineageError) -> OutcomeUnknown:
    """The error an adapter raises after taking `memory_id` out of its store (with
    `cause`'s status: UNAVAILABLE or DEADLINE_EXCEEDED)."""
    return OutcomeUnknown(
        cause.code,
        f"memory {memory_id!r}: the sidecar did not say whether its new version was "
        f"recorded ({type(cause).__name__}: {cause}), nor answered a read of it; the "
        "item was removed from the store so it is never served under another writer's "
        "lineage: put it again",
    )
