"""Delegations as a store keeps them: `GrantRecord`, a plain record.

A user lets one source (a creator glob, or one memory the user pointed to) fill
some arguments of some actions, a number of times, until a time. The store keeps
grants per namespace and spends their uses atomically (`LineageStore.use_grants`);
the engine hands live ones to the policies, which decide what a grant allows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from memlineage_dsl.facts import sha256_of

from memlineage.lineage.errors import ValidationError
from memlineage.lineage.validation import check_action_name, check_free_text, check_id

MAX_GRANT_USES = 1_000_000
MAX_GRANT_PATTERNS = 64
DEFAULT_GRANT_SECONDS = 3600.0
MAX_GRANT_VALUE = 4096


SHA256 = "sha256:"
_HEX = frozenset("0123456789abcdefABCDEF")


def canonical_digest(digest: str) -> str:
    """A `sha256:` digest in one spelling, its prefix and hex lowercased (`SHA256:AB..`
    is `sha256:ab..`), so a grant and an act compare it whatever the case, and an act
    sending a value beside it has the two checked (before, only a lowercase prefix
    was: a grant pinned as `SHA256:<hex>` let an act send another value with that
    digest; an outside audit). Any other digest is kept as given."""
    if digest[:7].lower() != SHA256:
        return digest
    rest = digest[7:]
    return SHA256 + (rest.lower() if len(rest) == 64 and _HEX.issuperset(rest) else rest)


@dataclass(frozen=True, slots=True)
class GrantRecord:
    id: str
    namespace: str
    issuer: str  # "kind:id"
    actions: tuple[str, ...]
    arguments: tuple[str, ...] = ()
    source: str = ""
    memory_id: str = ""
    uses: int = 1
    used: int = 0
    expires_at: float = math.inf
    created_at: float = 0.0
    value: str = ""  # set: covers only an argument with exactly this value
    digest: str = ""  # set: covers only an argument with exactly this digest

    @property
    def issuer_kind(self) -> str:
        return self.issuer.split(":", 1)[0]

    def effective(self, now: float) -> bool:
        """Issued by a user, uses left, not expired: the only grants that cover."""
        return (
            self.issuer_kind == "user"
            and self.used < self.uses
            and self.created_at <= now < self.expires_at
        )

    def spent(self) -> GrantRecord:
        return replace(self, used=self.used + 1)

    def to_json(self) -> str:
        return json.dumps(
            [
                self.id,
                self.namespace,
                self.issuer,
                list(self.actions),
                list(self.arguments),
                self.source,
                self.memory_id,
                self.uses,
                self.used,
                None if math.isinf(self.expires_at) else self.expires_at,
                self.created_at,
                self.value,
                self.digest,
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> GrantRecord:
        v: Any = json.loads(text)
        return cls(
            str(v[0]),
            str(v[1]),
            str(v[2]),
            tuple(str(x) for x in v[3]),
            tuple(str(x) for x in v[4]),
            str(v[5]),
            str(v[6]),
            int(v[7]),
            int(v[8]),
            math.inf if v[9] is None else float(v[9]),
            float(v[10]),
            str(v[11]) if len(v) > 11 else "",
            str(v[12]) if len(v) > 12 else "",
        )


def _patterns(values: tuple[str, ...], field: str, *, required: bool) -> tuple[str, ...]:
    if required and not values:
        raise ValidationError("names no action", field=field)
    if len(values) > MAX_GRANT_PATTERNS:
        raise ValidationError(f"at most {MAX_GRANT_PATTERNS} entries", field=field)
    for i, v in enumerate(values):
        _pattern(v, f"{field}[{i}]")
    return tuple(dict.fromkeys(values))


def _pattern(v: str, field: str) -> None:
    if not v or len(v) > 256:
        raise ValidationError("must be a name or glob of 1 to 256 characters", field=field)
    check_action_name(v, field, glob=True)


def validated_grant(g: GrantRecord, now: float) -> GrantRecord:
    """`g` as it is stored: checked fields, uses 0 -> 1, no expiry -> one hour."""
    check_id(g.id, "grant.id")
    actions = _patterns(g.actions, "grant.actions", required=True)
    arguments = _patterns(g.arguments, "grant.arguments", required=False)
    for i, name in enumerate(arguments):
        if any(c in name for c in "*?["):  # compared as names: a glob covered nothing
            raise ValidationError(
                "is a glob: a grant names the arguments it covers exactly (`amount`, "
                "not `amount*`)",
                field=f"grant.arguments[{i}]",
            )
    if not g.source and not g.memory_id:
        raise ValidationError("a grant names a source or a memory_id", field="grant.source")
    if g.source:
        _pattern(g.source, "grant.source")
    if g.memory_id:
        check_id(g.memory_id, "grant.memory_id")
    for what, text in (("value", g.value), ("digest", g.digest)):
        if len(text) > MAX_GRANT_VALUE:
            raise ValidationError(f"at most {MAX_GRANT_VALUE} characters", field=f"grant.{what}")
        check_free_text(text, f"grant.{what}")
    digest = canonical_digest(g.digest)
    if g.value and digest.startswith(SHA256) and digest != sha256_of(g.value):
        # a pin of two contents: an act would be covered by either one
        raise ValidationError(
            "is not the sha256 of the grant's value (pin by one of them, or both agreeing)",
            field="grant.digest",
        )
    uses = g.uses or 1
    if not 1 <= uses <= MAX_GRANT_USES:
        raise ValidationError(f"must be in [0, {MAX_GRANT_USES}]", field="grant.uses")
    expires = g.expires_at
    if math.isinf(expires):
        expires = now + DEFAULT_GRANT_SECONDS
    if not math.isfinite(expires) or expires <= now:
        raise ValidationError("must be after the grant's time", field="grant.expires_at")
    return replace(
        g,
        digest=digest,
        actions=actions,
        arguments=arguments,
        uses=uses,
        used=0,
        expires_at=expires,
        created_at=now,
    )
