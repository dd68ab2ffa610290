"""Everything the embedded store keeps on disk, behind one class: ``JsonLog``.

The data directory holds an append-only JSON-lines log of ops (``log.<gen>.jsonl``)
and, once compacted, a snapshot (``snapshot.json``).  Every mutation is appended
*before* it is applied, as the op (not its effects): replaying the log re-runs the
same deterministic apply functions (``State.apply``).  ``compact`` writes a
snapshot of the whole state and starts a new, empty log generation; a torn last
line (a crash mid-write) is ignored on replay and cut off.  The snapshot carries
each namespace's rows, claims, counters, source statistics, review schedule,
retained events and event sequence, so a restart resumes every reader's cursor
(claim groups are rebuilt from the rows).

The store calls only ``open`` / ``append`` / ``size`` / ``compact`` / ``close``,
always under its lock: another on-disk form can replace this module as one unit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from memlineage.lineage.model import LineageEvent
from memlineage.store.embedded.row import Row
from memlineage.store.embedded.state import State


def _event_to_json(e: LineageEvent) -> list[Any]:
    return [int(e.cursor), e.type, e.memory_id, e.at, e.root_id, e.status, e.previous_status,
            e.reason, e.successor, list(e.affected), e.version]


def _event_from_json(ns: str, d: list[Any]) -> LineageEvent:
    return LineageEvent(cursor=str(d[0]), type=d[1], namespace=ns, memory_id=d[2], at=d[3],
                        root_id=d[4], status=d[5], previous_status=d[6], reason=d[7],
                        successor=d[8], affected=tuple(d[9]), version=d[10])


class JsonLog:
    """The write-ahead op log and snapshot of one data directory."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._dir = Path(directory)
        self._fsync = fsync
        self._file: IO[str] | None = None
        self._generation = 0

    def _path(self, generation: int) -> Path:
        return self._dir / f"log.{generation}.jsonl"

    def open(self, state: State) -> None:
        """Load the snapshot and replay the log into ``state`` (empty), then open the
        log for appending."""
        self._dir.mkdir(parents=True, exist_ok=True)
        snapshot = self._dir / "snapshot.json"
        if snapshot.exists():
            data = json.loads(snapshot.read_text(encoding="utf-8"))
            self._generation = data["generation"]
            for ns, sp in data["spaces"].items():
                space = state.space(ns)
                # All rows first: add_dependencies may have linked a row to a later one.
                rows = [Row.from_json(row) for row in sp["rows"]]
                for row in rows:
                    space.rows[row.id] = row
                for row in rows:
                    state.link(ns, row)
                space.claims = {(s, a): i for s, a, i in sp["claims"]}
                for name, times in sp["counters"].items():
                    space.counters[name] = list(times)
                space.sources = {src: list(okbad) for src, okbad in
                                 sp.get("sources", {}).items()}
                for memory_id, at in sp.get("review", ()):
                    space.review.next[memory_id] = at
                space.review.rebuild()
                space.seq = sp.get("seq", 0)
                space.events.extend(_event_from_json(ns, e) for e in sp.get("events", ()))
        path = self._path(self._generation)
        if path.exists():
            self._replay(path, state)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the store

    def _replay(self, path: Path, state: State) -> None:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
        good = 0
        for line in lines:
            if not line:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                break  # torn tail from a crash mid-write: everything before it is intact
            state.apply(op)
            good += len(line) + 1
        if good < path.stat().st_size:
            with open(path, "r+b") as fh:
                fh.truncate(good)

    def append(self, op: dict[str, Any]) -> None:
        """Write-ahead: the op is on disk (OS buffers, or fsynced) before the store
        applies it.  Nothing is written once the log is closed."""
        if self._file is None:
            return
        self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def size(self) -> int | None:
        """Bytes in the current log generation; None once closed."""
        if self._file is None:
            return None
        return os.fstat(self._file.fileno()).st_size

    def compact(self, state: State) -> None:
        """Snapshot the whole state and start a new, empty log generation."""
        gen = self._generation + 1
        # Rows keep insertion order, so dependencies precede their dependents.
        data = {"generation": gen, "spaces": {
            ns: {"rows": [row.to_json() for row in sp.rows.values()],
                 "claims": [[s, a, i] for (s, a), i in sp.claims.items()],
                 "counters": sp.counters, "seq": sp.seq,
                 "sources": sp.sources,
                 "review": [[i, t] for i, t in sp.review.next.items()],
                 "events": [_event_to_json(e) for e in sp.events]}
            for ns, sp in state.spaces.items()}}
        tmp = self._dir / "snapshot.json.tmp"
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        new_log = open(self._path(gen), "a", encoding="utf-8")  # noqa: SIM115
        os.replace(tmp, self._dir / "snapshot.json")
        old = self._path(self._generation)
        if self._file is not None:
            self._file.close()
        self._file, self._generation = new_log, gen
        old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
