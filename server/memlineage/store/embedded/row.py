"""The embedded store's row: the mutable twin of a MemoryRecord, with its cached
frozen copies and its JSON form (the op log's and the snapshot's).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from memlineage.lineage.model import MemoryRecord, StatusChange
from memlineage.store.embedded.score_mirror import SCORED

if TYPE_CHECKING:
    from memlineage.store.embedded.score_mirror import Columns

ROW_FIELDS = tuple(f for f in MemoryRecord.__dataclass_fields__ if f != "derivations")
FIELD_DEFAULTS = {f.name: f.default for f in MemoryRecord.__dataclass_fields__.values()}
"""Each record field's default (``dataclasses.MISSING`` for one without): what a row,
a snapshot part and a log line that lack a field take."""
_TUPLES = ("tags", "dependencies", "confirmed_by", "contradicted_by")

_set = object.__setattr__
STAMPS = itertools.count(1)
"""Change stamps: every change to a row (and to a namespace's source statistics or
counters) takes the next number. A reader takes one too (``EmbeddedStore.change_mark``)
before it reads; a row stamped at or after that mark changed since (next() on a count
is atomic: no lock)."""
_stamp = STAMPS.__next__
ACCESS_FIELDS = frozenset({"last_access", "access_count"})
"""Access statistics, stamped apart (policies that never read them ignore them)."""
UNSTAMPED = frozenset({"reviewed_at"})
"""The review schedule: no decision reads it."""
_ROW_VALUES: Callable[[MemoryRecord], tuple[Any, ...]] = attrgetter(*ROW_FIELDS)
_ORDER = tuple(MemoryRecord.__dataclass_fields__)
_BEFORE: Callable[[Row], tuple[Any, ...]] = attrgetter(*_ORDER[: _ORDER.index("derivations")])
_AFTER: Callable[[Row], tuple[Any, ...]] = attrgetter(*_ORDER[_ORDER.index("derivations") + 1 :])
"""The row's fields before and after ``derivations``, in MemoryRecord's positional order
(a positional build costs half a keyword one)."""


class Row:
    """Mutable internal twin of MemoryRecord; frozen copies are handed out, cached.

    ``record()`` builds the frozen MemoryRecord once and hands out the same object
    until the row changes (``bare()``: the same without status history, for
    decisions; it is derived from ``_rec`` and only valid while ``_rec`` is set, so
    dropping ``_rec`` drops both).  Invalidation cannot be forgotten: every field assignment goes
    through ``__setattr__``, which drops the cached copies, and nothing is mutated
    in place: ``status_history`` and the other sequences are tuples that are
    reassigned, and the derivation list (``_kids``, the one growing list) changes
    only through ``adopt``, which drops them too.
    """

    __slots__ = (*ROW_FIELDS, "_kids", "_rec", "_bare", "_cols", "_ix", "written", "accessed")

    # MemoryRecord's fields but ``derivations`` (the slots above; declared for the type
    # checker).  A stored row's dependencies are plain ids: validate_new resolved refs.
    id: str
    namespace: str
    type: str
    tags: tuple[str, ...]
    subject: str | None
    attribute: str | None
    value: str | None
    volatility: str | None
    creator_kind: str
    creator_id: str
    creator_confidence: float
    created_at: float | None
    context_id: str | None
    dependencies: tuple[str, ...]
    status: str
    successor: str | None
    version: int
    last_access: float | None
    access_count: int
    status_history: tuple[StatusChange, ...]
    confirmed_by: tuple[str, ...]
    contradicted_by: tuple[str, ...]
    uses_ok: int
    uses_failed: int
    reviewed_at: float | None
    _kids: list[str]
    _rec: MemoryRecord | None
    _bare: MemoryRecord | None
    _cols: Columns | None
    _ix: int
    written: int  # the stamp of the last change other than access statistics
    accessed: int  # the stamp of the last change of access statistics

    def __init__(self) -> None:
        _set(self, "_kids", [])
        _set(self, "_rec", None)
        _set(self, "_bare", None)
        _set(self, "_cols", None)  # the namespace's Columns once attached, at row _ix
        _set(self, "_ix", -1)
        _set(self, "written", _stamp())
        _set(self, "accessed", 0)

    def __setattr__(self, name: str, value: Any) -> None:
        cols = self._cols
        if cols is not None and name in SCORED:
            cols.write(self, name, value)  # before the write: it may read the old value
        _set(self, name, value)
        _set(self, "_rec", None)  # _bare is only valid while _rec is set
        if name in ACCESS_FIELDS:
            _set(self, "accessed", _stamp())
        elif name not in UNSTAMPED:
            _set(self, "written", _stamp())

    @property
    def claim(self) -> tuple[str, str] | None:
        """The (subject, attribute) this row asserts (validation sets both or neither)."""
        subject, attribute = self.subject, self.attribute
        return None if subject is None or attribute is None else (subject, attribute)

    def invalidate(self) -> None:
        _set(self, "_rec", None)
        _set(self, "written", _stamp())

    def mark(self, status: str, entry: StatusChange, cap: int) -> None:
        """Move to ``status`` with a history entry (capped) and a version bump: the
        cascade's hot step, three fields for one invalidation."""
        history = (*self.status_history, entry)
        if len(history) > cap:
            history = history[len(history) - cap :]
        _set(self, "status_history", history)
        _set(self, "status", status)
        _set(self, "version", self.version + 1)
        _set(self, "_rec", None)
        _set(self, "written", _stamp())

    def adopt(self, child: str) -> None:
        """Record a derivation: ``child`` was recorded with this row as a dependency."""
        self._kids.append(child)
        self.invalidate()
        cols = self._cols
        if cols is not None:
            cols.derivations[self._ix] += 1.0

    def disown(self, child: str) -> None:
        """Drop a derivation: ``child`` was revised onto other dependencies."""
        self._kids.remove(child)
        self.invalidate()
        cols = self._cols
        if cols is not None:
            cols.derivations[self._ix] -= 1.0

    def record(self) -> MemoryRecord:
        """The frozen record (with history and derivations), cached until a change."""
        rec = self._rec
        if rec is None:
            # One tuple, as the call with the star-args around the positional would build.
            fields = (*_BEFORE(self), tuple(sorted(self._kids)), *_AFTER(self))
            rec = MemoryRecord(*fields)
            _set(self, "_rec", rec)
            _set(self, "_bare", None)  # derived from the previous _rec: stale
        return rec

    def bare(self) -> MemoryRecord:
        """The frozen record without status history (the same object when it has none)."""
        full = self._rec
        rec = self._bare
        if full is None or rec is None:
            rec = full = self.record()
            if full.status_history:
                rec = replace(full, status_history=())
            _set(self, "_bare", rec)
        return rec

    @classmethod
    def bulk_from_columns(cls, columns: dict[str, list[Any]], n: int) -> list[Row]:
        """``n`` rows from a snapshot part's columns (a field -> its ``n`` JSON values;
        fields it lacks, or does not know, take the record's defaults), as ``from_json``
        would build them but without its per-field ``__setattr__``: a fresh row has no
        cached copy and no columns yet (``Columns.attach_many`` attaches them), so
        every slot is set directly, and all rows take one change stamp."""
        values: list[Any] = []
        for name in ROW_FIELDS:
            if name not in columns:
                values.append(repeat(FIELD_DEFAULTS[name], n))
                continue
            col = columns[name]
            if len(col) != n:
                raise ValueError(f"column {name} holds {len(col)} values, not {n}")
            if name in _TUPLES:
                col = list(map(tuple, col))
            elif name == "status_history":
                col = [tuple(StatusChange(*h) for h in v) if v else () for v in col]
            values.append(col)
        return list(map(_Fresh, *values, repeat(_stamp(), n)))

    @classmethod
    def from_record(cls, rec: MemoryRecord) -> Row:
        """A fresh row (no cached copy, no columns yet: nothing for ``__setattr__`` to
        drop or mirror), its slots set directly, stamped once as changed now."""
        row = cls()
        for name, value in zip(ROW_FIELDS, _ROW_VALUES(rec), strict=True):
            _set(row, name, value)
        _set(row, "status_history", tuple(rec.status_history))
        stamp = _stamp()
        _set(row, "written", stamp)
        _set(row, "accessed", stamp)
        return row

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in ROW_FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        row = cls()
        for f in ROW_FIELDS:  # fields added later default (logs written before them)
            setattr(row, f, data[f] if f in data else FIELD_DEFAULTS[f])
        for f in _TUPLES:
            setattr(row, f, tuple(getattr(row, f)))
        row.status_history = tuple(StatusChange(*h) for h in row.status_history)
        if not isinstance(row.volatility, str | None):
            row.volatility = None  # numeric volatility of logs written before classes
        return row


_FRESH_SLOTS = {
    "_kids": "[]",
    "_rec": "None",
    "_bare": "None",
    "_cols": "None",
    "_ix": "-1",
    "written": "stamp",
    "accessed": "0",
}
"""What ``Row.__init__`` sets, for ``_Fresh``: every slot of Row must be a record
field or named here (a KeyError at import otherwise, never a half-built row)."""


def _fresh_init() -> Callable[..., None]:
    """``_Fresh.__init__``: every slot of Row set by a plain attribute store (generated,
    as dataclasses do), then the object becomes a Row."""
    fields = ", ".join(ROW_FIELDS)
    body = [f"    self.{f} = {f}" for f in ROW_FIELDS]
    body += [f"    self.{s} = {_FRESH_SLOTS[s]}" for s in Row.__slots__ if s not in ROW_FIELDS]
    body.append("    self.__class__ = Row")
    namespace: dict[str, Any] = {"Row": Row}
    exec(f"def __init__(self, {fields}, stamp):\n" + "\n".join(body), namespace)
    init: Callable[..., None] = namespace["__init__"]
    return init


class _Fresh(Row):
    """A Row under construction (``Row.bulk_from_columns``): the same slots with the
    plain ``object.__setattr__``; its ``__init__`` turns it into a Row when done."""

    __slots__ = ()
    __setattr__ = object.__setattr__  # type: ignore[assignment]
    __init__ = _fresh_init()
