"""The symbol table of a policy set: constants, source lists, policies, tests.

Built once from the loaded modules; duplicate definitions are reported here so
the checker and the compiler both start from one agreed set of names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from . import ast as A
from .diagnostics import Diagnostic, SourceFile
from .loader import LoadedSet

DEFAULT_STRATEGY = "deny_overrides"

Decl = A.Const | A.Sources | A.Policy | A.Test | A.Resolve
N = TypeVar("N", bound=Decl, covariant=True)


@dataclass(frozen=True, slots=True)
class Located(Generic[N]):
    """A declaration and the file it came from."""

    node: N
    path: str


@dataclass
class Env:
    consts: dict[str, Located[A.Const]] = field(default_factory=dict)
    sources: dict[str, Located[A.Sources]] = field(default_factory=dict)
    policies: dict[str, Located[A.Policy]] = field(default_factory=dict)
    tests: list[Located[A.Test]] = field(default_factory=list)
    resolve: Located[A.Resolve] | None = None
    files: dict[str, SourceFile] = field(default_factory=dict)

    @property
    def strategy(self) -> str:
        return self.resolve.node.strategy if self.resolve else DEFAULT_STRATEGY

    def source_of(self, loc: Located[Decl]) -> SourceFile:
        return self.files[loc.path]


def _span(node: Decl) -> A.Span:
    return node.name_span if isinstance(node, A.Policy) else node.span


def build_env(loaded: LoadedSet) -> tuple[Env, list[Diagnostic]]:
    env = Env(files=dict(loaded.sources))
    diags: list[Diagnostic] = []
    # consts and source lists share one namespace
    names: dict[str, Located[A.Const | A.Sources]] = {}

    def dup(loc: Located[Decl], previous: Located[Decl], what: str, name: str) -> None:
        prev_span = _span(previous.node)
        diags.append(
            env.files[loc.path].diag(
                "E109",
                _span(loc.node),
                f"{what} `{name}` is already defined",
                f"first defined at {previous.path}:{prev_span.line}:{prev_span.column}",
            )
        )

    for module in loaded.modules:
        path = module.path
        for item in module.items:
            if isinstance(item, A.Const):
                const = Located(item, path)
                if item.name in names:
                    dup(const, names[item.name], "name", item.name)
                    continue
                names[item.name] = env.consts[item.name] = const
            elif isinstance(item, A.Sources):
                sources = Located(item, path)
                if item.name in names:
                    dup(sources, names[item.name], "name", item.name)
                    continue
                names[item.name] = env.sources[item.name] = sources
            elif isinstance(item, A.Policy):
                policy = Located(item, path)
                if item.name in env.policies:
                    dup(policy, env.policies[item.name], "policy", item.name)
                    continue
                env.policies[item.name] = policy
            elif isinstance(item, A.Test):
                env.tests.append(Located(item, path))
            elif isinstance(item, A.Resolve):
                resolve = Located(item, path)
                if env.resolve is not None and env.resolve.node != item:
                    dup(resolve, env.resolve, "resolution strategy", item.strategy)
                    continue
                env.resolve = resolve
    return env, diags
