"""Golden diagnostics: each `golden/<case>.mlp` is linted and rendered for humans.

The rendering must equal `golden/<case>.expected`. To rewrite the expected
files after an intended change, run:

    MEMLINEAGE_REGEN_GOLDEN=1 .venv/bin/pytest tests/dsl/test_golden.py

and review the diff. Cases are linted from inside the golden folder with
relative paths, so the output does not depend on where the checkout lives.
Folders under `golden/` hold files that cases include; they are not cases.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memlineage_dsl.loader import read_file, read_files
from memlineage_dsl.pipeline import lint_set
from memlineage_dsl.render import render_human

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in GOLDEN.glob("*.mlp"))


def render_case(name: str) -> str:
    build = lint_set(read_files([name]), read_file)
    return render_human(build.diagnostics, build.sources)


@pytest.mark.parametrize("case", CASES, ids=[c.removesuffix(".mlp") for c in CASES])
def test_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    actual = render_case(case)
    expected_path = GOLDEN / (case.removesuffix(".mlp") + ".expected")
    if os.environ.get("MEMLINEAGE_REGEN_GOLDEN") == "1":
        expected_path.write_text(actual, encoding="utf-8")
    assert expected_path.exists(), f"no {expected_path.name}: set MEMLINEAGE_REGEN_GOLDEN=1"
    assert actual == expected_path.read_text(encoding="utf-8")


def test_every_expected_has_a_case() -> None:
    stale = {p.stem for p in GOLDEN.glob("*.expected")} - {Path(c).stem for c in CASES}
    assert not stale, f"expected files without a case: {sorted(stale)}"


def test_valid_case_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    assert render_case("valid.mlp") == "0 errors, 0 warnings\n"
