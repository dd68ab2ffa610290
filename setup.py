"""Compiles the modules every decision runs through with mypyc (part of mypy).

pyproject.toml holds the project's metadata; this file only adds the extension
modules. A fresh decision runs about 230 Python calls; compiled, the same code
touches far fewer objects, which is what the sidecar's cost in a busy server
follows (bench/README.md). Set MEMLINEAGE_PURE_PYTHON=1 to build without them:
the same modules then run as plain Python, answering exactly alike
(tests/test_native_build.py compares a seeded run of both). A checkout whose
compiled modules are older than their sources refuses to import them
(`memlineage_dsl/native.py`); `scripts/build_native.sh` rebuilds them.
"""

from __future__ import annotations

import os

from setuptools import setup

# The hot path of Check and FilterRank. One shared library holds all of it, in the
# language's package (`memlineage_dsl/compiled__mypyc`), so the language's compiled
# code never loads the server's (two groups crash mypyc 2.4.1's code generator).
# Not the lineage model and its validation: compiled code checks argument types
# itself, so a wrongly typed field of an untrusted record would be a TypeError
# there instead of the field's ValidationError.
LANGUAGE = ["facts", "evaluator", "codegen"]
SERVER = [
    "engine/batch_views",
    "engine/checks",
    "engine/context",
    "engine/credibility",
    "engine/records",
    "engine/snapshot",
    "engine/view_cache",
    "grpc_api/wire",
    "scoring/batch",
    "scoring/formulas",
    "store/traversal",
]

# The type-check mypyc runs may lack the runtime dependencies (an isolated build):
# their types are then Any, which compiles to the same, dynamically typed, calls.
FLAGS = ["--ignore-missing-imports", "--no-warn-unused-ignores"]


def _extensions() -> list[object]:
    if os.environ.get("MEMLINEAGE_PURE_PYTHON", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    language = [f"policy_dsl/memlineage_dsl/{m}.py" for m in LANGUAGE]
    server = [f"server/memlineage/{m}.py" for m in SERVER]
    return list(
        mypycify(
            FLAGS + language + server,
            opt_level="3",
            group_name="memlineage_dsl.compiled",
        )
    )


setup(ext_modules=_extensions())
