"""The fixed instants the suites run at, and the one MemoryRecord builder.

Two instants, kept apart on purpose (tests assert ages and timestamps relative
to them, so a suite must not switch from one to the other):

* ``NOW`` — the store and scoring suites (``tests/store/conftest.py``'s clock).
* ``T0`` — where the engine, lifecycle and end-to-end suites, and
  ``support.sidecar.RunningSidecar``, start their ``ManualClock``.

The DSL suites keep their own instant (``tests/dsl``).
"""

from __future__ import annotations

from memlineage.lineage.model import MemoryRecord, MemoryRef
from memlineage.store.base import LineageStore

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC

DEFAULT_CREATOR = "user:alice"


def memory(memory_id: str, *deps: str | MemoryRef, ns: str, **fields: object) -> MemoryRecord:
    """A memory in ``ns`` depending on ``deps``, created by ``user:alice`` unless
    ``creator_id`` is given; every other field is passed through.

    Suites bind their namespace once: ``mem = partial(memory, ns=NS)``.
    """
    fields.setdefault("creator_id", DEFAULT_CREATOR)
    return MemoryRecord(id=memory_id, namespace=ns, dependencies=deps, **fields)  # type: ignore[arg-type]


def derivation_chain(
    store: LineageStore, source: str, derivations: int, prefix: str = "m", ns: str = "default"
) -> str:
    """`{prefix}0` made by `source` (``kind:id``), then `derivations` notes of an agent
    each built on the one before, recorded in `store` directly (as a chain built before
    its source was judged). Returns the top's id."""
    record = store.record
    kind = source.split(":")[0]
    record(MemoryRecord(id=f"{prefix}0", namespace=ns, creator_kind=kind, creator_id=source))
    for i in range(1, derivations + 1):
        record(
            MemoryRecord(
                id=f"{prefix}{i}",
                namespace=ns,
                creator_kind="agent",
                creator_id="agent:assistant",
                dependencies=(f"{prefix}{i - 1}",),
            )
        )
    return f"{prefix}{derivations}"
