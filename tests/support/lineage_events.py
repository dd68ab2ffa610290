"""Helpers to compare lineage event logs across backends.

The embedded store writes one ``cascaded`` event per cascade, Redis one per
atomic chunk (at least one per BFS level), and cursors differ by backend;
``normalise`` drops cursors and merges consecutive chunks of one cascade so
the logs of two backends compare equal.
"""

from __future__ import annotations

from dataclasses import replace

from memlineage.lineage import LineageEvent


def normalise(events: list[LineageEvent]) -> list[LineageEvent]:
    out: list[LineageEvent] = []
    for e in events:
        e = replace(e, cursor="")
        prev = out[-1] if out else None
        if (
            prev is not None
            and e.type == prev.type == "cascaded"
            and (e.memory_id, e.root_id, e.status, e.reason, e.at)
            == (prev.memory_id, prev.root_id, prev.status, prev.reason, prev.at)
        ):
            out[-1] = replace(prev, affected=prev.affected + e.affected)
        else:
            out.append(e)
    return out


def shifted(cursor: str) -> str:
    """A well-formed cursor far ahead of ``cursor`` (either backend's format)."""
    if "-" in cursor:
        ms, _, _seq = cursor.partition("-")
        return f"{int(ms) + 10**9}-0"
    return str(int(cursor) + 10**6)
