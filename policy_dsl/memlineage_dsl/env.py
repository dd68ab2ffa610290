"""The symbol table of a policy set: constants, source lists, policies, tests.

Built once from the loaded modules; duplicate definitions are reported here so
the checker and the compiler both start from one agreed set of names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ast as A
from .diagnostics import Diagnostic, SourceFile
from .loader import LoadedSet

DEFAULT_STRATEGY = "deny_overrides"


@dataclass(frozen=True, slots=True)
class Located:
    """A declaration and the file it came from."""

    node: A.Const | A.Sources | A.Policy | A.Test | A.Resolve
    path: str


@dataclass
class Env:
    consts: dict[str, Located] = field(default_factory=dict)
    sources: dict[str, Located] = field(default_factory=dict)
    policies: dict[str, Located] = field(default_factory=dict)
    tests: list[Located] = field(default_factory=list)
    resolve: Located | None = None
    files: dict[str, SourceFile] = field(default_factory=dict)

    @property
    def strategy(self) -> str:
        return self.resolve.node.strategy if self.resolve else DEFAULT_STRATEGY  # type: ignore[union-attr]

    def source_of(self, loc: Located) -> SourceFile:
        return self.files[loc.path]


def _span(node: A.Const | A.Sources | A.Policy | A.Test | A.Resolve) -> A.Span:
    return node.name_span if isinstance(node, A.Policy) else node.span


def build_env(loaded: LoadedSet) -> tuple[Env, list[Diagnostic]]:
    env = Env(files=dict(loaded.sources))
    diags: list[Diagnostic] = []
    names: dict[str, Located] = {}  # consts and source lists share one namespace

    def dup(loc: Located, previous: Located, what: str, name: str) -> None:
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
        for item in module.items:
            loc = Located(item, module.path)  # type: ignore[arg-type]
            if isinstance(item, A.Const | A.Sources):
                if item.name in names:
                    dup(loc, names[item.name], "name", item.name)
                    continue
                names[item.name] = loc
                (env.consts if isinstance(item, A.Const) else env.sources)[item.name] = loc
            elif isinstance(item, A.Policy):
                if item.name in env.policies:
                    dup(loc, env.policies[item.name], "policy", item.name)
                    continue
                env.policies[item.name] = loc
            elif isinstance(item, A.Test):
                env.tests.append(loc)
            elif isinstance(item, A.Resolve):
                if env.resolve is not None and env.resolve.node != item:
                    dup(loc, env.resolve, "resolution strategy", item.strategy)
                    continue
                env.resolve = loc
    return env, diags
