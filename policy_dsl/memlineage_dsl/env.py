"""The symbol table of a policy set: constants, source lists, policies, tests.

Built once from the loaded modules; duplicate definitions are reported here so
the checker and the compiler both start from one agreed set of names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from . import ast as A
from . import schema as S
from .diagnostics import Diagnostic, SourceFile
from .loader import LoadedSet
from .spans import sub_span

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


def builtin(name: str) -> str | None:
    """What the language already calls `name`, if anything: a const or a list of that
    name would change what it means in every file of the set (`const user = "agent"`
    made another file's `memory.creator.kind == user` compare with "agent"; a const
    `target` was typed as the const and compiled as the root)."""
    if name in S.ROOTS:
        return "a root a rule reads"
    if name in S.CREATOR_KINDS:
        return "a creator kind"
    if name in S.STATUSES:
        return "a memory status"
    if name in S.OPERATIONS:
        return "an operation"
    return None


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

    def reserved(item: A.Const | A.Sources, path: str) -> bool:
        meaning = builtin(item.name)
        if meaning is None:
            return False
        src = env.files[path]
        keyword = "const" if isinstance(item, A.Const) else item.kind
        diags.append(
            src.diag(
                "E109",
                sub_span(src, item.span, keyword + r"\s+", item.name),
                f"`{item.name}` is a built-in name ({meaning}): it cannot be redefined",
                f"give the {keyword} another name: every file of the set reads "
                f"`{item.name}` as the built-in",
            )
        )
        return True

    for module in loaded.modules:
        path = module.path
        for item in module.items:
            if isinstance(item, A.Const | A.Sources) and reserved(item, path):
                continue
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
