"""The named stages from files to an evaluable policy set: load, env, check, compile.

Each stage adds diagnostics; a set with any error is never compiled, so a
caller (the sidecar's reload, `memlineage lint`) either gets a whole working
set or the full list of what is wrong — never half of one.

`lint_set` / `lint_texts` are *the* lint: `memlineage lint` (which reads the
files, then calls it) and the LintPolicy RPC (the request's files) both report
exactly what it returns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .ast import Span
from .checker import check
from .compiler import CompiledPolicySet, compile_env
from .diagnostics import Diagnostic, Severity, SourceFile, has_errors, sort_diagnostics
from .env import Env, build_env
from .loader import LoadedSet, Reader, load_paths, load_texts


@dataclass
class Build:
    compiled: CompiledPolicySet | None
    env: Env | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, SourceFile] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.compiled is not None


def build(loaded: LoadedSet) -> Build:
    """Every stage on a loaded set; `diagnostics` sorted by location, without repeats."""
    env, env_diags = build_env(loaded)
    diags = sort_diagnostics([*loaded.diagnostics, *env_diags, *check(env)])
    out = Build(None, env, diags, dict(loaded.sources))
    if has_errors(diags):
        return out
    try:
        out.compiled = compile_env(env)
    except Exception as exc:  # the checker should have caught it: report, never half-load
        first = next(iter(loaded.sources.values()), None)
        path = first.path if first else "<policies>"
        out.diagnostics = sort_diagnostics([*diags, Diagnostic(
            "E601", Severity.ERROR, f"policy set failed to compile: {exc}", path,
            Span(1, 1, 1, 1))])
    return out


def build_paths(paths: Iterable[str]) -> Build:
    return build(load_paths(paths))


def build_texts(texts: Mapping[str, str | None], read: Reader | None = None) -> Build:
    """`build` of texts (path -> text; None: unreadable); includes among them, then `read`."""
    return build(load_texts(texts, read))


def lint_set(texts: Mapping[str, str | None], read: Reader | None = None) -> Build:
    """The lint of one policy set: `build` with the files loaded in path order, so the
    answer depends on which files there are, never on the order a caller (or a protobuf
    map) lists them. `read` resolves includes of files not in `texts`: the CLI reads
    them from disk; the RPC passes none (a server reads no path a client names)."""
    ordered = dict(sorted(texts.items(), key=lambda item: os.path.normpath(item[0])))
    return build_texts(ordered, read)


def lint_texts(texts: Mapping[str, str | None], read: Reader | None = None) -> list[Diagnostic]:
    """Every diagnostic of the policy set `texts` (see `lint_set`), sorted by location."""
    return lint_set(texts, read).diagnostics
