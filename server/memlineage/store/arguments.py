"""Argument checks of the store contract that are the store's own: batches of ids,
event cursors and pages, wait timeouts, buffered accesses and source lists.

``LineageStore`` calls them before any backend primitive runs, so every backend
refuses the same malformed input with the same ValidationError (field and code).
The checks of single values shared with the engine live in
``memlineage.lineage.validation``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memlineage.lineage.errors import ValidationError
from memlineage.lineage.validation import check_id, check_limit, check_time

MAX_BATCH_IDS = 10_000
MAX_WAIT_SECONDS = 3600.0
MAX_CURSOR_LENGTH = 48


def id_batch_pattern(max_length: int) -> re.Pattern[str]:
    """One regex over a batch's ids joined with "\\n" (not an id character): every id of
    a batch is checked by one match; only a failing batch is re-checked id by id."""
    n = max_length
    return re.compile(rf"[A-Za-z0-9._:/-]{{1,{n}}}(?:\n[A-Za-z0-9._:/-]{{1,{n}}})*")


def check_ids(ids: Iterable[str], pattern: re.Pattern[str], max_length: int) -> list[str]:
    """The distinct ids of a batch, in order; ``pattern``: ``id_batch_pattern(max_length)``."""
    if isinstance(ids, str):
        raise ValidationError("must be a list of ids", field="ids", code="INVALID_IDS")
    out = list(dict.fromkeys(ids))
    if len(out) > MAX_BATCH_IDS:
        raise ValidationError(
            f"has {len(out)} ids, the limit is {MAX_BATCH_IDS}", field="ids", code="TOO_MANY_IDS"
        )
    joined: str | None
    try:
        joined = "\n".join(out)
    except TypeError:
        joined = None
    # The count check: an id containing "\n" would split into two valid-looking ones.
    if joined is None or (
        out and (pattern.fullmatch(joined) is None or joined.count("\n") != len(out) - 1)
    ):
        for i, memory_id in enumerate(out):
            check_id(memory_id, f"ids[{i}]", max_length=max_length)
    return out


def check_cursor(after: Any, parse: Callable[[str], str | None]) -> str | None:
    """The normalised cursor (``parse``: the backend's), or None for "from the start"."""
    if after is None:
        return None
    if not isinstance(after, str) or not after or len(after) > MAX_CURSOR_LENGTH:
        raise ValidationError(
            "must be a cursor returned by this store", field="cursor", code="INVALID_CURSOR"
        )
    parsed = parse(after)
    if parsed is None:
        raise ValidationError(
            f"{after!r} is not a cursor of this store", field="cursor", code="INVALID_CURSOR"
        )
    return parsed


def check_page(limit: Any, maximum: int) -> int:
    """An event page size in [1, maximum]."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise ValidationError(
            f"must be an integer in [1, {maximum}]", field="limit", code="INVALID_LIMIT"
        )
    return limit


def check_wait(timeout: Any) -> float:
    """A wait of at most ``MAX_WAIT_SECONDS``."""
    wait = check_time(timeout, "timeout")
    if wait > MAX_WAIT_SECONDS:
        raise ValidationError(
            f"must be at most {MAX_WAIT_SECONDS:.0f} seconds",
            field="timeout",
            code="INVALID_TIMEOUT",
        )
    return wait


def check_accesses(
    accesses: Any, ids_of: Callable[[Iterable[str]], list[str]]
) -> dict[str, tuple[int, float]]:
    """Buffered reads, id -> (count, time); ``ids_of`` checks the batch of ids."""
    if not isinstance(accesses, Mapping):
        raise ValidationError(
            "must map ids to (count, time)", field="accesses", code="INVALID_ACCESSES"
        )
    ids = ids_of(accesses.keys())
    checked: dict[str, tuple[int, float]] = {}
    for memory_id in ids:
        entry = accesses[memory_id]
        if (
            type(entry) is tuple
            and len(entry) == 2
            and type(entry[0]) is int
            and 1 <= entry[0] <= 2**62
            and type(entry[1]) is float
            and 0.0 <= entry[1] < math.inf
        ):
            checked[memory_id] = entry  # the engine's flush: no per-id messages built
            continue
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise ValidationError(
                "must be a (count, time) pair",
                field=f"accesses[{memory_id}]",
                code="INVALID_ACCESSES",
            )
        count, at = entry
        check_limit(count, f"accesses[{memory_id}].count", 2**62)
        if count < 1:
            raise ValidationError(
                "must be at least 1", field=f"accesses[{memory_id}].count", code="INVALID_LIMIT"
            )
        checked[memory_id] = (count, check_time(at, f"accesses[{memory_id}].time"))
    return checked


def check_sources(sources: Iterable[str], max_length: int) -> list[str]:
    """The distinct source ids of a batch, in order."""
    if isinstance(sources, str):
        raise ValidationError("must be a list of source ids", field="sources", code="INVALID_IDS")
    wanted = list(dict.fromkeys(sources))
    if len(wanted) > MAX_BATCH_IDS:
        raise ValidationError(
            f"has {len(wanted)} sources, the limit is {MAX_BATCH_IDS}",
            field="sources",
            code="TOO_MANY_IDS",
        )
    for i, source in enumerate(wanted):
        check_id(source, f"sources[{i}]", max_length=max_length)
    return wanted
