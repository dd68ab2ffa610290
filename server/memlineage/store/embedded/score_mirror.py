"""The embedded store's columnar score mirror: every row's score inputs as numpy
columns, one namespace per ``Columns``, kept up to date by the rows' own writes,
answered with ``np.take`` (``EmbeddedStore.score_columns``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from memlineage.lineage.columns import ScoreColumns

if TYPE_CHECKING:
    from memlineage.store.embedded.row import Row

_set = object.__setattr__
_IX = attrgetter("_ix")

_FLOAT_COLUMNS = (
    "confidence",
    "created_at",
    "last_access",
    "access_count",
    "uses_ok",
    "uses_failed",
    "derivations",
)
_INT_COLUMNS = ("volatility", "type", "creator", "confirm_at", "confirm_n", "contra_at", "contra_n")
SCORED = frozenset(
    {
        "creator_confidence",
        "created_at",
        "last_access",
        "access_count",
        "uses_ok",
        "uses_failed",
        "volatility",
        "type",
        "creator_id",
        "confirmed_by",
        "contradicted_by",
    }
)
"""The row fields the score columns mirror (derivations: ``Row.adopt``)."""


INITIAL_ROWS = 4
"""Rows (and pool slots) a namespace's columns start with, doubled as it grows: at 64,
a namespace's 16 arrays cost ~11 KB before its second memory, so one token writing a
memory into each of 100,000 namespaces held 1.8 GB (an outside audit); at 4, ~1.5 KB."""


class Pairs:
    """Ragged per-row lists of interned sources (who confirmed / contradicted a row),
    each row's list contiguous in one growing ``pool`` at ``at[row]`` (``n[row]``
    long): a changed list is appended at the end (in place when it is already the
    last block), the old block becomes garbage, compacted when it outweighs the rest.
    A read gathers the blocks of the requested rows with numpy alone."""

    __slots__ = ("garbage", "pool", "used")

    def __init__(self) -> None:
        self.pool = np.zeros(INITIAL_ROWS, dtype=np.int64)
        self.used = 0
        self.garbage = 0

    def _reserve(self, extra: int) -> None:
        need = self.used + extra
        if need > self.pool.shape[0]:
            new = np.zeros(max(need, 2 * self.pool.shape[0]), dtype=np.int64)
            new[: self.used] = self.pool[: self.used]
            self.pool = new

    def set(
        self,
        at: np.ndarray,
        n: np.ndarray,
        ix: int,
        old_n: int,
        srcs: list[int],
        appended: bool,
        rows: int,
    ) -> None:
        if appended and old_n and int(at[ix]) + old_n == self.used:
            tail = srcs[old_n:]  # the row's block is last: extend it in place
            self._reserve(len(tail))
            self.pool[self.used : self.used + len(tail)] = tail
            self.used += len(tail)
        else:
            self.garbage += old_n
            self._reserve(len(srcs))
            at[ix] = self.used
            self.pool[self.used : self.used + len(srcs)] = srcs
            self.used += len(srcs)
        n[ix] = len(srcs)
        if self.garbage > 1024 and self.garbage > self.used - self.garbage:
            self._compact(at, n, rows)

    def _compact(self, at: np.ndarray, n: np.ndarray, rows: int) -> None:
        everyone = np.arange(rows)
        _, srcs = self.gather(at, n, everyone)
        counts = n[:rows].astype(np.int64)
        starts = np.cumsum(counts) - counts
        self.pool = np.zeros(max(64, 2 * srcs.shape[0]), dtype=np.int64)
        self.pool[: srcs.shape[0]] = srcs
        at[:rows] = starts
        self.used, self.garbage = int(srcs.shape[0]), 0

    def gather(
        self, at: np.ndarray, n: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``rows``, source) pairs of the given rows, in row order."""
        counts = n[rows].astype(np.int64)
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(rows.shape[0], dtype=np.int64), counts)
        first = np.cumsum(counts) - counts
        offset = np.arange(total, dtype=np.int64) - first[owner] + at[rows].astype(np.int64)[owner]
        return owner, self.pool[offset]


class Columns:
    """One namespace's score inputs as numpy columns, a row per memory (``index``).

    Rows are attached once (``attach``: when linked into the namespace) and kept up
    to date by ``Row.__setattr__`` (``write``) and ``Row.adopt``: the columns never
    go stale.  Arrays grow by doubling.  Strings are interned (``sources``,
    ``volatilities``, ``types``: append-only name tables).  Confirmations and
    contradictions are ragged: per row, the interned sources in the row's tuple
    order (``Pairs``), gathered as (row, source) pairs for the requested rows.
    """

    def __init__(self, rows: Mapping[str, Row] | None = None, capacity: int = INITIAL_ROWS) -> None:
        self.n = 0
        # id -> its row (the namespace's rows: `Space.rows`); an attached row knows
        # its column row (``_ix``), so no id -> column index of its own is kept (a
        # dictionary as large as the namespace, built again at every restart)
        self.rows: Mapping[str, Row] = {} if rows is None else rows
        for name in _FLOAT_COLUMNS:
            setattr(self, name, np.zeros(capacity, dtype=np.float64))
        for name in _INT_COLUMNS:
            setattr(self, name, np.zeros(capacity, dtype=np.int64))
        self.sources: list[str] = []
        self._source_ix: dict[str, int] = {}
        self.volatilities: list[str | None] = []
        self._volatility_ix: dict[str | None, int] = {}
        self.types: list[str] = []
        self._type_ix: dict[str, int] = {}
        self.confirm = Pairs()
        self.contra = Pairs()

    # declared for the type checker; set in __init__ / _grow
    confidence: np.ndarray
    created_at: np.ndarray
    last_access: np.ndarray
    access_count: np.ndarray
    uses_ok: np.ndarray
    uses_failed: np.ndarray
    derivations: np.ndarray
    volatility: np.ndarray
    type: np.ndarray
    creator: np.ndarray
    confirm_at: np.ndarray
    confirm_n: np.ndarray
    contra_at: np.ndarray
    contra_n: np.ndarray

    def source(self, name: str) -> int:
        ix = self._source_ix.get(name)
        if ix is None:
            ix = self._source_ix[name] = len(self.sources)
            self.sources.append(name)
        return ix

    def _intern_volatility(self, v: str | None) -> int:
        ix = self._volatility_ix.get(v)
        if ix is None:
            ix = self._volatility_ix[v] = len(self.volatilities)
            self.volatilities.append(v)
        return ix

    def _intern_type(self, t: str) -> int:
        ix = self._type_ix.get(t)
        if ix is None:
            ix = self._type_ix[t] = len(self.types)
            self.types.append(t)
        return ix

    def _grow(self, at_least: int = 0) -> None:
        """Double the arrays (or grow them to ``at_least`` rows at once, if more)."""
        for name in (*_FLOAT_COLUMNS, *_INT_COLUMNS):
            old = getattr(self, name)
            new = np.zeros(max(2 * old.shape[0], at_least), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def attach(self, row: Row) -> None:
        """Give ``row`` the next column row and copy its score inputs in."""
        ix = self.n
        if ix == self.confidence.shape[0]:
            self._grow()
        self.n = ix + 1
        _set(row, "_cols", self)
        _set(row, "_ix", ix)
        self.derivations[ix] = len(row._kids)
        # `write(..., fresh=True)` of every scored field, spelt out (a Record's step;
        # tests/store/test_score_columns.py checks every SCORED field is copied)
        self.confidence[ix] = row.creator_confidence
        created, accessed = row.created_at, row.last_access
        self.created_at[ix] = np.nan if created is None else created
        self.last_access[ix] = np.nan if accessed is None else accessed
        self.access_count[ix] = row.access_count
        self.uses_ok[ix] = row.uses_ok
        self.uses_failed[ix] = row.uses_failed
        self.volatility[ix] = self._intern_volatility(row.volatility)
        self.type[ix] = self._intern_type(row.type)
        self.creator[ix] = self.source(row.creator_id)
        for name in ("confirmed_by", "contradicted_by"):
            if getattr(row, name):
                self.write(row, name, getattr(row, name), fresh=True)

    def attach_many(self, rows: list[Row], columns: Mapping[str, list[Any]] | None = None) -> None:
        """``attach`` of many rows at once (a restart's hot step): the arrays grow once
        and every column is assigned as one slice; the names are interned in row order
        (creators, then confirmations and contradictions).  ``columns``: the rows'
        field values as lists in row order (a snapshot's columns, which the rows were
        built from), read instead of every row's attribute where a field has one."""
        start, n = self.n, len(rows)
        if not n:
            return
        if self.confidence.shape[0] < start + n:
            self._grow(start + n)
        at = slice(start, start + n)
        for _ in map(_set, rows, repeat("_cols"), repeat(self)):
            pass
        for _ in map(_set, rows, repeat("_ix"), range(start, start + n)):
            pass
        self.n = start + n
        given = columns or {}

        def values(field: str) -> list[Any]:
            col = given.get(field)
            return col if col is not None else list(map(attrgetter(field), rows))

        def floats(field: str) -> np.ndarray:  # None -> NaN
            return np.array(values(field), dtype=np.float64)

        self.confidence[at] = floats("creator_confidence")
        for name in ("created_at", "last_access", "access_count", "uses_ok", "uses_failed"):
            getattr(self, name)[at] = floats(name)
        self.derivations[at] = np.fromiter(
            map(len, map(attrgetter("_kids"), rows)), dtype=np.float64, count=n
        )
        for column, intern, table, field in (
            (self.volatility, self._intern_volatility, self._volatility_ix, "volatility"),
            (self.type, self._intern_type, self._type_ix, "type"),
            (self.creator, self.source, self._source_ix, "creator_id"),
        ):
            names = values(field)
            for name in dict.fromkeys(names):  # distinct, in row order
                intern(name)
            column[at] = np.fromiter(map(table.__getitem__, names), dtype=np.int64, count=n)
        for pairs, first, count, field in (
            (self.confirm, self.confirm_at, self.confirm_n, "confirmed_by"),
            (self.contra, self.contra_at, self.contra_n, "contradicted_by"),
        ):
            self._fill_pairs(pairs, first, count, values(field))

    def _fill_pairs(
        self, pairs: Pairs, at: np.ndarray, n: np.ndarray, lists: list[Sequence[str]]
    ) -> None:
        """The ragged lists of freshly attached rows (the last ``len(lists)`` column
        rows), appended to the pool in row order, as ``Pairs.set`` row by row would."""
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        total = int(counts.sum())
        if not total:
            return
        first = self.n - len(lists)
        srcs = np.fromiter(
            map(self.source, chain.from_iterable(lists)), dtype=np.int64, count=total
        )
        pairs._reserve(total)
        some = np.flatnonzero(counts)
        starts = pairs.used + np.cumsum(counts) - counts
        at[first + some] = starts[some]
        n[first + some] = counts[some]
        pairs.pool[pairs.used : pairs.used + total] = srcs
        pairs.used += total

    def write(self, row: Row, name: str, value: Any, fresh: bool = False) -> None:
        """Mirror ``row.name = value`` (called before the row's own write)."""
        ix = row._ix
        if name == "creator_confidence":
            self.confidence[ix] = value
        elif name in ("created_at", "last_access"):
            getattr(self, name)[ix] = np.nan if value is None else value
        elif name in ("access_count", "uses_ok", "uses_failed"):
            getattr(self, name)[ix] = value
        elif name == "volatility":
            self.volatility[ix] = self._intern_volatility(value)
        elif name == "type":
            self.type[ix] = self._intern_type(value)
        elif name == "creator_id":
            self.creator[ix] = self.source(value)
        elif name in ("confirmed_by", "contradicted_by"):
            new = tuple(value)
            old: tuple[str, ...] = () if fresh else tuple(getattr(row, name))
            if not new and not old:
                return
            if name == "confirmed_by":
                pairs, at, n = self.confirm, self.confirm_at, self.confirm_n
            else:
                pairs, at, n = self.contra, self.contra_at, self.contra_n
            pairs.set(
                at, n, ix, len(old), [self.source(s) for s in new], new[: len(old)] == old, self.n
            )

    def rows_of(self, ids: list[str]) -> np.ndarray | None:
        """The rows of ``ids`` when every one is attached and none repeats, else None.

        Attached ids were validated when recorded, so a batch made only of them needs
        no id validation: the lookups run in C and duplicates are found on the row
        numbers (a mask over the rows when that is cheap, else a sort)."""
        if not ids:
            return None
        try:
            found = itemgetter(*ids)(self.rows) if len(ids) > 1 else (self.rows[ids[0]],)
        except (KeyError, TypeError):  # unknown, or not even hashable: the checked path
            return None
        at = np.fromiter(map(_IX, found), dtype=np.intp, count=len(ids))
        if at.min() < 0:  # a row not attached yet (none is, outside the store's lock)
            return None
        if len(ids) > 1:
            if self.n <= 64 * len(ids):
                seen = np.zeros(self.n, dtype=bool)
                seen[at] = True
                distinct = int(np.count_nonzero(seen))
            else:
                distinct = int(np.unique(at).shape[0])
            if distinct != len(ids):
                return None
        return at

    def take(self, ids: list[str], at: np.ndarray | None = None) -> ScoreColumns:
        """The columns of the attached ids among ``ids``, in order (``np.take``);
        ``at``: their rows, when the caller already looked them up (``rows_of``)."""
        if at is None:
            at = self.rows_of(ids)  # every id known (the usual case): the lookups in C
        if at is None:
            rows = self.rows
            ids = [i for i in ids if i in rows and rows[i]._cols is self]
            at = np.fromiter((rows[i]._ix for i in ids), dtype=np.intp, count=len(ids))
        c_row, c_src = self.confirm.gather(self.confirm_at, self.confirm_n, at)
        x_row, x_src = self.contra.gather(self.contra_at, self.contra_n, at)
        return ScoreColumns(
            ids=ids,
            confidence=self.confidence[at],
            created_at=self.created_at[at],
            last_access=self.last_access[at],
            access_count=self.access_count[at],
            uses_ok=self.uses_ok[at],
            uses_failed=self.uses_failed[at],
            derivations=self.derivations[at],
            volatility=self.volatility[at],
            type=self.type[at],
            creator=self.creator[at],
            confirm_row=c_row,
            confirm_source=c_src,
            contradict_row=x_row,
            contradict_source=x_src,
            sources=self.sources,
            volatilities=self.volatilities,
            types=self.types,
        )
