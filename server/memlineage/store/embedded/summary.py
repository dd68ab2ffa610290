"""What `memlineage store check` (and a backup's check of its copy) found in a data
directory, and the one line it prints."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """What a check found in a data directory."""

    path: str
    records: int
    namespaces: int
    ops: int
    """Ops in the log after the snapshot (replayed at every open)."""
    snapshot_seq: int
    """The last op the snapshot covers (0: no snapshot)."""
    last_seq: int
    events: int
    """Lineage events retained, all namespaces."""
    bytes: int
    """Size of the database file (without its WAL)."""
    grants: int = 0
    """Rows of the grants table, each decoded and its checksum held."""
    proposals: int = 0
    """Rows of the proposals table, likewise."""

    def describe(self) -> str:
        def n(count: int, noun: str) -> str:
            return f"{count:,} {noun}" + ("" if count == 1 else "s")

        return (
            f"{self.path}: ok, {n(self.records, 'record')} in {n(self.namespaces, 'namespace')}, "
            f"{n(self.events, 'event')} retained, {n(self.grants, 'grant')}, "
            f"{n(self.proposals, 'proposal')}; "
            f"{self.last_seq:,} ops written, "
            f"{self.ops:,} after the snapshot (of op {self.snapshot_seq:,}); "
            f"{self.bytes:,} bytes"
        )
