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

from . import ast as A
from .ast import Span
from .checker import check
from .compiler import CompiledPolicySet, compile_env
from .diagnostics import Diagnostic, Severity, SourceFile, has_errors, sort_diagnostics
from .env import Decl, Env, Located, build_env
from .limits import MAX_DEPTH, ConstDepths, item_exprs, too_deep
from .loader import LoadedSet, Reader, Text, load_paths, load_texts


@dataclass
class Build:
    compiled: CompiledPolicySet | None
    env: Env | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, SourceFile] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.compiled is not None


def inlined_depth(env: Env) -> list[Diagnostic]:
    """E007 where inlining consts nests an expression deeper than MAX_DEPTH: once, at
    the innermost const (or use) that crosses it. The checker and the compiler walk
    expressions with consts inlined, so a set with such an error is not checked."""
    depths = ConstDepths.of({n: loc.node.value for n, loc in env.consts.items()})
    out: list[Diagnostic] = []
    decls: list[Located[Decl]] = [*env.consts.values(), *env.policies.values(), *env.tests]
    if env.resolve is not None:
        decls.append(env.resolve)
    for loc in decls:
        if isinstance(loc.node, A.Const) and depths(loc.node.name) <= MAX_DEPTH:
            continue
        for expr in item_exprs(loc.node):
            node = too_deep(expr, MAX_DEPTH, depths)
            if not isinstance(node, A.Name) or depths(node.id) > MAX_DEPTH:
                continue  # too deep on its own (the parser said so) or through a deeper const
            src = env.files[loc.path]
            at = Span(node.span.line, node.span.column, node.span.end_line, node.span.end_column)
            out.append(
                src.diag(
                    "E007",
                    at,
                    f"const `{node.id}` nests this expression more than {MAX_DEPTH} "
                    "levels deep: a const is inlined where it is used",
                    f"`{node.id}` alone is {depths(node.id)} levels deep; shorten the chain of "
                    "consts that use each other",
                )
            )
            break
    return out


def build(loaded: LoadedSet) -> Build:
    """Every stage on a loaded set; `diagnostics` sorted by location, without repeats."""
    env, env_diags = build_env(loaded)
    deep = inlined_depth(env)
    if deep:
        diags = sort_diagnostics([*loaded.diagnostics, *env_diags, *deep])
        return Build(None, env, diags, dict(loaded.sources))
    diags = sort_diagnostics([*loaded.diagnostics, *env_diags, *check(env)])
    out = Build(None, env, diags, dict(loaded.sources))
    if has_errors(diags):
        return out
    try:
        out.compiled = compile_env(env)
    except Exception as exc:  # the checker should have caught it: report, never half-load
        first = next(iter(loaded.sources.values()), None)
        path = first.path if first else "<policies>"
        out.diagnostics = sort_diagnostics(
            [
                *diags,
                Diagnostic(
                    "E601",
                    Severity.ERROR,
                    f"policy set failed to compile: {exc}",
                    path,
                    Span(1, 1, 1, 1),
                ),
            ]
        )
    return out


def build_paths(paths: Iterable[str]) -> Build:
    return build(load_paths(paths))


def build_texts(texts: Mapping[str, Text], read: Reader | None = None) -> Build:
    """`build` of texts (path -> text, or Unreadable); includes among them, then `read`."""
    return build(load_texts(texts, read))


def lint_set(texts: Mapping[str, Text], read: Reader | None = None) -> Build:
    """The lint of one policy set: `build` with the files loaded in path order, so the
    answer depends on which files there are, never on the order a caller (or a protobuf
    map) lists them. `read` resolves includes of files not in `texts`: the CLI reads
    them from disk; the RPC passes none (a server reads no path a client names)."""
    ordered = dict(sorted(texts.items(), key=lambda item: os.path.normpath(item[0])))
    return build_texts(ordered, read)


def lint_texts(texts: Mapping[str, Text], read: Reader | None = None) -> list[Diagnostic]:
    """Every diagnostic of the policy set `texts` (see `lint_set`), sorted by location."""
    return lint_set(texts, read).diagnostics
