"""The named stages from files to an evaluable policy set: load, env, check, compile.

Each stage adds diagnostics; a set with any error is never compiled, so a
caller (the sidecar's reload, `memlineage lint`) either gets a whole working
set or the full list of what is wrong — never half of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .ast import Span
from .checker import check
from .compiler import CompiledPolicySet, compile_env
from .diagnostics import Diagnostic, Severity, SourceFile, has_errors
from .env import Env, build_env
from .loader import LoadedSet, load_paths, load_texts


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
    diags = list(loaded.diagnostics)
    env, env_diags = build_env(loaded)
    diags += env_diags
    diags += check(env)
    diags.sort(key=Diagnostic.sort_key)
    out = Build(None, env, diags, dict(loaded.sources))
    if has_errors(diags):
        return out
    try:
        out.compiled = compile_env(env)
    except Exception as exc:  # the checker should have caught it: report, never half-load
        first = next(iter(loaded.sources.values()), None)
        path = first.path if first else "<policies>"
        out.diagnostics.append(
            Diagnostic("E601", Severity.ERROR, f"policy set failed to compile: {exc}", path,
                       Span(1, 1, 1, 1))
        )
    return out


def build_paths(paths: Iterable[str]) -> Build:
    return build(load_paths(paths))


def build_texts(texts: dict[str, str]) -> Build:
    return build(load_texts(texts))
