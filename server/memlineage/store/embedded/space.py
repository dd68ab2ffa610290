"""What one namespace owns in the embedded store (a namespace can never see another's
keys by construction: each has its own dictionaries).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from memlineage.lineage.model import LineageEvent
from memlineage.store.embedded.review import ReviewQueue
from memlineage.store.embedded.row import Row
from memlineage.store.embedded.score_mirror import Columns


@dataclass
class Space:
    """Everything one namespace owns."""

    rows: dict[str, Row] = field(default_factory=dict)
    claims: dict[tuple[str, str], str] = field(default_factory=dict)
    counters: dict[str, list[float]] = field(default_factory=dict)
    groups: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """Claim groups: every id ever recorded with (subject, attribute), in record order."""
    peers: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)
    """The members of each claim group a new claim may compare with: every member that
    is active or pending_verification, and some that left (dropped by the next Record
    of the claim that meets them; one that comes back is added again), so that a
    claim re-recorded without end is not compared with its whole history."""
    sources: dict[str, list[float]] = field(default_factory=dict)
    """Source statistics: creator id -> [ok, bad]."""
    review: ReviewQueue = field(default_factory=ReviewQueue)
    cols: Columns = field(init=False)
    """Score inputs of every row, as numpy columns (``score_columns``), found
    through ``rows``."""
    versions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Earlier versions of revised memories: id -> their row JSON (no status
    history), oldest first."""
    events: deque[LineageEvent] = field(default_factory=deque)
    seq: int = 0
    """Sequence number (cursor) of the last event ever appended in this namespace."""
    source_written: dict[str, int] = field(default_factory=dict)
    """Change stamp (``row.STAMPS``) of the last change of each source's statistics
    (``sources``): a decision that read a memory of that source read its credibility."""
    counted: int = 0
    """Change stamp of the last event counted in ``counters``."""

    def __post_init__(self) -> None:
        self.cols = Columns(self.rows)
