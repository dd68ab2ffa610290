"""The serving policy set: loaded from a directory, swapped atomically on reload.

A reload compiles the whole new set first; only a set with no errors replaces
the current one (one reference assignment), so a broken set never half-applies
and the old set keeps serving.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from memlineage_dsl.ast import Span
from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.diagnostics import Diagnostic, Severity
from memlineage_dsl.pipeline import Build, build_paths, lint_set
from memlineage_dsl.testing import run_tests


class PolicyLoadError(Exception):
    """The initial policy set does not compile; carries every diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        first = diagnostics[0] if diagnostics else None
        where = f": {first.location}: {first.message}" if first else ""
        super().__init__(f"policy set has {len(diagnostics)} problem(s){where}")
        self.diagnostics = diagnostics


@dataclass(frozen=True)
class ServingPolicies:
    compiled: CompiledPolicySet
    version: str
    files: tuple[str, ...]
    # `walks`' answers, worked out once per set (and candidate, depth): not per decision
    _walks: dict[tuple[str, str, int], tuple[int, int]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def walks(
        self, op: str, depth: int, candidate: ServingPolicies | None = None
    ) -> tuple[int, int]:
        """How far a decision on `op` loads lineage up (ancestors) and down
        (descendants), `depth` at most, for this set and the shadow `candidate`'s rules
        (what it walks is loaded too). Reliability is capped by the chain a memory rests
        on: reads, actions and derivations load the ancestors even when no rule walks
        them."""
        key = (op, candidate.version if candidate is not None else "", depth)
        known = self._walks.get(key)
        if known is None:
            uses = self.compiled.plans[op].uses
            if candidate is not None:
                uses = uses | candidate.compiled.plans[op].uses
            chain = op in ("read", "act", "derive") or bool(uses & {"ancestors", "lineage"})
            known = self._walks[key] = (
                depth if chain else 0,
                depth if "descendants" in uses else 0,
            )
        return known


@dataclass
class ReloadOutcome:
    applied: bool
    version: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # `reload(if_changed=True)`: the directory holds the set last loaded from it while
    # another one serves (promoted, or sent as files), which was kept
    unchanged: bool = False


def _version(build: Build, base: str | None = None) -> str:
    """A digest of the files' contents and their names relative to `base` (the policy
    directory): the same set has the same version however the directory is spelled
    (`policies`, `./policies/`, its absolute path) and wherever it is checked out."""
    root = os.path.abspath(base) if base is not None else None
    named = {
        (Path(os.path.relpath(os.path.abspath(p), root)).as_posix() if root else p): src
        for p, src in build.sources.items()
    }
    digest = hashlib.sha256()
    for path in sorted(named):
        digest.update(path.encode())
        digest.update(b"\0")
        digest.update(named[path].text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def _refusals(build: Build, where: str) -> list[Diagnostic]:
    """Why `build` is not served: its errors, the failures of its own test blocks, or
    E305 when it compiled with no policy (no `.mlp` file, only empty ones, only
    constants): such a set allows every request. Neither a start, nor a reload
    (SIGHUP, ReloadPolicies: a directory emptied mid-deploy), nor a shadow candidate
    serves it."""
    if build.compiled is None:
        return [d for d in build.diagnostics if d.severity == "error"]
    if build.compiled.policies:
        # the set's own test blocks: one that fails (E503) or cannot run (E504) is a
        # set that does not do what its author wrote, so it is not served either
        # (before: only `memlineage test` ran them; an outside audit promoted one)
        if build.env is None:
            return []
        return [d for r in run_tests(build.compiled, build.env) for d in r.failures]
    return [
        Diagnostic(
            "E305",
            Severity.ERROR,
            "the policy set holds no policy: a set without one would allow every "
            "request, so it is not served",
            where,
            Span(1, 1, 1, 1),
            "",
            "add the .mlp files with their policies (a server keeps serving its current set)",
        )
    ]


def unservable(build: Build, where: str) -> list[Diagnostic] | None:
    """What to report when `build` is not served (its diagnostics, with the refusals
    of a set that compiled), or None when it may serve."""
    refused = _refusals(build, where)
    if build.compiled is None:
        return build.diagnostics
    return [*build.diagnostics, *refused] if refused else None


def _where(directory: str | None, files: dict[str, str] | None) -> str:
    """The file (or directory) an E305 names."""
    return min(files) if files else (directory or ".")


class PolicyHolder:
    """Holds the serving set; `current` is always a complete compiled set, with at
    least one policy."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        build = build_paths([directory])
        said = unservable(build, directory)
        if said is not None:
            raise PolicyLoadError([d for d in said if d.severity == "error"])
        self._current = self._serving(build, directory)
        self._from_directory = self._current.version  # the set the directory last gave

    @staticmethod
    def _serving(build: Build, base: str | None = None) -> ServingPolicies:
        assert build.compiled is not None
        return ServingPolicies(build.compiled, _version(build, base), tuple(sorted(build.sources)))

    @property
    def current(self) -> ServingPolicies:
        return self._current

    def install(self, serving: ServingPolicies) -> None:
        """Serve `serving` from now on (a promoted shadow candidate): atomic."""
        with self._lock:
            self._current = serving

    @classmethod
    def candidate(
        cls, directory: str | None = None, files: dict[str, str] | None = None
    ) -> tuple[ServingPolicies | None, list[Diagnostic]]:
        """A compiled set that is not served (a shadow candidate), or its errors."""
        build = lint_set(files) if files else build_paths([directory or "."])
        said = unservable(build, _where(directory, files))
        if said is not None:
            return None, said
        return cls._serving(build, None if files else directory), build.diagnostics

    def reload(
        self, files: dict[str, str] | None = None, *, if_changed: bool = False
    ) -> ReloadOutcome:
        """Compile the new set (the directory, or the given texts) and swap it in.
        `if_changed` (SIGHUP, which logrotate sends too): the directory's set replaces a
        promoted candidate or a set sent as files only when the directory changed
        since it was last loaded (before: every log rotation rolled a promotion back)."""
        with self._lock:
            build = lint_set(files) if files else build_paths([self.directory])
            if if_changed and not files and build.compiled is not None:
                version = _version(build, self.directory)
                if version == self._from_directory != self._current.version:
                    return ReloadOutcome(False, self._current.version, [], unchanged=True)
            said = unservable(build, _where(self.directory, files))
            if said is not None:
                return ReloadOutcome(False, self._current.version, said)
            self._current = self._serving(build, None if files else self.directory)
            if not files:
                self._from_directory = self._current.version
            return ReloadOutcome(True, self._current.version, build.diagnostics)
