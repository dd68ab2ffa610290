"""A candidate policy set beside the serving one: every decision the engine takes
fresh is also taken by the candidate, on the same request and lineage, without
changing the answer; disagreements are counted by (policy, serving effect, candidate
effect) and logged with both decisions; the candidate can be promoted (it then
serves, atomically) or dropped.

The bound on its cost: one more evaluation per fresh decision (microseconds: the
evaluator is compiled Python) plus whatever lineage the candidate reads that the
serving set does not (`uses`/`reads` are the union of both while a candidate is
loaded). Decisions answered by reuse are not compared again: each was compared when
it was taken.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

from memlineage_dsl.decision import FIRED, Decision
from memlineage_dsl.diagnostics import Diagnostic
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import LineageSnapshot, Request

from memlineage.engine.policies import PolicyHolder, ServingPolicies
from memlineage.lineage.errors import NothingLoadedError, ValidationError

__all__ = ["ShadowControl", "ShadowDiff", "ShadowSet", "ShadowStatus"]

_LOG = logging.getLogger("memlineage.shadow")
EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class ShadowDiff:
    policy: str  # the policy whose firing differs ("<resolution>" when none does)
    serving: str  # the serving set's effect
    candidate: str  # the candidate's
    count: int
    examples: tuple[str, ...]  # "op memory_ids" of the first few


@dataclass(frozen=True, slots=True)
class ShadowStatus:
    active: bool
    version: str = ""
    compared: int = 0
    disagreed: int = 0
    diffs: tuple[ShadowDiff, ...] = ()


@dataclass
class _Loaded:
    serving: ServingPolicies
    compared: int = 0
    disagreed: int = 0
    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    examples: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)


class ShadowSet:
    """The candidate, its tallies, and load / drop / promote (under one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None

    @property
    def current(self) -> ServingPolicies | None:
        loaded = self._loaded
        return loaded.serving if loaded is not None else None

    def load(self, candidate: ServingPolicies) -> None:
        """Take `candidate` as the shadow set (its tallies start from zero)."""
        with self._lock:
            self._loaded = _Loaded(candidate)

    def drop(self) -> ServingPolicies | None:
        """Stop comparing; the candidate that was loaded, if any."""
        with self._lock:
            loaded, self._loaded = self._loaded, None
        return loaded.serving if loaded is not None else None

    def observe(self, op: str, req: Request, snap: LineageSnapshot, served: Decision) -> None:
        """Decide `req` with the candidate too; count and log a disagreement. Never
        raises, never changes `served`."""
        loaded = self._loaded
        if loaded is None:
            return
        try:
            shadow = decide(loaded.serving.compiled, req, snap)
        except Exception:  # decide is total; this is defence for the serving path
            return
        changed = shadow.effect != served.effect
        with self._lock:
            if self._loaded is not loaded:
                return  # dropped or replaced meanwhile
            loaded.compared += 1
            if not changed:
                return
            loaded.disagreed += 1
            was = {r.policy for r in served.reasons if r.status == FIRED}
            now = {r.policy for r in shadow.reasons if r.status == FIRED}
            where = f"{op} {','.join(m.id for m in (req.memories or (req.memory,)))}"
            for policy in sorted(was ^ now) or ["<resolution>"]:
                key = (policy, served.effect, shadow.effect)
                loaded.counts[key] += 1
                shown = loaded.examples.setdefault(key, [])
                if len(shown) < EXAMPLES:
                    shown.append(where)
        _LOG.info(
            json.dumps(
                {
                    "shadow_version": loaded.serving.version,
                    "op": op,
                    "namespace": req.namespace,
                    "memory_ids": [m.id for m in (req.memories or (req.memory,))],
                    "serving": _brief(served),
                    "candidate": _brief(shadow),
                },
                separators=(",", ":"),
            )
        )

    def status(self) -> ShadowStatus:
        with self._lock:
            loaded = self._loaded
            if loaded is None:
                return ShadowStatus(False)
            diffs = tuple(
                ShadowDiff(p, a, b, n, tuple(loaded.examples.get((p, a, b), ())))
                for (p, a, b), n in loaded.counts.most_common()
            )
            return ShadowStatus(
                True, loaded.serving.version, loaded.compared, loaded.disagreed, diffs
            )


def _brief(d: Decision) -> dict[str, object]:
    return {
        "effect": d.effect,
        "score": round(d.compliance_score, 6),
        "policies": [r.policy for r in d.reasons if r.status == FIRED],
    }


class ShadowControl:
    """The engine's shadow operations (mixed into `Engine`): load, promote, drop."""

    shadow: ShadowSet
    shadow_dir: str | None
    policies: PolicyHolder

    def shadow_load(
        self, files: dict[str, str] | None = None
    ) -> tuple[ShadowStatus, list[Diagnostic]]:
        """Compile `files` (or `shadow_dir`) and compare it from now on; a set that does
        not compile is not loaded (the diagnostics say why)."""
        if not files and not self.shadow_dir:
            raise ValidationError(
                "no files given and the server has no shadow_policy_dir", field="files"
            )
        candidate, diagnostics = PolicyHolder.candidate(self.shadow_dir, files)
        if candidate is not None:
            self.shadow.load(candidate)
        return self.shadow.status(), diagnostics

    def shadow_promote(self) -> ShadowStatus:
        """The candidate serves from now on (atomically); comparing stops."""
        candidate = self.shadow.drop()
        if candidate is None:
            raise NothingLoadedError("no shadow candidate is loaded", field="action")
        self.policies.install(candidate)
        return self.shadow.status()

    def shadow_drop(self) -> ShadowStatus:
        self.shadow.drop()
        return self.shadow.status()
