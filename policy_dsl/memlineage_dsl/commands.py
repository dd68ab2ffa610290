"""`lint` and `test` as small adapters over the library (OPA's `check`/`test`).

`test --coverage` runs the tests on a separately instrumented compile
(coverage.py) and reports which rules and conditions they exercised.

Exit codes: 0 all good; 1 errors found / tests failed; 2 usage problem.
`fmt` lives in fmt_command.py. The `memlineage` CLI only dispatches here.
"""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from .coverage import Report, instrumented
from .diagnostics import Diagnostic, has_errors, sort_diagnostics
from .loader import collect_files, read_file
from .pipeline import Build, build_paths, lint_set
from .render import render_human, render_json, render_sarif, to_dict
from .testing import run_tests


def _builds(paths: list[str], each: bool) -> list[Build]:
    """One policy set of all the paths, or (each=True) one set per file."""
    if each:
        return [build_paths([f]) for f in collect_files(paths)]
    return [build_paths(paths)]


def lint_files(files: list[str], each: bool = False) -> list[Build]:
    """Read `files`, then lint them (`pipeline.lint_set`, what the LintPolicy RPC runs
    on the files of its request) as one policy set, or (each=True) one set per file.
    Includes of files not listed are read from disk too."""
    texts = {f: read_file(f) for f in files}
    if each:
        return [lint_set({f: text}, read_file) for f, text in texts.items()]
    return [lint_set(texts, read_file)]


def _render(diags: list[Diagnostic], builds: list[Build], fmt: str) -> str:
    if fmt == "json":
        return render_json(diags)
    if fmt == "sarif":
        return render_sarif(diags)
    return render_human(diags, {p: src for b in builds for p, src in b.sources.items()})


def lint_command(paths: list[str], fmt: str, out: TextIO, each: bool = False) -> int:
    if not collect_files(paths):
        out.write(f"error: no .mlp files in {' '.join(paths)}\n")
        return 2
    builds = lint_files(collect_files(paths), each)
    diags = sort_diagnostics(d for b in builds for d in b.diagnostics)
    text = _render(diags, builds, fmt)
    if fmt == "human" and not diags:
        text = f"{len(collect_files(paths))} file(s) checked, no problems\n"
    out.write(text if text.endswith("\n") else text + "\n")
    if _named_missing(paths):  # said above (E006); the command line is wrong, as in fmt
        return 2
    return 1 if has_errors(diags) else 0


def _named_missing(paths: list[str]) -> bool:
    """Whether a path the command line names does not exist: exit 2, as `fmt` (a wrong
    input the command names), not 1 (what was checked failed)."""
    return any(not os.path.exists(p) for p in paths)


def test_command(
    paths: list[str],
    out: TextIO,
    verbose: bool = False,
    each: bool = False,
    coverage: bool = False,
    coverage_min: float | None = None,
    fmt: str = "human",
) -> int:
    """Run the test blocks; with `coverage` (or a `coverage_min`, in percent) against a
    separately instrumented compile, then report what they exercised. The exit code
    is that of the tests, or 1 as well when coverage falls short of `coverage_min`."""
    files = collect_files(paths)
    if not files:
        out.write(f"error: no .mlp files in {' '.join(paths)}\n")
        return 2
    coverage = coverage or coverage_min is not None
    human = fmt == "human"
    passed = failed = 0
    broken: list[Diagnostic] = []
    failures: list[Diagnostic] = []
    report = Report()
    for build in _builds(paths, each):
        if build.compiled is None or build.env is None:
            errors = [d for d in build.diagnostics if d.severity == "error"]
            broken += errors
            if human:
                out.write(render_human(errors, build.sources))
            continue
        compiled, probes = instrumented(build.env) if coverage else (build.compiled, None)
        results = run_tests(compiled, build.env)
        if probes is not None:
            report.add(probes)  # counted: add() merges the counts a file has so far
        for result in results:
            if result.passed:
                passed += 1
                if verbose and human:
                    out.write(f"PASS {result.path}:{result.span.line}: {result.name}\n")
                continue
            failed += 1
            failures += result.failures
            if human:
                for d in result.failures:
                    out.write(f"{d.location}: FAIL {d.message}\n")
    short = coverage_min is not None and report.percent() < coverage_min
    if human:
        if coverage:
            out.write(report.render_text())
        if short:
            out.write(f"coverage {report.percent():.1f}% is below the minimum {coverage_min:g}%\n")
        out.write(f"{passed} passed, {failed} failed\n")
    else:
        doc: dict[str, Any] = {
            "passed": passed,
            "failed": failed,
            "failures": [to_dict(d) for d in failures],
            "errors": [to_dict(d) for d in broken],
        }
        if coverage:
            doc["coverage"] = report.as_dict()
            if coverage_min is not None:
                doc["coverage"]["minimum"] = coverage_min
        out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if _named_missing(paths):
        return 2
    return 1 if failed or broken or short else 0
