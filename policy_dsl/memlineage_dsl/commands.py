"""`lint` and `test` as small adapters over the library (OPA's `check`/`test`).

Exit codes: 0 all good; 1 errors found / tests failed; 2 usage problem.
`fmt` lives in fmt_command.py. The `memlineage` CLI only dispatches here.
"""

from __future__ import annotations

from typing import TextIO

from .diagnostics import Diagnostic, has_errors, sort_diagnostics
from .loader import collect_files, read_file
from .pipeline import Build, build_paths, lint_set
from .render import render_human, render_json, render_sarif
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
    return 1 if has_errors(diags) else 0


def test_command(paths: list[str], out: TextIO, verbose: bool = False, each: bool = False) -> int:
    files = collect_files(paths)
    if not files:
        out.write(f"error: no .mlp files in {' '.join(paths)}\n")
        return 2
    passed = failed = 0
    broken = False
    for build in _builds(paths, each):
        if build.compiled is None or build.env is None:
            broken = True
            out.write(
                render_human([d for d in build.diagnostics if d.severity == "error"], build.sources)
            )
            continue
        for result in run_tests(build.compiled, build.env):
            if result.passed:
                passed += 1
                if verbose:
                    out.write(f"PASS {result.path}:{result.span.line}: {result.name}\n")
                continue
            failed += 1
            for d in result.failures:
                out.write(f"{d.location}: FAIL {d.message}\n")
    out.write(f"{passed} passed, {failed} failed\n")
    return 1 if failed or broken else 0
