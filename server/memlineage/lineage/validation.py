"""Pure input validation, shared by every backend and run before any write.

Checks that need the store (dependency existence, versions, transitions from
the *current* status) happen inside the backend's atomic step; everything that
can be decided from the input alone is decided here, with the offending field.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from memlineage.lineage.errors import CycleError, NamespaceError, TransitionError, ValidationError
from memlineage.lineage.model import (
    INITIAL_STATUSES,
    MUTABLE_FIELDS,
    TRANSITIONS,
    CreatorKind,
    MemoryRecord,
    MemoryRef,
    Status,
)

_ID_RE = re.compile(r"[A-Za-z0-9._:/-]+")
_VOLATILITY_RE = re.compile(r"[a-z0-9_]{1,32}")
_CREATOR_KINDS = frozenset(k.value for k in CreatorKind)
_STATUSES = frozenset(s.value for s in Status)


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """Configurable limits; the defaults are the team's agreed values."""

    max_id_length: int = 128
    max_dependencies: int = 256
    max_tags: int = 64
    max_tag_length: int = 64
    max_type_length: int = 64
    max_value_length: int = 1024
    max_reason_length: int = 256
    max_future_seconds: float = 300.0
    history_length: int = 8
    counter_retention_seconds: float = 7 * 86400.0
    max_walk_depth: int = 64
    max_walk_count: int = 10_000
    event_retention: int = 100_000
    """Lineage events kept per namespace (Redis trims approximately: at least this many)."""
    max_event_page: int = 10_000
    first_review_seconds: float = 3600.0
    """A new memory is first due for review (governance sweep) this long after recording."""


def valid_id(value: object, max_length: int = 128) -> bool:
    """Whether `check_id` would take `value`: the test alone, for hot loops that name
    the field (an f-string) only when it fails."""
    return type(value) is str and 0 < len(value) <= max_length and bool(_ID_RE.fullmatch(value))


def check_id(value: Any, field: str, *, max_length: int = 128) -> str:
    """An id, namespace or name: 1..max_length chars of [A-Za-z0-9._:/-]."""
    if valid_id(value, max_length):
        return value  # a str of the allowed characters (the one definition: valid_id)
    if not isinstance(value, str):
        raise ValidationError(
            f"must be a string, got {type(value).__name__}", field=field, code="INVALID_ID"
        )
    if not value:
        raise ValidationError("must not be empty", field=field, code="INVALID_ID")
    if len(value) > max_length:
        raise ValidationError(
            f"is {len(value)} characters long, the limit is {max_length}",
            field=field,
            code="ID_TOO_LONG",
        )
    if not _ID_RE.fullmatch(value):
        bad = next(c for c in value if not _ID_RE.fullmatch(c))
        raise ValidationError(
            f"contains {bad!r}; allowed are letters, digits and ._:/-",
            field=field,
            code="INVALID_ID",
        )
    return value


def _kind_named(creator_id: str) -> str:
    """The kind an id names (``agent:planner`` -> agent), else user (an unset kind)."""
    prefix = creator_id.partition(":")[0]
    return prefix if prefix in _CREATOR_KINDS else CreatorKind.USER.value


def check_creator(kind: str, creator_id: str, field: str) -> None:
    """A creator id that names a kind (``user:alice``) names its own: the kind decides
    what policies trust (``memory.creator.kind``, a grant's issuer) and the id is what
    their globs match (``user:*``), so a ``user:`` id of an agent would be trusted by
    one and not the other. An id without a kind prefix is taken with its stated kind.
    The prefix names a kind in any case (`TOOL:x`): source lists and credibility priors
    compare ids case-folded, so an agent's `TOOL:flight_api` would pass for the tool."""
    prefix, sep, _ = creator_id.partition(":")
    named = prefix.casefold()
    if sep and named in _CREATOR_KINDS and named != kind:
        raise ValidationError(
            f"{creator_id!r} names the kind {named}, the creator's kind is {kind}: "
            f"state kind {named}, or an id of the form {kind}:NAME",
            field=field,
            code="CREATOR_KIND_MISMATCH",
        )


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NAME_RE = re.compile(r"[A-Za-z0-9._:/-]+")
_GLOB_RE = re.compile(r"[A-Za-z0-9._:/*?\[\]!-]+")


def check_free_text(value: str, field: str) -> str:
    """A value a policy compares (a claim's value, an argument's, a grant's): any text
    but control characters (tab, newline and carriage return are text). NUL or an
    escape sequence stored here would reach Explain, logs and terminals."""
    bad = _CONTROL_RE.search(value)
    if bad is not None:
        raise ValidationError(
            f"contains the control character {bad.group()!r}", field=field, code="INVALID_TEXT"
        )
    return value


def check_action_name(value: str, field: str, *, glob: bool = False) -> str:
    """An action (or, with `glob`, an action pattern: `send_*`): ASCII letters, digits
    and ._:/- (and *?[]! in a pattern). A lookalike letter (a Cyrillic dze for an s) would name
    another action that no `send_*` pattern of the policies matches."""
    if not (_GLOB_RE if glob else _NAME_RE).fullmatch(value):
        allowed = "letters, digits and ._:/-" + (" and the glob characters *?[]!" if glob else "")
        bad = next((c for c in value if not (_GLOB_RE if glob else _NAME_RE).fullmatch(c)), "")
        raise ValidationError(
            f"contains {bad!r}; an action {'pattern ' if glob else ''}is ASCII {allowed}",
            field=field,
            code="INVALID_ACTION",
        )
    return value


def finite_number(value: object) -> bool:
    """A number a float holds, finite, not a bool. An integer past a float's range (as
    JSON may hold) is not one: `math.isfinite` of it raises OverflowError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _past_float(value: int | float) -> str:
    """A number `finite_number` refused, as an error message shows it."""
    return repr(value) if isinstance(value, float) else "an integer past a float's range"


def check_confidence(value: Any, field: str = "creator_confidence") -> float:
    """A finite float in [0, 1] (NaN and booleans are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("must be a number", field=field, code="INVALID_CONFIDENCE")
    if not finite_number(value):
        raise ValidationError(
            f"must be in [0, 1], got {_past_float(value)}", field=field, code="INVALID_CONFIDENCE"
        )
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValidationError(
            f"must be in [0, 1], got {value!r}", field=field, code="INVALID_CONFIDENCE"
        )
    return value


def check_time(value: Any, field: str) -> float:
    """A finite, non-negative epoch-seconds float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("must be a number of epoch seconds", field=field, code="INVALID_TIME")
    if not finite_number(value):
        raise ValidationError(
            f"must be finite and >= 0, got {_past_float(value)}", field=field, code="INVALID_TIME"
        )
    value = float(value)
    if value < 0:
        raise ValidationError(
            f"must be finite and >= 0, got {value!r}", field=field, code="INVALID_TIME"
        )
    return value


def check_reason(reason: Any, limits: StoreLimits) -> str:
    """Free text for the status history: printable, bounded."""
    if not isinstance(reason, str):
        raise ValidationError("must be a string", field="reason", code="INVALID_REASON")
    if len(reason) > limits.max_reason_length:
        raise ValidationError(
            f"is longer than {limits.max_reason_length} characters",
            field="reason",
            code="INVALID_REASON",
        )
    return check_one_line(reason, "reason", code="INVALID_REASON")


_NOT_ONE_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1 (U+009B is a terminal's CSI)
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e\u2066-\u2069]"  # bidi embeddings, overrides and isolates
)


def check_one_line(value: str, field: str, *, code: str = "INVALID_TEXT") -> str:
    """Text shown on one line (a reason, an action, a short request field): no control
    character, not even a newline, which would forge a line wherever it is printed, and
    none that reorders or moves what a terminal shows (C1 controls, bidi overrides:
    an outside audit printed a reason holding U+009B and U+202E raw)."""
    bad = _NOT_ONE_LINE.search(value)
    if bad is not None:
        raise ValidationError(
            f"must not contain control characters (U+{ord(bad.group()):04X})",
            field=field,
            code=code,
        )
    return value


def check_status(value: Any, field: str = "status") -> Status:
    if value not in _STATUSES:
        raise ValidationError(f"unknown status {value!r}", field=field, code="UNKNOWN_STATUS")
    return Status(value)


def check_transition(current: str, target: Status, memory_id: str) -> None:
    """Refuse a change that the transition table does not allow."""
    if target not in TRANSITIONS[Status(current)]:
        raise TransitionError(
            f"memory {memory_id!r} cannot go from {current} to {target.value}",
            current=current,
            requested=target.value,
        )


def _check_tags(tags: Any, limits: StoreLimits) -> tuple[str, ...]:
    if isinstance(tags, str) or not isinstance(tags, list | tuple | set | frozenset):
        raise ValidationError("must be a list of strings", field="tags", code="INVALID_TAGS")
    if len(tags) > limits.max_tags:
        raise ValidationError(
            f"has {len(tags)} tags, the limit is {limits.max_tags}",
            field="tags",
            code="TOO_MANY_TAGS",
        )
    out: list[str] = []
    for i, tag in enumerate(tags):
        if not valid_id(tag, limits.max_tag_length):  # the field named only when it fails
            check_id(tag, f"tags[{i}]", max_length=limits.max_tag_length)
        if tag not in out:
            out.append(tag)
    return tuple(out)


def _check_value(value: Any, limits: StoreLimits) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("must be a string", field="value", code="INVALID_VALUE")
    if len(value) > limits.max_value_length:
        raise ValidationError(
            f"is longer than {limits.max_value_length} characters",
            field="value",
            code="VALUE_TOO_LONG",
        )
    return check_free_text(value, "value")


def check_volatility(value: Any) -> str | None:
    """A volatility class name ("high", "static", ...): 1..32 chars of [a-z0-9_].

    The half-life of each class is configuration, not part of the record."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(
            f"must be a volatility class name, got {type(value).__name__}",
            field="volatility",
            code="INVALID_VOLATILITY",
        )
    if not _VOLATILITY_RE.fullmatch(value):
        raise ValidationError(
            f"{value[:40]!r} is not a class name: 1 to 32 characters of a-z, 0-9 and _",
            field="volatility",
            code="INVALID_VOLATILITY",
        )
    return value


def check_dependencies(
    deps: Any,
    *,
    namespace: str,
    memory_id: str,
    limits: StoreLimits,
    existing: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Dependency ids: format, same namespace, not itself, no duplicates, within the limit.

    ``existing`` are dependencies the memory already has (when adding more).
    """
    if isinstance(deps, str) or not isinstance(deps, list | tuple):
        raise ValidationError(
            "must be a list of ids", field="dependencies", code="INVALID_DEPENDENCIES"
        )
    if len(deps) + len(existing) > limits.max_dependencies:
        raise ValidationError(
            f"has {len(deps) + len(existing)} dependencies, the limit is {limits.max_dependencies}",
            field="dependencies",
            code="TOO_MANY_DEPENDENCIES",
        )
    out: list[str] = []
    seen: set[str] = set(existing)
    longest = limits.max_id_length
    for i, dep in enumerate(deps):
        if isinstance(dep, MemoryRef):
            check_id(dep.namespace, f"dependencies[{i}].namespace", max_length=longest)
            if dep.namespace != namespace:
                raise NamespaceError(
                    "dependency is in another namespace", field=f"dependencies[{i}]"
                )
            dep = dep.id
        if not valid_id(dep, longest):  # the field named only when it fails
            check_id(dep, f"dependencies[{i}]", max_length=longest)
        if dep == memory_id:
            raise CycleError(
                "a memory cannot depend on itself",
                field=f"dependencies[{i}]",
                code="SELF_DEPENDENCY",
            )
        if dep in seen:
            raise ValidationError(
                f"{dep!r} is listed twice", field=f"dependencies[{i}]", code="DUPLICATE_DEPENDENCY"
            )
        seen.add(dep)
        out.append(dep)
    return tuple(out)


_RECORD_FIELDS = tuple(MemoryRecord.__dataclass_fields__)
_RECORD_VALUES = attrgetter(*_RECORD_FIELDS)
_RECORD_POSITION = {name: i for i, name in enumerate(_RECORD_FIELDS)}


_last_checked = threading.local()
"""Per thread: (record, limits, now) of the last `validate_new` result. The engine
checks a proposed record and its store checks it again (the store's contract holds
for every caller): the second check of that same immutable record under the same
limits and time is the first one's answer, so it is not done twice per write."""


def validate_new(rec: Any, *, now: float, limits: StoreLimits) -> MemoryRecord:
    """Check a record to be created and return its normalised form (version 1, no links)."""
    last = getattr(_last_checked, "v", None)
    if last is not None and last[0] is rec and last[1] is limits and last[2] == now:
        return rec  # that check's MemoryRecord (`last[0] is rec`)
    out = _validated_new(rec, now, limits)
    _last_checked.v = (out, limits, now)
    return out


def _validated_new(rec: Any, now: float, limits: StoreLimits) -> MemoryRecord:
    if not isinstance(rec, MemoryRecord):
        raise ValidationError("must be a MemoryRecord", field="record", code="INVALID_RECORD")
    check_id(rec.id, "id", max_length=limits.max_id_length)
    check_id(rec.namespace, "namespace", max_length=limits.max_id_length)
    check_id(rec.type, "type", max_length=limits.max_type_length)
    tags = _check_tags(rec.tags, limits)
    if (rec.subject is None) != (rec.attribute is None):
        field = "attribute" if rec.attribute is None else "subject"
        raise ValidationError(
            "a claim needs both subject and attribute", field=field, code="INCOMPLETE_CLAIM"
        )
    if rec.subject is not None:
        check_id(rec.subject, "subject", max_length=limits.max_id_length)
        check_id(rec.attribute, "attribute", max_length=limits.max_id_length)
    value = _check_value(rec.value, limits)
    volatility = check_volatility(rec.volatility)
    creator_kind = rec.creator_kind or _kind_named(rec.creator_id)
    if creator_kind not in _CREATOR_KINDS:
        raise ValidationError(
            f"unknown creator kind {creator_kind!r}; expected one of "
            f"{', '.join(sorted(_CREATOR_KINDS))}",
            field="creator_kind",
            code="INVALID_CREATOR_KIND",
        )
    check_id(rec.creator_id, "creator_id", max_length=limits.max_id_length)
    check_creator(creator_kind, rec.creator_id, "creator_id")
    confidence = check_confidence(rec.creator_confidence)
    created_at = now if rec.created_at is None else check_time(rec.created_at, "created_at")
    if created_at > now + limits.max_future_seconds:
        raise ValidationError(
            f"is {created_at - now:.0f} s in the future, the limit is "
            f"{limits.max_future_seconds:.0f} s",
            field="created_at",
            code="FUTURE_TIMESTAMP",
        )
    if rec.context_id is not None:
        check_id(rec.context_id, "context_id", max_length=limits.max_id_length)
    status = check_status(rec.status)
    if status not in INITIAL_STATUSES:
        raise ValidationError(
            f"a memory is recorded as active or pending_verification, not {status.value}",
            field="status",
            code="INVALID_INITIAL_STATUS",
        )
    if rec.successor is not None:
        raise ValidationError(
            "is set by a status change, not at record time",
            field="successor",
            code="READ_ONLY_FIELD",
        )
    if rec.derivations:
        raise ValidationError(
            "are maintained by the store", field="derivations", code="READ_ONLY_FIELD"
        )
    if rec.status_history:
        raise ValidationError(
            "is maintained by the store", field="status_history", code="READ_ONLY_FIELD"
        )
    for name in ("confirmed_by", "contradicted_by"):
        if getattr(rec, name):
            raise ValidationError("is maintained by the store", field=name, code="READ_ONLY_FIELD")
    deps = check_dependencies(
        rec.dependencies, namespace=rec.namespace, memory_id=rec.id, limits=limits
    )
    values = list(_RECORD_VALUES(rec))  # positional: a third of `replace`'s cost, per write
    for name, new in (
        ("tags", tags),
        ("creator_kind", creator_kind),
        ("value", value),
        ("volatility", volatility),
        ("creator_confidence", confidence),
        ("created_at", created_at),
        ("dependencies", deps),
        ("status", status.value),
        ("version", 1),
        ("last_access", None),
        ("access_count", 0),
        ("uses_ok", 0),
        ("uses_failed", 0),
        ("reviewed_at", None),
    ):
        values[_RECORD_POSITION[name]] = new
    return MemoryRecord(*values)


def validate_changes(changes: dict[str, Any], limits: StoreLimits) -> dict[str, Any]:
    """Check the fields of a compare-and-set update; unknown or lineage fields are refused."""
    if not changes:
        raise ValidationError("no field to change", field="changes", code="EMPTY_UPDATE")
    out: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in MUTABLE_FIELDS:
            raise ValidationError(
                f"cannot be changed by update (mutable: {', '.join(MUTABLE_FIELDS)})",
                field=name,
                code="READ_ONLY_FIELD",
            )
        if name == "type":
            out[name] = check_id(value, "type", max_length=limits.max_type_length)
        elif name == "tags":
            out[name] = _check_tags(value, limits)
        elif name == "value":
            out[name] = _check_value(value, limits)
        elif name == "volatility":
            out[name] = check_volatility(value)
        elif name == "creator_confidence":
            out[name] = check_confidence(value)
        elif name == "context_id":
            out[name] = None if value is None else check_id(value, "context_id")
    return out


def check_window(window_seconds: Any, limits: StoreLimits) -> float:
    """A sliding-window length: positive and within the counter retention."""
    window = check_time(window_seconds, "window_seconds")
    if window <= 0 or window > limits.counter_retention_seconds:
        raise ValidationError(
            f"must be in (0, {limits.counter_retention_seconds:.0f}] seconds",
            field="window_seconds",
            code="INVALID_WINDOW",
        )
    return window


def check_limit(value: Any, field: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValidationError(
            f"must be an integer in [0, {maximum}]", field=field, code="INVALID_LIMIT"
        )
    return value
