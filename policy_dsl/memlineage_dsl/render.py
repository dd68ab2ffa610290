"""Diagnostics for people (rustc/Cedar style), for tools (JSON) and for CI (SARIF).

The human form quotes the source line and underlines the span; JSON and SARIF
carry the same fields so editors and code-scanning UIs can place them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .diagnostics import CODES, Diagnostic, Severity, SourceFile

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "memlineage"


def render_human(diags: Iterable[Diagnostic], sources: Mapping[str, SourceFile]) -> str:
    """`file:line:col: error[E102]: message`, the quoted line, `^^^`, help, summary."""
    diags = list(diags)
    blocks = [_human_one(d, sources.get(d.file)) for d in diags]
    return "\n".join([*blocks, summary(diags)]) + "\n"


def summary(diags: Iterable[Diagnostic]) -> str:
    """`2 errors, 1 warning`."""
    diags = list(diags)
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    warnings = len(diags) - errors
    return f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _visible(text: str) -> str:
    """A quoted line with its control characters (a NUL, an escape that would move
    the terminal's cursor) shown as their Control Pictures, one column each, so the
    carets still line up; tabs kept."""
    return "".join(
        ch
        if ch == "\t" or ch.isprintable()
        else chr(0x2400 + ord(ch))
        if ord(ch) < 0x20
        else "\N{REPLACEMENT CHARACTER}"
        for ch in text
    )


def _human_one(d: Diagnostic, src: SourceFile | None) -> str:
    sp = d.span
    lines = [f"{d.location}: {d.severity.value}[{d.code}]: {d.message}"]
    text = src.line(sp.line) if src is not None and sp.line > 0 else ""
    if text:
        gutter = str(sp.line)
        pad = " " * len(gutter)
        start = max(sp.column - 1, 0)
        end = sp.end_column - 1 if sp.end_line == sp.line else len(text)
        width = max(end - start, 1)
        # keep tabs so the carets line up with the quoted text
        indent = "".join("\t" if ch == "\t" else " " for ch in text[:start])
        lines += [
            f" {gutter} | {_visible(text)}",
            f" {pad} | {indent}{'^' * width}",
        ]
    elif d.snippet:
        lines.append(f"  | {d.snippet}")
    if d.help:
        lines.append(f"  = help: {d.help}")
    return "\n".join(lines) + "\n"


def to_dict(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "name": d.name,
        "severity": d.severity.value,
        "message": d.message,
        "file": d.file,
        "line": d.span.line,
        "column": d.span.column,
        "end_line": d.span.end_line,
        "end_column": d.span.end_column,
        "snippet": d.snippet,
        "help": d.help,
    }


def render_json(diags: Iterable[Diagnostic]) -> str:
    """A JSON array, one object per diagnostic (see `to_dict` for the keys)."""
    return json.dumps([to_dict(d) for d in diags], indent=2)


def render_sarif(diags: Iterable[Diagnostic]) -> str:
    """A SARIF 2.1.0 log with one run; rule ids are the stable diagnostic codes."""
    diags = list(diags)
    codes = sorted({d.code for d in diags})
    index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code,
            "name": CODES.get(code, "unknown"),
            "shortDescription": {"text": CODES.get(code, "unknown").replace("-", " ")},
            "defaultConfiguration": {"level": "warning" if code.startswith("W") else "error"},
        }
        for code in codes
    ]
    results = [_sarif_result(d, index[d.code]) for d in diags]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": {"name": TOOL_NAME, "rules": rules}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2)


def _sarif_result(d: Diagnostic, rule_index: int) -> dict[str, Any]:
    text = d.message + (f" ({d.help})" if d.help else "")
    region: dict[str, Any] = {}
    if d.span.line > 0:
        region = {
            "startLine": d.span.line,
            "startColumn": max(d.span.column, 1),
            "endLine": max(d.span.end_line, d.span.line),
            "endColumn": max(d.span.end_column, 1),
        }
        if d.snippet:
            region["snippet"] = {"text": d.snippet}
    location: dict[str, Any] = {
        "physicalLocation": {"artifactLocation": {"uri": d.file.replace("\\", "/")}}
    }
    if region:
        location["physicalLocation"]["region"] = region
    return {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": "error" if d.severity is Severity.ERROR else "warning",
        "message": {"text": text},
        "locations": [location],
    }
