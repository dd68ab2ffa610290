"""Every way a text arrives reads it alike: from disk (lint, test, serve, fmt) or in a
request (LintPolicy, ReloadPolicies). A byte-order mark, CR line ends, a lone CR, a
form feed or U+2028 and an unknown string escape, each of which some paths took and
others refused, or placed on the wrong line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from memlineage_dsl.commands import lint_command
from memlineage_dsl.formatter import format_source
from memlineage_dsl.pipeline import lint_texts

RULE = 'policy p {\n  on read\n  when memory.confidence < 0.5\n  deny "weak"\n}\n'


def _file_diags(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.mlp"
    path.write_bytes(text.encode("utf-8"))
    out = io.StringIO()
    lint_command([str(path)], "human", out)
    return out.getvalue()


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff" + RULE,  # a BOM: before, "unexpected character" at an invisible one
        RULE.replace("\n", "\r\n"),  # Windows line ends
    ],
)
def test_a_bom_and_crlf_read_as_the_plain_text(tmp_path: Path, text: str) -> None:
    assert [d for d in lint_texts({"p.mlp": text}) if d.severity == "error"] == []
    assert "no problems" in _file_diags(tmp_path, text)
    formatted, _ = format_source(text)
    assert formatted == format_source(RULE)[0]


def test_a_lone_cr_in_a_string_is_refused_by_every_path(tmp_path: Path) -> None:
    text = 'policy p {\n  on read\n  degrade annotate("one\rtwo")\n}\n'
    over_rpc = [d.code for d in lint_texts({"p.mlp": text}) if d.severity == "error"]
    assert over_rpc == ["E001"]  # before: taken over gRPC, refused from disk
    assert "E001" in _file_diags(tmp_path, text)
    assert format_source(text)[0] is None


@pytest.mark.parametrize("separator", ["\f", "\u2028"])
def test_a_form_feed_or_line_separator_does_not_end_a_line(separator: str) -> None:
    text = f"# part one{separator} and more\npolicy p {{\n  on read\n  whne memory.x\n}}\n"
    (d,) = [d for d in lint_texts({"p.mlp": text}) if d.code == "E001"]
    assert (d.span.line, d.span.column) == (4, 3)  # before: 5:3, or the wrong source line
    assert "whne" in d.snippet


def test_an_unknown_escape_is_an_error_at_it() -> None:
    text = 'policy p {\n  on read\n  degrade annotate("caf\\u00e9")\n}\n'
    (d,) = [d for d in lint_texts({"p.mlp": text}) if d.severity == "error"]
    assert (d.code, d.span.line, d.span.column) == ("E001", 3, 24)
    assert d.message == "unknown escape `\\u` in a string"  # before: read as `cafu00e9`
    ok = 'policy p {\n  on read\n  degrade annotate("a \\"b\\" \\\\ \\n \\t")\n}\n'
    assert [x for x in lint_texts({"p.mlp": ok}) if x.severity == "error"] == []
