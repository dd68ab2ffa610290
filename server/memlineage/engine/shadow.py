"""A candidate policy set beside the serving one: every decision the engine takes
fresh is also taken by the candidate, on the same request and lineage, without
changing the answer; disagreements are counted by (policy, serving effect, candidate
effect) and logged with both decisions; the candidate can be promoted (it then
serves, atomically) or dropped.

The bound on its cost: one more evaluation per fresh decision (microseconds: the
evaluator is compiled Python) plus whatever lineage the candidate reads that the
serving set does not (`uses`/`reads` are the union of both while a candidate is
loaded). While a candidate is loaded no decision is reused (`Checks._window`), so it
sees the traffic as it comes, each decision weighed as often as it is asked.
A disagreement is any change in what a caller acts on (`answers.change`, the one
definition `memlineage replay` reports by too): the effect, the obligations (a dropped
`require_confirmation` or `downrank` counts) or the compliance score; it is counted
under each fired policy whose effect or obligations differ (`<resolution>` when none
does and the change comes from resolving them, `<score>` for a score alone).
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

from memlineage.engine.answers import SCORE, answer, change
from memlineage.engine.policies import PolicyHolder, ServingPolicies
from memlineage.lineage.errors import NothingLoadedError, ValidationError

__all__ = ["ShadowControl", "ShadowDiff", "ShadowSet", "ShadowStatus"]

_LOG = logging.getLogger("memlineage.shadow")
EXAMPLES = 3
VERDICTS_LIMIT = 4096  # pairs of decisions whose verdict is kept per candidate


@dataclass(frozen=True, slots=True)
class ShadowDiff:
    policy: str  # a policy whose firing differs ("<resolution>", "<score>": see the module)
    serving: str  # the serving set's effect
    candidate: str  # the candidate's
    count: int
    examples: tuple[str, ...]  # "op memory_ids" of the first few
    # the obligation kinds of each side, when they differ (else both empty)
    serving_obligations: tuple[str, ...] = ()
    candidate_obligations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShadowStatus:
    active: bool
    version: str = ""
    compared: int = 0
    disagreed: int = 0
    diffs: tuple[ShadowDiff, ...] = ()


# (policy, serving effect, candidate effect, serving obligations, candidate obligations)
_Key = tuple[str, str, str, tuple[str, ...], tuple[str, ...]]


@dataclass
class _Loaded:
    serving: ServingPolicies
    disagreed: int = 0
    counts: Counter[_Key] = field(default_factory=Counter)
    examples: dict[_Key, list[str]] = field(default_factory=dict)
    # Decisions compared, counted by each deciding thread in a cell of its own: an
    # agreement (nearly every decision) takes no lock. One lock taken per decision
    # by every worker made them queue behind each other and hand the lock and the
    # GIL back and forth (two context switches per decision at four threads).
    cells: list[list[int]] = field(default_factory=list)
    mine: threading.local = field(default_factory=threading.local)
    # (id(served), id(candidate's)) -> both decisions and the keys they disagree under
    verdicts: dict[tuple[int, int], tuple[Decision, Decision, tuple[_Key, ...]]] = field(
        default_factory=dict
    )

    @property
    def compared(self) -> int:
        return sum(cell[0] for cell in list(self.cells))


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
        cell = getattr(loaded.mine, "cell", None)
        if cell is None:  # this thread's first comparison of this candidate
            cell = loaded.mine.cell = [0]
            with self._lock:
                loaded.cells.append(cell)
        cell[0] += 1  # only this thread writes its cell
        # The evaluator shares its decisions (one object per set of fired rules), so
        # the verdict on a pair is worked out once and looked up by identity after.
        pair = (id(served), id(shadow))
        known = loaded.verdicts.get(pair)
        if known is not None and known[0] is served and known[1] is shadow:
            keys = known[2]
        else:
            keys = _disagreement(served, shadow)
            if len(loaded.verdicts) >= VERDICTS_LIMIT:
                loaded.verdicts.clear()
            loaded.verdicts[pair] = (served, shadow, keys)
        if not keys:
            return
        where = f"{op} {','.join(m.id for m in (req.memories or (req.memory,)))}"
        with self._lock:  # only the tallies change under it
            if self._loaded is not loaded:
                return  # dropped or replaced meanwhile
            loaded.disagreed += 1
            for key in keys:
                loaded.counts[key] += 1
                shown = loaded.examples.setdefault(key, [])
                if len(shown) < EXAMPLES and where not in shown:
                    shown.append(where)
        if not _LOG.isEnabledFor(logging.INFO):  # `memlineage serve` logs WARNING and up
            return
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
                ShadowDiff(key[0], key[1], key[2], n, tuple(loaded.examples.get(key, ())), *key[3:])
                for key, n in loaded.counts.most_common()
            )
            return ShadowStatus(
                True, loaded.serving.version, loaded.compared, loaded.disagreed, diffs
            )


def _disagreement(served: Decision, shadow: Decision) -> tuple[_Key, ...]:
    """The keys a disagreement is counted under; () when both answer the same."""
    changed = change(answer(served), answer(shadow))
    if changed is None:
        return ()
    named = _changed_policies(served, shadow)
    if not named:
        named = ["<score>" if changed == SCORE else "<resolution>"]
    a, b = _kinds(served, shadow)
    return tuple((policy, served.effect, shadow.effect, a, b) for policy in named)


def _changed_policies(served: Decision, shadow: Decision) -> list[str]:
    """The policies a disagreement is counted under: those that fire on one side only
    or with another effect; when there are none and both answer the same effect, those
    whose obligations in the answer differ (under another effect the obligations of
    the losing side are dropped, which names no policy)."""
    was, now = _fired(served), _fired(shadow)
    named = sorted(p for p in was.keys() | now.keys() if was.get(p) != now.get(p))
    if named or served.effect != shadow.effect:
        return named
    return sorted(p for p in was.keys() | now.keys() if _given(served, p) != _given(shadow, p))


def _fired(d: Decision) -> dict[str, str]:
    """Each fired policy with the effect of its reason."""
    return {r.policy: r.effect for r in d.reasons if r.status == FIRED}


def _given(d: Decision, policy: str) -> tuple[str, ...]:
    """The obligations `policy` put in the answer (as `answers.answer` has them)."""
    return tuple(str(o) for o in d.obligations if o.policy == policy)


def _kinds(served: Decision, shadow: Decision) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The obligation kinds of each side when only the obligations differ (the diff
    table then reads e.g. `degrade [annotate, downrank] -> degrade [annotate]`)."""
    if served.effect != shadow.effect or answer(served).obligations == answer(shadow).obligations:
        return (), ()
    return tuple(o.kind for o in served.obligations), tuple(o.kind for o in shadow.obligations)


def _brief(d: Decision) -> dict[str, object]:
    return {
        "effect": d.effect,
        "score": round(d.compliance_score, 6),
        "policies": [r.policy for r in d.reasons if r.status == FIRED],
        "obligations": [str(o) for o in d.obligations],
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
