"""The `.mlp` policy language: parse, check, format, compile, evaluate, test.

Imports nothing from the sidecar (`memlineage`); it needs no network or Redis.

The names below are the public API: what the sidecar, the benchmarks and users
import. Each is loaded on first use (``memlineage_dsl.decide`` imports the
evaluator then), so ``import memlineage_dsl.decision`` stays as light as that
module; the submodules they come from remain importable as before.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from .compiler import CompiledPolicySet
    from .decision import (
        ALLOW,
        DEGRADE,
        DENY,
        ERROR,
        FIRED,
        OVERRIDDEN,
        WAIVED,
        Decision,
        ObligationOut,
        Reason,
    )
    from .diagnostics import Diagnostic, Severity, SourceFile, has_errors
    from .evaluator import decide
    from .facts import (
        DEFAULT_BUDGET,
        Creator,
        DictSnapshot,
        LineageSnapshot,
        Memory,
        MemoryFacts,
        Request,
        UnknownMemory,
        UnknownProvenance,
    )
    from .horizon import window_change
    from .lineage_bound import LineageCut
    from .loader import collect_files
    from .parser import parse_source
    from .pipeline import Build, build_paths, build_texts, lint_set, lint_texts
    from .schema import OPERATIONS

# public name -> the submodule that defines it
_EXPORTS = {
    "CompiledPolicySet": "compiler",
    **dict.fromkeys(
        (
            "ALLOW",
            "DEGRADE",
            "DENY",
            "ERROR",
            "FIRED",
            "OVERRIDDEN",
            "WAIVED",
            "Decision",
            "ObligationOut",
            "Reason",
        ),
        "decision",
    ),
    **dict.fromkeys(("Diagnostic", "Severity", "SourceFile", "has_errors"), "diagnostics"),
    "decide": "evaluator",
    **dict.fromkeys(
        (
            "DEFAULT_BUDGET",
            "Creator",
            "DictSnapshot",
            "LineageSnapshot",
            "Memory",
            "MemoryFacts",
            "Request",
            "UnknownMemory",
            "UnknownProvenance",
        ),
        "facts",
    ),
    "window_change": "horizon",
    "LineageCut": "lineage_bound",
    "collect_files": "loader",
    "parse_source": "parser",
    **dict.fromkeys(("Build", "build_paths", "build_texts", "lint_set", "lint_texts"), "pipeline"),
    "OPERATIONS": "schema",
}

__all__ = [
    "ALLOW",
    "DEFAULT_BUDGET",
    "DEGRADE",
    "DENY",
    "ERROR",
    "FIRED",
    "OPERATIONS",
    "OVERRIDDEN",
    "WAIVED",
    "Build",
    "CompiledPolicySet",
    "Creator",
    "Decision",
    "Diagnostic",
    "DictSnapshot",
    "LineageCut",
    "LineageSnapshot",
    "Memory",
    "MemoryFacts",
    "ObligationOut",
    "Reason",
    "Request",
    "Severity",
    "SourceFile",
    "UnknownMemory",
    "UnknownProvenance",
    "build_paths",
    "build_texts",
    "collect_files",
    "decide",
    "has_errors",
    "lint_set",
    "lint_texts",
    "parse_source",
    "window_change",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
