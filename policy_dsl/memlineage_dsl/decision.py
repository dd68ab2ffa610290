"""The decision the evaluator returns: effect, obligations, score, cost, reasons."""

from __future__ import annotations

from dataclasses import dataclass

ALLOW, DEGRADE, DENY = "allow", "degrade", "deny"
_RANK = {ALLOW: 0, DEGRADE: 1, DENY: 2}

# Why a policy appears in `reasons`.
FIRED, WAIVED, OVERRIDDEN, ERROR = "fired", "waived", "overridden", "error"


@dataclass(frozen=True, slots=True)
class ObligationOut:
    """One obligation the caller must honour, e.g. refresh("tool:flight_api")."""

    kind: str
    args: tuple[object, ...]
    policy: str

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(repr(a) for a in self.args)})"


@dataclass(frozen=True, slots=True)
class Reason:
    policy: str
    effect: str
    message: str
    priority: int
    status: str = FIRED  # fired | waived | overridden | error


@dataclass(frozen=True, slots=True)
class Decision:
    effect: str
    compliance_score: float
    expected_cost: float
    obligations: tuple[ObligationOut, ...] = ()
    reasons: tuple[Reason, ...] = ()
    errors: tuple[str, ...] = ()  # runtime errors of rules (each resolved fail-closed)

    def has_obligation(self, kind: str, args: tuple[object, ...] | None = None) -> bool:
        return any(o.kind == kind and (args is None or o.args == args) for o in self.obligations)


def stricter(a: str, b: str) -> str:
    """The more restrictive of two effects (deny > degrade > allow)."""
    return a if _RANK[a] >= _RANK[b] else b
