"""In-language tests of policy texts, for tests that only need their failures."""

from __future__ import annotations

from memlineage_dsl.diagnostics import Severity
from memlineage_dsl.pipeline import build_texts
from memlineage_dsl.testing import run_tests


def test_failures(texts: dict[str, str]) -> list[str]:
    """The messages of every failing `test` block of `texts` (which must build)."""
    build = build_texts(texts)
    errors = [d.render() for d in build.diagnostics if d.severity is Severity.ERROR]
    assert not errors, errors
    assert build.compiled is not None and build.env is not None
    return [f.message for r in run_tests(build.compiled, build.env) for f in r.failures]


test_failures.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test
