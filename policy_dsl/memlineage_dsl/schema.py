"""What a policy may name: roots, attributes, functions, obligations, symbols.

One table used by the checker (types, "did you mean") and by the compiler
(which Python attribute a path reads), so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

# Types are plain strings; `list<T>` for lists.
NUMBER, DURATION, TIME, STRING, BOOL = "number", "duration", "time", "string", "bool"
MEMORY, CREATOR, REQUEST, SOURCES, ANY = "memory", "creator", "request", "sources", "any"
LIST_STRING, LIST_MEMORY = "list<string>", "list<memory>"
ARGUMENT, LIST_ARGUMENT = "argument", "list<argument>"
# Parameter kinds of a built-in beyond plain types: a glob pattern given as a string
# constant or a named list (`acts`); an argument or a memory (`origins`).
PATTERN, ORIGIN_OF = "pattern", "argument|memory"

OPERATIONS = ("read", "write", "update", "delete", "derive", "act")
EFFECTS = ("allow", "deny", "degrade")
STRATEGIES = ("deny_overrides", "priority", "cost_aware")
RESOLVE_OPTIONS = {"waive_penalty": NUMBER}

CREATOR_KINDS = ("user", "tool", "reasoning", "agent", "system")
STATUSES = (
    "active",
    "pending_verification",
    "revoked",
    "superseded",
    "archived",
    "compressed",
    "evicted",
)
# Bare identifiers that stand for their own name as a string (`kind == user`).
SYMBOLS: frozenset[str] = frozenset(CREATOR_KINDS + STATUSES + OPERATIONS)


@dataclass(frozen=True, slots=True)
class AttrSpec:
    type: str
    py: str  # attribute name on the runtime object
    doc: str
    lineage: bool = True  # needs recorded lineage (False: id, namespace, known)


MEMORY_ATTRS: dict[str, AttrSpec] = {
    "id": AttrSpec(STRING, "id", "memory id", lineage=False),
    "namespace": AttrSpec(STRING, "namespace", "isolation unit (tenant/user/session)", False),
    "known": AttrSpec(BOOL, "known", "false when no lineage was ever recorded", lineage=False),
    "type": AttrSpec(STRING, "type", "fact, preference, decision, tool_result, reasoning, …"),
    "tags": AttrSpec(LIST_STRING, "tags", "free-form tags"),
    "subject": AttrSpec(STRING, "subject", "structured claim subject, e.g. user:42"),
    "attribute": AttrSpec(STRING, "attribute", "structured claim attribute"),
    "value": AttrSpec(STRING, "value", "structured claim value"),
    "volatility": AttrSpec(STRING, "volatility", "how fast it ages (class name)"),
    "creator": AttrSpec(CREATOR, "creator", "who or what created it"),
    "confidence": AttrSpec(NUMBER, "confidence", "creator confidence in [0,1]"),
    "created_at": AttrSpec(TIME, "created_at", "creation time"),
    "context_id": AttrSpec(STRING, "context_id", "conversation/task snapshot it came from"),
    "status": AttrSpec(STRING, "status", "active, pending_verification, revoked, …"),
    "version": AttrSpec(NUMBER, "version", "optimistic-concurrency version"),
    "successor": AttrSpec(STRING, "successor", "id of the memory that superseded it"),
    "dependencies": AttrSpec(LIST_STRING, "dependencies", "ids it was derived from"),
    "reliability": AttrSpec(NUMBER, "reliability", "reliability score in [0,1]"),
    "value_score": AttrSpec(NUMBER, "value_score", "lifecycle value score"),
    "state": AttrSpec(STRING, "state", "lifecycle state: active, archived, compressed, …"),
    "contradictions": AttrSpec(NUMBER, "contradictions", "claims contradicting it"),
    "confirmations": AttrSpec(NUMBER, "confirmations", "independent sources confirming it"),
    "access_count": AttrSpec(NUMBER, "access_count", "times it was read"),
    "last_access": AttrSpec(TIME, "last_access", "last read time"),
}

CREATOR_ATTRS: dict[str, AttrSpec] = {
    "kind": AttrSpec(STRING, "kind", "user, tool, reasoning, agent or system"),
    "id": AttrSpec(STRING, "id", "e.g. tool:flight_api, user:alice"),
}

REQUEST_ATTRS: dict[str, AttrSpec] = {
    "op": AttrSpec(STRING, "op", "read, write, update, delete, derive or act", False),
    "actor": AttrSpec(CREATOR, "actor", "who asks (kind and id)", False),
    "namespace": AttrSpec(STRING, "namespace", "the caller's namespace", False),
    "budget": AttrSpec(NUMBER, "budget", "what the caller may spend on obligations", False),
    "time": AttrSpec(TIME, "time", "decision time (same as `now`)", False),
    "action": AttrSpec(STRING, "action", "for act: the tool or action name", False),
    "historical": AttrSpec(BOOL, "historical", "an explicit historical query", False),
    "memories": AttrSpec(
        LIST_MEMORY, "memories", "for act: every memory relied on (argument sources too)", False
    ),
    "args": AttrSpec(
        LIST_ARGUMENT, "args", "for act: its arguments, bound to their sources", False
    ),
}

ARGUMENT_ATTRS: dict[str, AttrSpec] = {
    "name": AttrSpec(STRING, "name", "the argument's name, e.g. recipient", False),
    "sources": AttrSpec(
        LIST_MEMORY, "sources", "the memories its value came from (none: the agent chose)", False
    ),
    "value": AttrSpec(STRING, "value", "its value, when the runtime gives it", False),
    "digest": AttrSpec(STRING, "digest", "a digest of its value, when given", False),
}

ATTRS_BY_TYPE: dict[str, dict[str, AttrSpec]] = {
    MEMORY: MEMORY_ATTRS,
    CREATOR: CREATOR_ATTRS,
    REQUEST: REQUEST_ATTRS,
    ARGUMENT: ARGUMENT_ATTRS,
}

# Roots a condition may start from.
ROOTS: dict[str, str] = {"memory": MEMORY, "target": MEMORY, "request": REQUEST}


@dataclass(frozen=True, slots=True)
class FuncSpec:
    params: tuple[str, ...]
    optional: int  # how many trailing params may be omitted
    returns: str
    doc: str


FUNCTIONS: dict[str, FuncSpec] = {
    "age": FuncSpec((MEMORY,), 0, DURATION, "now - created_at"),
    "since": FuncSpec((TIME,), 0, DURATION, "now - the given time"),
    "ancestors": FuncSpec((MEMORY, NUMBER), 1, LIST_MEMORY, "memories it was built on"),
    "descendants": FuncSpec((MEMORY, NUMBER), 1, LIST_MEMORY, "memories built on it"),
    "lineage": FuncSpec((MEMORY, NUMBER), 1, LIST_MEMORY, "the memory and its ancestors"),
    "unknown": FuncSpec((MEMORY,), 0, BOOL, "true when no lineage was ever recorded"),
    "calls": FuncSpec((STRING, DURATION), 0, NUMBER, "calls of a source in a window"),
    "len": FuncSpec((ANY,), 0, NUMBER, "length of a list or string"),
    "acts": FuncSpec((PATTERN, DURATION), 0, NUMBER, "allowed actions matching it in a window"),
    "origins": FuncSpec(
        (ORIGIN_OF,), 0, LIST_MEMORY, "the roots of its lineage (an argument: of its sources)"
    ),
    "uncovered": FuncSpec(
        (ARGUMENT,), 0, LIST_MEMORY, "its origins neither made by a user nor covered by a grant"
    ),
    "covered": FuncSpec(
        (ARGUMENT,), 0, BOOL, "it has a source and every origin is a user's or granted"
    ),
    "granted": FuncSpec((ARGUMENT,), 0, BOOL, "a live user grant covers one of its origins"),
    "pinned": FuncSpec(
        (ARGUMENT,), 0, BOOL, "every granted origin is covered by a grant naming its value"
    ),
}


@dataclass(frozen=True, slots=True)
class ObligationSpec:
    params: tuple[str, ...]
    optional: int
    doc: str


OBLIGATIONS: dict[str, ObligationSpec] = {
    "refresh": ObligationSpec((STRING,), 0, "refresh the memory from the named source"),
    "annotate": ObligationSpec((STRING,), 0, "show the memory with this caveat"),
    "downrank": ObligationSpec((NUMBER,), 0, "multiply its retrieval rank by a factor in (0,1]"),
    "require_confirmation": ObligationSpec((STRING,), 1, "ask the user to confirm first"),
    "mark_pending": ObligationSpec((STRING,), 1, "mark it pending_verification"),
}

# Fields a `given memory` block may set (besides the MEMORY_ATTRS names).
TEST_MEMORY_FIELDS: dict[str, str] = {
    **{n: s.type for n, s in MEMORY_ATTRS.items() if n not in ("creator", "dependencies")},
    "creator": STRING,  # "kind:id", e.g. "tool:flight_api"
    "depends": LIST_MEMORY,  # names of other given memories
}
TEST_REQUEST_FIELDS: dict[str, str] = {
    "actor": STRING,
    "namespace": STRING,
    "budget": NUMBER,
    "time": TIME,
    "action": STRING,
    "historical": BOOL,
}
# Fields of a `given grant` block.
TEST_GRANT_FIELDS: dict[str, str] = {
    "actions": LIST_STRING,
    "arguments": LIST_STRING,
    "source": STRING,
    "memory": MEMORY,  # the name of a given memory
    "uses": NUMBER,
    "used": NUMBER,
    "expires": TIME,
    "created": TIME,
    "value": STRING,  # only an argument with this value is covered
    "digest": STRING,
    "by": STRING,  # the issuer, "kind:id"; default user:test
}
