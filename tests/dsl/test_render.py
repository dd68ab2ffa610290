"""Renderers: human (quoted line + carets), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json

from memlineage_dsl.ast import Span
from memlineage_dsl.diagnostics import CODES, Diagnostic, Severity, SourceFile
from memlineage_dsl.pipeline import lint_set, lint_texts
from memlineage_dsl.render import render_human, render_json, render_sarif, summary

TEXT = """\
sources trusted = ["tool:*"]

policy p {
  on read
  when memory.confidance > 0.5 and age(memory) > 5
  deny
}
"""


def lint(text: str = TEXT) -> tuple[list[Diagnostic], dict[str, SourceFile]]:
    build = lint_set({"p.mlp": text})
    return build.diagnostics, build.sources


def test_human_rendering() -> None:
    diags, sources = lint()
    assert render_human(diags, sources) == (
        "p.mlp:1:9: warning[W404]: source list `trusted` is never used\n"
        ' 1 | sources trusted = ["tool:*"]\n'
        "   |         ^^^^^^^\n"
        "  = help: remove it, or use it in a policy\n"
        "\n"
        "p.mlp:5:15: error[E102]: unknown attribute `confidance` on `memory`\n"
        " 5 |   when memory.confidance > 0.5 and age(memory) > 5\n"
        "   |               ^^^^^^^^^^\n"
        "  = help: did you mean `confidence`?\n"
        "\n"
        "p.mlp:5:36: error[E201]: cannot compare `duration` with `number`\n"
        " 5 |   when memory.confidance > 0.5 and age(memory) > 5\n"
        "   |                                    ^^^^^^^^^^^^^^^\n"
        "  = help: write the number with a unit, e.g. `5m`\n"
        "\n"
        "2 errors, 1 warning\n"
    )


def _diag(span: Span, code: str = "E001", help: str | None = None) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, "msg", "f.mlp", span, "", help)


def test_zero_width_span_gets_one_caret_and_multiline_runs_to_end_of_line() -> None:
    src = {"f.mlp": SourceFile("f.mlp", "abc\n\tdef ghi\n")}
    out = render_human([_diag(Span(1, 4, 1, 4)), _diag(Span(2, 2, 3, 1))], src)
    assert " 1 | abc\n   |    ^\n" in out
    assert " 2 | \tdef ghi\n   | \t^^^^^^^\n" in out


def test_wide_line_numbers_keep_the_gutter_aligned() -> None:
    text = "\n" * 11 + "xyz\n"
    out = render_human([_diag(Span(12, 2, 12, 3))], {"f.mlp": SourceFile("f.mlp", text)})
    assert " 12 | xyz\n    |  ^\n" in out


def test_unknown_source_falls_back_to_the_location_only() -> None:
    d = Diagnostic("E006", Severity.ERROR, "cannot read `x.mlp`", "x.mlp", Span(1, 1, 1, 1))
    assert render_human([d], {}) == (
        "x.mlp:1:1: error[E006]: cannot read `x.mlp`\n\n1 error, 0 warnings\n"
    )


def test_summary_pluralisation() -> None:
    w = Diagnostic("W404", Severity.WARNING, "m", "f", Span(1, 1, 1, 2))
    e = _diag(Span(1, 1, 1, 2))
    assert summary([]) == "0 errors, 0 warnings"
    assert summary([e, w]) == "1 error, 1 warning"
    assert summary([e, e, w, w]) == "2 errors, 2 warnings"
    assert render_human([], {}) == "0 errors, 0 warnings\n"


def test_json() -> None:
    diags, _ = lint()
    data = json.loads(render_json(diags))
    assert len(data) == len(diags) == 3
    assert data[1] == {
        "code": "E102",
        "name": "unknown-attribute",
        "severity": "error",
        "message": "unknown attribute `confidance` on `memory`",
        "file": "p.mlp",
        "line": 5,
        "column": 15,
        "end_line": 5,
        "end_column": 25,
        "snippet": "confidance",
        "help": "did you mean `confidence`?",
    }
    assert json.loads(render_json([])) == []


def test_sarif_shape() -> None:
    diags, _ = lint()
    log = json.loads(render_sarif(diags))
    assert log["version"] == "2.1.0"
    assert "sarif" in log["$schema"]
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "memlineage"
    rules = {r["id"]: r for r in driver["rules"]}
    assert set(rules) == {"W404", "E102", "E201"}
    assert all(r["name"] == CODES[r["id"]] for r in rules.values())
    results = run["results"]
    assert len(results) == len(diags)
    for result, d in zip(results, diags, strict=True):
        assert result["ruleId"] == d.code
        assert driver["rules"][result["ruleIndex"]]["id"] == d.code
        assert result["level"] == ("error" if d.code.startswith("E") else "warning")
        assert result["message"]["text"].startswith(d.message)
        (loc,) = result["locations"]
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == "p.mlp"
        region = phys["region"]
        assert (region["startLine"], region["startColumn"]) == (d.span.line, d.span.column)
        assert (region["endLine"], region["endColumn"]) == (d.span.end_line, d.span.end_column)
    assert "did you mean `confidence`?" in results[1]["message"]["text"]


def test_sarif_with_no_diagnostics_is_a_valid_empty_run() -> None:
    log = json.loads(render_sarif([]))
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == []


def test_a_control_character_is_named_and_shown_as_its_picture() -> None:
    """A NUL or an escape byte in a policy file was put raw into the message and the
    quoted line (an outside audit): a terminal shows nothing, or obeys it. It is named
    by its code point and quoted as its Control Picture, the caret under it."""
    text = "policy p {\n  on read\n  when memory.confidence < 0.5 \x00\n  deny\n}\n"
    diags = lint_texts({"a.mlp": text})
    assert [(d.code, d.message) for d in diags] == [("E002", "unexpected character `U+0000`")]
    shown = render_human(diags, {"a.mlp": SourceFile("a.mlp", text)})
    assert " 3 |   when memory.confidence < 0.5 \u2400\n" in shown
    assert "\x00" not in shown
    caret = shown.splitlines()[2]
    assert caret.index("^") == shown.splitlines()[1].index("\u2400")
