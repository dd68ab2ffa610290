"""What the evaluator reads: memory facts, the request, and a lineage snapshot.

The server fills these from any store; the in-language test runner and the
benchmarks fill them from `DictSnapshot`. Nothing here does I/O.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .horizon import crossing, window_change
from .lineage_bound import Bound, LineageCut, cut_message, levels_from

# What a request may spend on obligations when it does not say (cost units).
DEFAULT_BUDGET = 1.0


class UnknownProvenance(Exception):
    """Raised when a rule reads lineage of a memory that has none recorded.

    The evaluator turns it into "this rule does not apply": memories of unknown
    provenance are governed only by rules that test `unknown(memory)`.
    """


@dataclass(frozen=True, slots=True, eq=False)
class Creator:
    """Who made a memory, or asks. A creator stands for its id wherever a policy uses
    it as a string (the checker lets it: `memory.creator == "tool:x"`, `in` a list,
    `matches`, an obligation's argument): it equals its id, hashes and prints as it.
    Two creators are equal when kind and id are."""

    kind: str
    id: str

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Creator):
            return self.id == other.id and self.kind == other.kind
        if isinstance(other, str):
            return self.id == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.id)

    def __str__(self) -> str:
        return self.id

    @staticmethod
    def parse(text: str) -> Creator:
        """`tool:flight_api` -> Creator(kind="tool", id="tool:flight_api")."""
        kind = text.split(":", 1)[0] if ":" in text else text
        return Creator(kind, text)


@dataclass(slots=True)
class MemoryFacts:
    """The lineage record of one memory, as policies see it. A string attribute never
    set is "" (the checker types it a string: `memory.context_id == ""` is a memory
    recorded without one, `len(memory.volatility)` is 0), never None."""

    id: str
    namespace: str = "default"
    type: str = "fact"
    tags: tuple[str, ...] = ()
    subject: str = ""
    attribute: str = ""
    value: str = ""
    volatility: str = ""
    creator: Creator = field(default_factory=lambda: Creator("system", "system"))
    confidence: float = 1.0
    created_at: float = 0.0
    context_id: str = ""
    status: str = "active"
    version: int = 1
    successor: str = ""
    dependencies: tuple[str, ...] = ()
    reliability: float = 1.0
    value_score: float = 1.0
    state: str = "active"
    contradictions: int = 0
    confirmations: int = 0
    access_count: int = 0
    last_access: float | None = None
    known: bool = True


class UnknownMemory:
    """A memory the sidecar has no lineage for (a store that predates it)."""

    __slots__ = ("id", "namespace")
    known = False

    def __init__(self, id: str, namespace: str = "default") -> None:
        self.id = id
        self.namespace = namespace

    def __getattr__(self, name: str) -> object:
        raise UnknownProvenance(f"memory `{self.id}` has no recorded lineage (`{name}`)")

    def __repr__(self) -> str:
        return f"UnknownMemory({self.id!r})"


Memory = MemoryFacts | UnknownMemory


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of an `act`: its name and the memories its value came from
    (none: the agent's own choice in that step), with the value or a digest of it
    when the runtime gives them (for policies that compare)."""

    name: str
    sources: tuple[Memory, ...] = ()
    value: str = ""
    digest: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    """A delegation: the user lets one source (a creator glob, or one memory the user
    pointed to) fill some arguments of some actions, a number of times, until a time.

    Only a grant issued by a user (`issuer.kind == "user"`) with uses left and not
    expired covers anything; any other is inert."""

    id: str
    issuer: Creator
    actions: tuple[str, ...]
    arguments: tuple[str, ...] = ()  # empty: every argument
    source: str = ""  # a creator id or glob ...
    memory_id: str = ""  # ... or one memory (either may be set; both: either matches)
    uses: int = 1
    used: int = 0
    expires_at: float = math.inf
    created_at: float = 0.0
    value: str = ""  # set: only an argument with exactly this value ...
    digest: str = ""  # ... or this digest is covered

    @property
    def pinned(self) -> bool:
        """It covers one value (or digest) only: the source cannot choose another."""
        return bool(self.value or self.digest)

    def live(self, now: float) -> bool:
        """Issued by a user, not exhausted, not expired (and not issued in the future)."""
        return (
            self.issuer.kind == "user"
            and self.used < self.uses
            and self.created_at <= now < self.expires_at
        )

    def same_content(self, argument: Argument) -> bool:
        """Whether a pinned grant names `argument`'s content: by value where both carry
        one, else by digest, a value meeting a digest through its `sha256:` (so a grant
        pinned by digest covers the same text sent as a value, and the reverse; the
        hash only then). Nothing to compare: not covered."""
        if self.value and argument.value:
            return argument.value == self.value
        if self.digest and argument.digest:
            return argument.digest == self.digest
        if self.digest and argument.value:
            return sha256_of(argument.value) == self.digest
        return bool(self.value and argument.digest) and sha256_of(self.value) == argument.digest

    def covers(self, action: str, argument: Argument, origin: Memory, now: float) -> bool:
        """Whether this grant lets `origin` fill `argument` of `action` at `now`."""
        if not self.live(now):
            return False
        if not action_in(action, self.actions):
            return False
        if self.arguments and argument.name not in self.arguments:
            return False
        if (self.value or self.digest) and not self.same_content(argument):
            return False
        if self.memory_id and origin.id == self.memory_id:
            return True
        return bool(
            self.source
            and isinstance(origin, MemoryFacts)
            and fnmatch.fnmatchcase(origin.creator.id, self.source)
        )


def sha256_of(value: str) -> str:
    """A value's `sha256:` digest (its UTF-8 text), in the spelling the sidecar keeps
    digests in (lowercase): how a value meets a digest."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\s_-]+")
_NAMESPACING = re.compile(r"/|\.|:|__")


def name_key(name: str) -> str:
    """A tool or argument name as action lists compare it: camelCase split at its humps,
    case-folded, spaces and `-` as `_`: `Send_money`, `SEND-MONEY` and `SendMoney`
    are `send_money` (and `sender` is not). Patterns are keyed the same way."""
    return _SEPARATORS.sub("_", _CAMEL.sub("_", name).casefold()).strip("_")


def name_forms(name: str) -> tuple[str, ...]:
    """`name_key` of the name and of each tail after a namespacing separator (`/`, `.`,
    `:`, `__`): `bank/send_money`, `mcp__bank__send_money` and `email.send` are also
    their last parts, so a runtime's prefix does not take an action off a list."""
    forms = [name_key(name)]
    for sep in _NAMESPACING.finditer(name):
        forms.append(name_key(name[sep.end() :]))
    return tuple(f for f in dict.fromkeys(forms) if f)


@functools.lru_cache(maxsize=1024)
def name_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex of the `name_key` of every glob of an action list."""
    globs = [fnmatch.translate(name_key(p)) for p in patterns if name_key(p)]
    return re.compile("|".join(globs)) if globs else None


@functools.lru_cache(maxsize=16_384)
def action_in(action: str, patterns: tuple[str, ...]) -> bool:
    """Whether `action` is in the action list `patterns` (globs), as the language's
    `in` on an `actions` list compares (`name_forms`): the same answer for every
    spelling of one name (before: case and separators mattered, and `Send_money`,
    `bank/send_money` passed a list naming `send_*`). Memoised: every act asks it of
    each grant, the same few actions and lists over and over."""
    regex = name_pattern(patterns)
    return regex is not None and any(regex.fullmatch(f) for f in name_forms(action))


_RUN_TOGETHER = re.compile(r"[\W_]+")
_RUN_TOGETHER_GLOB = re.compile(r"[^\w*?\[\]!]+|_")


@functools.lru_cache(maxsize=1024)
def run_together_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex of every glob of an action list with its separators dropped and
    case-folded (`send_*` is `send*`)."""
    globs = [_RUN_TOGETHER_GLOB.sub("", p.casefold()) for p in patterns]
    globs = [fnmatch.translate(g) for g in globs if g.strip("*?")]
    return re.compile("|".join(globs)) if globs else None


_SEPARATED = re.compile(r"[\W_]")


@functools.lru_cache(maxsize=16_384)
def action_listed(action: str, patterns: tuple[str, ...]) -> bool:
    """A policy's `in` on an `actions` list: `action_in`; or each form case-folded
    without splitting its humps (`sEnD_mOnEy`, `send.money`: `send_money`); or, for a
    name written as one word, run together against the list run together
    (`sendmoney`, `SENDmoney`, `POSTMessage`; so `sender` is on `send_*` too), so no
    spelling of a listed tool takes it off the list (an outside audit found these
    allowed where `send_*` was meant to deny). Wider than `action_in` on purpose: a
    list names what policies test, and a grant's actions keep `action_in`'s exact
    spellings (a grant never widens)."""
    if action_in(action, patterns):
        return True
    regex, together = name_pattern(patterns), run_together_pattern(patterns)
    tails = [action[sep.end() :] for sep in _NAMESPACING.finditer(action)]
    for name in (action, *tails):
        plain = _RUN_TOGETHER.sub("_", name.casefold()).strip("_")
        if regex is not None and regex.fullmatch(plain):
            return True
        if together is not None and not _SEPARATED.search(name) and together.fullmatch(plain):
            return True
    return False


def covering_grant(
    grants: Sequence[Grant], action: str, argument: Argument, origin: Memory, now: float
) -> Grant | None:
    """The grant a use is taken from: of those covering, a pinned one (it names the
    argument's value) before one that does not, then the one expiring first (then by
    id), so the narrowest and shortest delegation is spent first."""
    best: Grant | None = None
    for g in grants:
        if g.covers(action, argument, origin, now) and (
            best is None
            or (not g.pinned, g.expires_at, g.id) < (not best.pinned, best.expires_at, best.id)
        ):
            best = g
    return best


def action_itself(action: str, actor: Creator, now: float) -> MemoryFacts:
    """What `memory` is for an act that relies on no memory at all (every argument
    the agent's own choice): the action itself, made by the actor now."""
    return MemoryFacts(
        id=f"act:{action}", type="action", creator=actor, created_at=now, last_access=now
    )


def user_made(origin: Memory) -> bool:
    """A memory with recorded lineage that a user created."""
    return isinstance(origin, MemoryFacts) and origin.creator.kind == "user"


class LineageSnapshot(Protocol):
    """Lineage around the memories of one request, already read from the store. A
    walk that needs lineage the store was not read for raises `LineageCut`."""

    def ancestors(self, memory_id: str, depth: int | None = None) -> Sequence[MemoryFacts]: ...

    def descendants(self, memory_id: str, depth: int | None = None) -> Sequence[MemoryFacts]: ...

    def calls(self, source: str | Creator, window_seconds: float, now: float) -> int: ...

    def acts(self, pattern: str | tuple[str, ...], window_seconds: float, now: float) -> int:
        """Allowed actions matching `pattern` (a glob, or a list of them) in the window."""
        ...

    def note(self, kind: str, q: object, c: object, now: float) -> None:
        """A time-dependent comparison was evaluated (see `horizon`)."""


def snap_timed(snap: LineageSnapshot) -> bool:
    """Whether `snap` takes `note`s. A snapshot may say it does not with a false
    `timed` attribute (its `note` must then do nothing): the evaluator then tests the
    conditions with plain comparisons (`OpPlan.test_fixed`), the same outcomes
    without a call per comparison. No such attribute: it does."""
    return getattr(snap, "timed", True) is not False


@dataclass(slots=True)
class Request:
    """One operation to decide. `memory` is its subject; `target` the stored
    memory an update/delete changes, or that a write would supersede."""

    op: str
    memory: Memory
    actor: Creator = field(default_factory=lambda: Creator("user", "user:default"))
    namespace: str = "default"
    budget: float = DEFAULT_BUDGET
    time: float = 0.0
    action: str = ""
    historical: bool = False
    target: Memory | None = None
    memories: tuple[Memory, ...] = ()
    args: tuple[Argument, ...] = ()  # act: the action's arguments, bound to their sources
    grants: tuple[Grant, ...] = ()  # act: the namespace's grants (live or not)


def _walk(start: str, edges: dict[str, tuple[str, ...]], depth: int | None) -> list[str]:
    """Breadth-first ids reachable from `start` (excluded), up to `depth` hops."""
    seen: dict[str, None] = {}
    frontier = [start]
    level = 0
    while frontier and (depth is None or level < depth):
        level += 1
        nxt: list[str] = []
        for node in frontier:
            for other in edges.get(node, ()):
                if other not in seen and other != start:
                    seen[other] = None
                    nxt.append(other)
        frontier = nxt
    return list(seen)


class DictSnapshot:
    """An immutable in-memory LineageSnapshot over memories and call events."""

    def __init__(
        self,
        memories: Iterable[MemoryFacts] = (),
        calls: Iterable[tuple[str, float]] = (),
        acts: Iterable[tuple[str, float]] = (),
    ) -> None:
        self.memories: dict[str, MemoryFacts] = {m.id: m for m in memories}
        self.call_events: list[tuple[str, float]] = list(calls)
        self.act_events: list[tuple[str, float]] = list(acts)  # (action, time) allowed
        # Built on first use: most requests walk only ancestors (parents are each
        # memory's own dependencies), descendants rarely.
        self._children: dict[str, tuple[str, ...]] | None = None
        # The snapshot never changes, so each walk is done once (like an entity
        # store computing its ancestor closure at load).
        self._walks: dict[tuple[str, int | None, bool], list[MemoryFacts]] = {}
        # `origins()` of an argument or memory, computed once per snapshot (by object)
        self.origins_cache: dict[int, tuple[object, list[Memory]]] = {}
        # The grant covering (argument, origin), and an argument's uncovered origins
        # (origin id ""), asked by several rules and the reasons of one act: found
        # once per snapshot (argument by object)
        self.cover_cache: dict[tuple[int, str, float], tuple[object, Any]] = {}
        # The levels of each held memory above and below the `bound`'s roots: worked
        # out on the first neighbour a walk does not find (a rare branch), not before
        self._levels: dict[bool, dict[str, int]] = {}
        # Neighbours past the `bound` the store was found not to hold (`stored`)
        self.absent: set[str] = set()

    # How much lineage the memories are (`Bound`), as a server loaded them; None: all
    # there is (the test runner is given the whole store). A walk that meets a
    # neighbour not held raises `LineageCut` when it lies past the bound.
    bound: Bound | None = None

    def ancestors(self, memory_id: str, depth: int | None = None) -> list[MemoryFacts]:
        key = (memory_id, depth, True)
        hit = self._walks.get(key)
        if hit is None:
            hit = self._walks[key] = self._ancestors(memory_id, depth)
        return hit

    def _ancestors(self, start: str, depth: int | None) -> list[MemoryFacts]:
        """`_walk` over the parent edges (each known memory's dependencies), breadth
        first, keeping the known memories."""
        memories = self.memories
        first = memories.get(start)
        if first is None or not first.dependencies or depth == 0:
            return []
        seen: dict[str, None] = {}
        out: list[MemoryFacts] = []
        frontier = [first]
        level = 0
        cut: tuple[str, str] | None = None
        while frontier and (depth is None or level < depth):
            level += 1
            nxt: list[MemoryFacts] = []
            for node in frontier:
                for other in node.dependencies:
                    if other not in seen and other != start:
                        seen[other] = None
                        m = memories.get(other)
                        if m is not None:
                            out.append(m)
                            if m.dependencies:
                                nxt.append(m)
                        elif (
                            cut is None
                            and self.bound is not None
                            and self._unloaded(node.id)
                            and self.stored(other)
                        ):
                            cut = (node.id, other)  # not loaded, rather than not stored
            frontier = nxt
        if cut is not None:
            raise LineageCut(self._cut_message("lineage", start, *cut, True), out)
        return out

    def _unloaded(self, node: str, up: bool = True) -> bool:
        """Whether the neighbours of held memory `node` above it (`up`), or below it,
        were left unloaded by the `bound` (a neighbour not held is then one past it,
        not one the store does not hold): `node` is as many levels from the nearest
        root as the bound loads, or is reached from none (or a limit cut the load)."""
        bound = self.bound
        if bound is None:
            return False
        if bound[3]:
            return True
        level = self._levels_of(up).get(node)
        return level is None or level >= (bound[1] if up else bound[2])

    def stored(self, memory_id: str) -> bool:
        """Whether a neighbour not held, past the `bound`, is a memory the store holds
        (a cut) rather than a dangling id (skipped, as one within the bound is). Here:
        unless `absent` says so; a server's snapshot asks its store."""
        return memory_id not in self.absent

    def _levels_of(self, up: bool) -> dict[str, int]:
        levels = self._levels.get(up)
        if levels is None:
            assert self.bound is not None
            levels = self._levels[up] = levels_from(
                self.memories, self.bound[0], None if up else self._children_map()
            )
        return levels

    def _cut_message(self, walk: str, start: str, node: str, other: str, up: bool) -> str:
        assert self.bound is not None
        return cut_message(self.bound, node in self._levels_of(up), walk, start, node, other, up)

    def derivations(self, memory_id: str) -> tuple[str, ...]:
        """The ids derived from held memory `memory_id`, as its store records them
        (a server's snapshot; here: those held, so none is ever missing)."""
        return ()

    def _children_map(self) -> dict[str, tuple[str, ...]]:
        children = self._children
        if children is None:
            found: dict[str, list[str]] = {}
            for m in self.memories.values():
                for dep in m.dependencies:
                    found.setdefault(dep, []).append(m.id)
            children = self._children = {k: tuple(v) for k, v in found.items()}
        return children

    def descendants(self, memory_id: str, depth: int | None = None) -> list[MemoryFacts]:
        key = (memory_id, depth, False)
        hit = self._walks.get(key)
        if hit is None:
            children = self._children_map()
            ids = _walk(memory_id, children, depth)
            hit = [self.memories[i] for i in ids if i in self.memories]
            if self.bound is not None:
                self._descended(memory_id, depth, children, hit)
            self._walks[key] = hit
        return hit

    def _descended(
        self,
        start: str,
        depth: int | None,
        children: dict[str, tuple[str, ...]],
        walked: list[MemoryFacts],
    ) -> None:
        """Raise `LineageCut` when the descendant walk from `start` (to `depth`) passed
        a held memory with a derivation the `bound` left unloaded. A memory's held
        children are counted against its recorded derivations: one held per
        derivation is the common case, checked with a comparison."""
        frontier, level, seen = [start], 0, {start}
        while frontier and (depth is None or level < depth):
            level += 1
            nxt: list[str] = []
            for node in frontier:
                held = children.get(node, ())
                derived = self.derivations(node)
                if len(derived) > len(held):
                    for other in derived:
                        if (
                            other not in self.memories
                            and self._unloaded(node, False)
                            and self.stored(other)
                        ):
                            raise LineageCut(
                                self._cut_message("descendants", start, node, other, False),
                                walked,
                            )
                for other in held:
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt

    def calls(self, source: str | Creator, window_seconds: float, now: float) -> int:
        # one exact source, as the sidecar's counters count (the checker refuses a glob)
        source = str(source)
        times = sorted(at for src, at in self.call_events if src == source)
        self.until(window_change(times, window_seconds, now))
        since = now - window_seconds
        return sum(1 for at in times if since < at <= now)

    def acts(self, pattern: str | tuple[str, ...], window_seconds: float, now: float) -> int:
        patterns = (pattern,) if isinstance(pattern, str) else pattern
        times = sorted(
            at
            for action, at in self.act_events
            if any(fnmatch.fnmatchcase(action, p) for p in patterns)
        )
        self.until(window_change(times, window_seconds, now))
        since = now - window_seconds
        return sum(1 for at in times if since < at <= now)

    # -- the decision's horizon (see `horizon`) ---------------------------------------
    # Reset before a decision, read after it; the generated code reports to `note`.
    horizon: float = math.inf
    half_life_min: float = 0.0  # shortest reliability half-life; 0: unknown (no reuse)
    value_decay: tuple[float, float] | None = None  # (beta, lambda); None: unknown

    def note(self, kind: str, q: object, c: object, now: float) -> None:
        """A comparison of a time-moving `q` with a fixed `c` was evaluated."""
        h = crossing(kind, q, c, now, self.half_life_min, self.value_decay)
        if h < self.horizon:
            self.horizon = h

    def until(self, instant: float) -> None:
        """Something the decision read stays the same until `instant`."""
        if instant < self.horizon:
            self.horizon = instant
