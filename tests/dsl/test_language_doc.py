"""docs/language.md is tested: every ```mlp block is a complete policy set that
lints without errors and whose tests pass; every line of an ```mlp-expr block
parses as an expression. A doc example that rots fails the suite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memlineage_dsl.diagnostics import has_errors
from memlineage_dsl.parser import parse_expr
from memlineage_dsl.pipeline import build_texts
from memlineage_dsl.testing import run_tests

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
BLOCKS = re.findall(r"```(mlp|mlp-expr)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
POLICY_BLOCKS = [b for kind, b in BLOCKS if kind == "mlp"]
EXPR_LINES = [line for kind, b in BLOCKS if kind == "mlp-expr" for line in b.splitlines()]


def test_the_doc_has_examples() -> None:
    assert len(POLICY_BLOCKS) >= 4 and len(EXPR_LINES) >= 4


@pytest.mark.parametrize(
    "block", POLICY_BLOCKS, ids=[f"block{i}" for i in range(len(POLICY_BLOCKS))]
)
def test_policy_example_lints_and_its_tests_pass(block: str) -> None:
    build = build_texts({"doc.mlp": block})
    problems = [f"{d.location} {d.message}" for d in build.diagnostics]
    assert not has_errors(build.diagnostics), problems
    assert build.compiled is not None and build.env is not None
    results = run_tests(build.compiled, build.env)
    failures = [f.message for r in results for f in r.failures]
    assert failures == []
    if "test " in block:
        assert results, "the example has test blocks but none ran"


@pytest.mark.parametrize("line", EXPR_LINES)
def test_expression_example_parses(line: str) -> None:
    parse_expr(line)
