"""The embedded store's old on-disk form (JSON-lines op log ``log.<gen>.jsonl`` and
``snapshot.json``), read once to import it into SQLite (``persistence``).

Reading is strict and never writes: a snapshot that does not parse, a log line that
is not JSON (except a torn last line without its newline: a crash mid-write, never
acknowledged) or an op that cannot be replayed (a dependency that does not exist)
raises ``StoreCorruptError`` naming the file and the line.  Nothing is truncated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memlineage.store.embedded.codec import StoreCorruptError, event_from_json
from memlineage.store.embedded.row import Row
from memlineage.store.embedded.state import State

SNAPSHOT = "snapshot.json"
_LOG_RE = re.compile(r"log\.([0-9]+)\.jsonl")


def legacy_files(directory: Path) -> list[Path]:
    """The old format's files in ``directory`` (snapshot first, then logs by generation)."""
    logs = sorted(
        (p for p in directory.glob("log.*.jsonl") if _LOG_RE.fullmatch(p.name)),
        key=lambda p: int(p.name.split(".")[1]),
    )
    snapshot = directory / SNAPSHOT
    return ([snapshot] if snapshot.exists() else []) + logs


def _problem(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"refers to {exc.args[0]!r}, which is not stored"
    return f"{type(exc).__name__}: {exc}"


def load_legacy(directory: Path, state: State) -> int:
    """Load the old format's snapshot and current log generation into ``state``
    (empty); returns the number of log ops replayed.  Read only."""
    generation = 0
    snapshot = directory / SNAPSHOT
    if snapshot.exists():
        try:
            data = json.loads(snapshot.read_text(encoding="utf-8"))
            generation = int(data["generation"])
            _load_snapshot(data, state)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as exc:
            raise StoreCorruptError(snapshot, _problem(exc)) from exc
    path = directory / f"log.{generation}.jsonl"
    return _replay(path, state) if path.exists() else 0


def _load_snapshot(data: dict[str, Any], state: State) -> None:
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
        space.sources = {src: list(okbad) for src, okbad in sp.get("sources", {}).items()}
        for memory_id, at in sp.get("review", ()):
            space.review.next[memory_id] = at
        space.review.rebuild()
        space.seq = sp.get("seq", 0)
        space.events.extend(event_from_json(ns, e) for e in sp.get("events", ()))


def _replay(path: Path, state: State) -> int:
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn_ok = not data.endswith(b"\n")  # the last piece lacks its newline: maybe torn
    n = 0
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            op = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if torn_ok and number == len(lines):
                break  # a torn last line (a crash mid-write): never acknowledged
            raise StoreCorruptError(path, f"line {number} is not valid JSON ({exc})") from exc
        try:
            state.apply(op)
        except Exception as exc:  # anything a hand-edited op can make apply raise
            raise StoreCorruptError(
                path, f"line {number} cannot be replayed: {_problem(exc)}"
            ) from exc
        n += 1
    return n
