"""The lineage record (PRODUCT.md §2) and the status transition table.

Records are immutable values: the store hands out copies, and every change goes
through a store operation that bumps ``version`` so compare-and-set can refuse
stale writers.  ``derivations`` is the maintained inverse of ``dependencies``;
it is not part of the record's content and adding a child does not bump the
parent's version (otherwise every new derivation would break CAS on parents).
The same holds for the reliability bookkeeping (``confirmed_by``,
``contradicted_by``, ``uses_ok``, ``uses_failed``, ``reviewed_at``): the store
maintains it and changing it never bumps ``version``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple


class Status(StrEnum):
    ACTIVE = "active"
    PENDING_VERIFICATION = "pending_verification"
    REVOKED = "revoked"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    COMPRESSED = "compressed"
    EVICTED = "evicted"


class CreatorKind(StrEnum):
    USER = "user"
    TOOL = "tool"
    REASONING = "reasoning"
    AGENT = "agent"
    SYSTEM = "system"


S = Status
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.ACTIVE: frozenset(
        {S.PENDING_VERIFICATION, S.REVOKED, S.SUPERSEDED, S.ARCHIVED, S.COMPRESSED, S.EVICTED}
    ),
    S.PENDING_VERIFICATION: frozenset(
        {S.ACTIVE, S.REVOKED, S.SUPERSEDED, S.ARCHIVED, S.COMPRESSED, S.EVICTED}
    ),
    S.ARCHIVED: frozenset(
        {S.ACTIVE, S.PENDING_VERIFICATION, S.REVOKED, S.SUPERSEDED, S.COMPRESSED, S.EVICTED}
    ),
    # superseded: a new value of the claim a compressed memory holds replaces it (it
    # was refused, and with it every new value of that claim, once the sweep compressed
    # the holder)
    S.COMPRESSED: frozenset(
        {S.PENDING_VERIFICATION, S.REVOKED, S.SUPERSEDED, S.ARCHIVED, S.EVICTED}
    ),
    S.SUPERSEDED: frozenset({S.REVOKED, S.ARCHIVED, S.EVICTED}),
    S.REVOKED: frozenset({S.EVICTED}),
    S.EVICTED: frozenset(),
}
"""Allowed ``from -> to`` status changes; everything else is a TransitionError."""

INITIAL_STATUSES = frozenset({S.ACTIVE, S.PENDING_VERIFICATION})
"""Statuses a memory may be recorded with."""

CASCADE_TRIGGERS = frozenset({S.REVOKED, S.SUPERSEDED})
"""Changing a memory to one of these marks every descendant pending_verification."""

CASCADE_MARKS = frozenset({S.ACTIVE, S.ARCHIVED, S.COMPRESSED})
"""Descendant statuses a cascade moves to pending_verification (the others keep theirs)."""

TAINTED = frozenset({S.PENDING_VERIFICATION, S.REVOKED, S.SUPERSEDED})
"""A memory recorded on a dependency in one of these statuses starts pending_verification.

This is what makes a cascade complete under concurrency: a child recorded after
its parent was marked inherits the mark at record time.
"""

CLAIM_PEERS = frozenset({S.ACTIVE, S.PENDING_VERIFICATION})
"""Claim group members a new claim confirms or contradicts (the others are history)."""

CLAIM_RELEASE = frozenset({S.REVOKED, S.SUPERSEDED, S.EVICTED})
"""Leaving for one of these releases the (subject, attribute) claim index entry."""

EVICTION_BLOCKERS = frozenset({S.ACTIVE, S.PENDING_VERIFICATION})
"""Statuses of a derivation that keep its dependency from being evicted (``evict``)."""

MUTABLE_FIELDS = ("type", "tags", "value", "volatility", "creator_confidence", "context_id")
"""Fields a compare-and-set :meth:`update` may change; lineage itself is immutable."""


def allowed_sources(target: Status) -> frozenset[Status]:
    """Statuses from which ``target`` may be reached (used by the Redis scripts)."""
    return frozenset(src for src, dests in TRANSITIONS.items() if target in dests)


class StatusChange(NamedTuple):
    """One entry of a memory's short status history (for Explain)."""

    at: float
    from_status: str
    to_status: str
    reason: str
    root_id: str


class MemoryRef(NamedTuple):
    """A namespace-qualified reference, for callers that carry namespaces explicitly.

    A dependency given as a plain string is resolved in the record's namespace; a
    ``MemoryRef`` in another namespace is refused with NamespaceError.
    """

    namespace: str
    id: str


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """Everything the sidecar needs to decide about one memory (not its content)."""

    id: str
    namespace: str
    type: str = "fact"
    tags: tuple[str, ...] = ()
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    volatility: str | None = None
    creator_kind: str = ""
    """user, tool, reasoning, agent or system; "" (unset): the kind the id names
    (``tool:web_search`` -> tool), else user. Set when recorded (`validate_new`)."""
    creator_id: str = ""
    creator_confidence: float = 1.0
    created_at: float | None = None
    context_id: str | None = None
    dependencies: tuple[str | MemoryRef, ...] = ()
    derivations: tuple[str, ...] = ()
    status: str = Status.ACTIVE.value
    successor: str | None = None
    version: int = 1
    last_access: float | None = None
    access_count: int = 0
    status_history: tuple[StatusChange, ...] = field(default=())
    confirmed_by: tuple[str, ...] = ()
    """Other sources (creator ids) that recorded the same value for this claim."""
    contradicted_by: tuple[str, ...] = ()
    """Other sources that recorded a different value for this claim."""
    uses_ok: int = 0
    """Uses of this memory reported successful (``feedback``)."""
    uses_failed: int = 0
    """Uses of this memory reported failed (``feedback``)."""
    reviewed_at: float | None = None
    """When the governance sweep last (re)scheduled this memory (``schedule_review``)."""

    @property
    def claim(self) -> tuple[str, str] | None:
        """The (subject, attribute) this memory asserts, if it is a structured claim."""
        if self.subject is None or self.attribute is None:
            return None
        return (self.subject, self.attribute)


@dataclass(frozen=True, slots=True)
class Walk:
    """Result of an ancestors/descendants traversal (breadth-first order)."""

    records: tuple[MemoryRecord, ...]
    depths: dict[str, int]
    truncated: bool


@dataclass(frozen=True, slots=True)
class LineageView:
    """Records plus their ancestors/descendants, loaded in one BFS (round trip per level)."""

    records: dict[str, MemoryRecord]
    missing: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class CascadeResult:
    """What a status change touched: the root and the descendants it re-marked.

    ``affected`` are the ids moved to pending_verification, in breadth-first
    order from the root; ``marked == len(affected)``; ``visited`` counts every
    descendant reached (including those whose status a cascade does not touch).
    """

    root: MemoryRecord
    marked: int
    visited: int
    affected: tuple[str, ...] = ()


class EventType(StrEnum):
    """Kinds of :class:`LineageEvent` (the Watch stream)."""

    RECORDED = "recorded"
    STATUS_CHANGED = "status_changed"
    CASCADED = "cascaded"
    UPDATED = "updated"
    PROPOSED = "proposed"  # the sweep will archive/evict/compress it at `deadline`
    OBJECTED = "objected"  # its owner objected: postponed until `deadline`


@dataclass(frozen=True, slots=True)
class LineageEvent:
    """One entry of a namespace's lineage event log, written atomically with its change.

    ``cursor`` is opaque to clients (a decimal sequence number on the embedded
    store, a stream entry id on Redis); pass it back as ``after`` to resume.
    Which fields are set depends on ``type``:

    * ``recorded``: ``memory_id``; ``status`` (initial), ``version`` 1,
      ``affected`` = its dependencies; when a tainted dependency made it start
      pending_verification, ``root_id`` = that dependency and ``reason`` says why.
    * ``status_changed``: ``memory_id``, ``previous_status`` -> ``status``,
      ``reason``, ``successor`` (superseded only), ``version`` (new); ``root_id``
      is set only when a newly added tainted dependency caused the change.
    * ``cascaded``: descendants re-marked pending_verification: ``affected`` (this
      chunk of them, breadth-first), ``root_id`` (the root named in their history),
      ``status`` (that root's status), ``memory_id`` (where the walk started: the
      root itself, or the memory that gained a tainted dependency), ``reason``
      (as written in their history).  One event per cascade on the embedded
      store, one per atomic chunk on Redis: concatenate consecutive ones.
    * ``updated``: ``memory_id``, ``version`` (new) after a compare-and-set update
      or an ``add_dependencies``; after a revision (``revise``) also ``status`` and
      ``previous_status``, ``affected`` = the new version's dependencies, ``reason``
      naming the version replaced and ``root_id`` the tainted dependency that made
      it pending, if any (its descendants follow in a ``cascaded`` event).
    * ``proposed``: the sweep proposes moving ``memory_id`` (owned by an agent) from
      ``previous_status`` to ``status`` at ``deadline``; ``reason`` says why and
      ``affected`` names the owners, who may object before it.
    * ``objected``: an owner (``root_id``) objected with ``reason``: the transition
      waits until ``deadline``.
    """

    cursor: str
    type: str
    namespace: str
    memory_id: str
    at: float
    root_id: str | None = None
    status: str | None = None
    previous_status: str | None = None
    reason: str = ""
    successor: str | None = None
    affected: tuple[str, ...] = ()
    version: int | None = None
    deadline: float | None = None
