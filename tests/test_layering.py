"""The project's layering, checked on the source: each rule lists what a layer may not import.

Every module under ``server/memlineage/`` and ``policy_dsl/memlineage_dsl/`` is parsed with
``ast``; every import in it counts, wherever it stands (module level, inside a function or a
class, under ``if TYPE_CHECKING:``), ``import x`` and ``from x import y`` alike, relative
imports resolved against the module's package, and ``importlib.import_module("x")`` /
``__import__("x")`` with a literal name. ``from pkg import name`` is taken as importing
``pkg.name``, so ``from memlineage import store`` and ``from memlineage.store import X`` are
both imports of ``memlineage.store``. See CONTRIBUTING.md ("Layering") and
docs/architecture.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Source roots (what is on sys.path) and the top-level packages scanned in each.
SOURCE_ROOTS = (REPO / "server", REPO / "policy_dsl")
PACKAGES = ("memlineage", "memlineage_dsl")
# Generated protobuf code: not hand-written, not scanned (its imports are protoc's).
GENERATED = ("memlineage.v1",)

GRPC = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")
PROTOBUF = ("google.protobuf", "memlineage.v1")  # memlineage.v1 is generated protobuf code


@dataclass(frozen=True)
class Import:
    """One imported name, where it is imported."""

    path: str  # the importing file, as shown in messages
    module: str  # the importing module
    line: int
    target: str  # the imported module (or module.attribute), resolved and absolute
    statement: str  # the import as written


@dataclass(frozen=True)
class Rule:
    """Modules under any of ``layer`` may not import anything under ``forbidden``.

    A name is *under* a prefix when it is the prefix or starts with ``prefix + "."``.
    ``allowed`` lists exceptions to ``forbidden`` (same matching).
    """

    id: str
    layer: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()

    def applies_to(self, module: str) -> bool:
        return _under(module, self.layer)

    def forbids(self, target: str) -> bool:
        return _under(target, self.forbidden) and not _under(target, self.allowed)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


RULES = (
    Rule(
        "language-knows-no-server",
        layer=("memlineage_dsl",),
        forbidden=("memlineage",),
    ),
    Rule(
        "lineage-model-knows-no-store-engine-or-transport",
        layer=("memlineage.lineage",),
        forbidden=(
            "memlineage.store",
            "memlineage.engine",
            "memlineage.scoring",
            "memlineage.grpc_api",
            "memlineage.client",
            "memlineage.config",
            *GRPC,
            *PROTOBUF,
            "redis",
        ),
    ),
    Rule(
        "stores-know-no-engine-scoring-language-or-transport",
        layer=("memlineage.store",),
        forbidden=(
            "memlineage.engine",
            "memlineage.scoring",
            "memlineage.grpc_api",
            "memlineage.client",
            "memlineage_dsl",
            *GRPC,
            *PROTOBUF,
        ),
    ),
    Rule(
        "scoring-knows-no-store-engine-or-transport",
        layer=("memlineage.scoring",),
        forbidden=(
            "memlineage.store",
            "memlineage.engine",
            "memlineage.grpc_api",
            *GRPC,
            *PROTOBUF,
        ),
    ),
    Rule(
        "engine-and-sweep-know-no-grpc-or-protobuf",
        layer=("memlineage.engine", "memlineage.lifecycle"),
        forbidden=(*GRPC, *PROTOBUF, "memlineage.grpc_api", "memlineage.client"),
    ),
    Rule(
        "configuration-knows-no-transport-engine-or-store",
        layer=("memlineage.config",),
        forbidden=("memlineage.grpc_api", "memlineage.engine", "memlineage.store"),
    ),
    Rule(
        "client-imports-no-server-module",
        layer=("memlineage.client",),
        forbidden=("memlineage",),
        # The generated contract, the client itself, and the package's version string
        # (memlineage/__init__.py imports only importlib.metadata).
        allowed=("memlineage.client", "memlineage.v1", "memlineage.__version__"),
    ),
)


# ---------------------------------------------------------------- the checker


def module_name(relpath: str) -> tuple[str, bool]:
    """``memlineage/store/base.py`` -> (``memlineage.store.base``, False); a package's
    ``__init__.py`` -> (the package, True). ``relpath`` is relative to a source root."""
    parts = list(Path(relpath).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package) - 1:
        raise ValueError(f"relative import beyond the top-level package in {module}")
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_in(source: str, relpath: str, display: str | None = None) -> list[Import]:
    """Every import in ``source``, the text of the file at ``relpath`` (relative to its
    source root), with relative imports resolved."""
    module, is_package = module_name(relpath)
    shown = display or relpath
    tree = ast.parse(source, filename=shown)
    found: list[Import] = []

    def add(node: ast.stmt | ast.expr, target: str) -> None:
        statement = " ".join((ast.get_source_segment(source, node) or ast.dump(node)).split())
        found.append(Import(shown, module, node.lineno, target, statement))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                add(node, f"{base}.{alias.name}" if base else alias.name)
        elif isinstance(node, ast.Call) and (target := _dynamic_import(node)) is not None:
            add(node, target)
    return found


def _dynamic_import(call: ast.Call) -> str | None:
    """The literal name in ``importlib.import_module("x")``, ``import_module("x")`` or
    ``__import__("x")``; None for any other call."""
    func = call.func
    named = (isinstance(func, ast.Name) and func.id in {"__import__", "import_module"}) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )
    if named and call.args and isinstance(call.args[0], ast.Constant):
        value = call.args[0].value
        return value if isinstance(value, str) else None
    return None


def violations(rule: Rule, imports: list[Import]) -> list[str]:
    """``file:line: statement`` for each import in ``imports`` that ``rule`` forbids."""
    return [
        f"{i.path}:{i.line}: {i.module} imports {i.target} ({i.statement!r})"
        for i in imports
        if rule.applies_to(i.module) and rule.forbids(i.target)
    ]


def check_source(rule: Rule, source: str, relpath: str) -> list[str]:
    return violations(rule, imports_in(source, relpath))


# ---------------------------------------------------------------- the tree


def _source_files() -> Iterator[tuple[Path, str]]:
    for root in SOURCE_ROOTS:
        for package in PACKAGES:
            top = root / package
            if not top.is_dir():
                continue
            for path in sorted(top.rglob("*.py")):
                relpath = path.relative_to(root).as_posix()
                if _under(module_name(relpath)[0], GENERATED):
                    continue
                yield path, relpath


def _tree_imports() -> list[Import]:
    found: list[Import] = []
    for path, relpath in _source_files():
        display = path.relative_to(REPO).as_posix()
        found.extend(imports_in(path.read_text(encoding="utf-8"), relpath, display))
    return found


_TREE: list[Import] | None = None


def tree_imports() -> list[Import]:
    global _TREE
    if _TREE is None:
        _TREE = _tree_imports()
    return _TREE


def _modules() -> set[str]:
    return {module_name(relpath)[0] for _, relpath in _source_files()}


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_layering_rule(rule: Rule) -> None:
    covered = sorted(m for m in _modules() if rule.applies_to(m))
    assert covered, f"{rule.id}: no module under {rule.layer} found (did the layer move?)"
    found = violations(rule, tree_imports())
    assert not found, (
        f"{rule.id}: {', '.join(rule.layer)} may not import "
        f"{', '.join(rule.forbidden)}"
        + (f" (except {', '.join(rule.allowed)})" if rule.allowed else "")
        + ":\n  "
        + "\n  ".join(found)
    )


def _rule(rule_id: str) -> Rule:
    return next(r for r in RULES if r.id == rule_id)


def test_checker_reports_a_violation() -> None:
    config = _rule("configuration-knows-no-transport-engine-or-store")
    found = check_source(config, "from memlineage.grpc_api.auth import X\n", "memlineage/config.py")
    assert found == [
        "memlineage/config.py:1: memlineage.config imports memlineage.grpc_api.auth.X "
        "('from memlineage.grpc_api.auth import X')"
    ]


def test_checker_sees_every_kind_of_import() -> None:
    """Function-level, TYPE_CHECKING, relative, ``from pkg import module``, dynamic."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..engine import core\n"  # relative, from a package module
        "def f():\n"
        "    import grpc\n"  # function level
        "    from memlineage import scoring\n"  # a submodule by name
        "    from .base import LineageStore\n"  # relative, inside the layer: fine
        "    import importlib\n"
        "    return importlib.import_module('google.protobuf.json_format')\n"
    )
    found = check_source(
        _rule("stores-know-no-engine-scoring-language-or-transport"),
        source,
        "memlineage/store/redis_store.py",
    )
    assert [line.split(" (")[0] for line in found] == [
        "memlineage/store/redis_store.py:3: memlineage.store.redis_store imports "
        "memlineage.engine.core",
        "memlineage/store/redis_store.py:5: memlineage.store.redis_store imports grpc",
        "memlineage/store/redis_store.py:6: memlineage.store.redis_store imports "
        "memlineage.scoring",
        "memlineage/store/redis_store.py:9: memlineage.store.redis_store imports "
        "google.protobuf.json_format",
    ]


def test_relative_imports_resolve_against_the_package() -> None:
    assert _resolve_relative("memlineage.store.embedded", True, 1, "row") == (
        "memlineage.store.embedded.row"
    )
    assert _resolve_relative("memlineage.store.embedded.store", False, 1, "row") == (
        "memlineage.store.embedded.row"
    )
    assert _resolve_relative("memlineage.store.embedded.store", False, 2, None) == (
        "memlineage.store"
    )
    assert _resolve_relative("memlineage.config", False, 1, "grpc_api.auth") == (
        "memlineage.grpc_api.auth"
    )


def test_client_rule_allows_only_the_contract_and_the_version() -> None:
    client = _rule("client-imports-no-server-module")
    path = "memlineage/client/sync.py"
    assert not check_source(client, "from memlineage import __version__\n", path)
    assert not check_source(client, "from memlineage.v1 import memlineage_pb2 as pb\n", path)
    assert not check_source(client, "from .errors import PolicyDenied\n", path)
    assert check_source(client, "import memlineage\n", path)
    assert check_source(client, "from memlineage import config\n", path)
    assert check_source(client, "from ..lineage import MemoryRecord\n", path)


def test_prefixes_match_whole_names() -> None:
    language = _rule("language-knows-no-server")
    assert not check_source(
        language, "from memlineage_dsl.ast import Policy\n", "memlineage_dsl/checker.py"
    )
    assert check_source(
        language, "from memlineage.lineage import MemoryRecord\n", "memlineage_dsl/checker.py"
    )
    assert not _under("grpc_tools", GRPC)
