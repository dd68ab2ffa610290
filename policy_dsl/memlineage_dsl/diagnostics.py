"""Positioned diagnostics with stable codes, shared by parser, checker and runner.

Every diagnostic carries a stable code (listed in `CODES`), a `file:line:col`
span, the offending text, a short lowercase message and an optional help line
(OPA's codes, Cedar's message/help split).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .ast import NO_SPAN, Span


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


# Stable codes: never renumber; add new ones at the end of their block.
CODES: dict[str, str] = {
    # syntax (E0xx)
    "E001": "syntax-error",
    "E002": "unexpected-character",
    "E003": "unexpected-end-of-file",
    "E004": "include-not-found",
    "E005": "include-cycle",
    "E006": "file-unreadable",
    "E007": "nesting-too-deep",
    # names (E1xx)
    "E101": "unknown-name",
    "E102": "unknown-attribute",
    "E103": "unknown-function",
    "E104": "unknown-source-list",
    "E105": "wrong-arity",
    "E106": "unknown-operation",
    "E107": "unknown-obligation",
    "E108": "unknown-resolve-strategy",
    "E109": "duplicate-definition",
    "E110": "unknown-option",
    "E111": "cyclic-definition",
    # types (E2xx)
    "E201": "type-mismatch",
    "E202": "not-a-constant",
    "E203": "value-out-of-range",
    # policy structure (E3xx)
    "E301": "missing-on",
    "E302": "missing-effect",
    "E303": "duplicate-clause",
    "E304": "operation-not-applicable",
    "E305": "no-policies",
    # rule analysis (W4xx)
    "W401": "never-fires",
    "W402": "shadowed-rule",
    "W403": "conflicting-rules",
    "W404": "unused-definition",
    "W405": "test-without-expect",
    "W406": "walk-inside-quantifier",
    "W407": "fails-when-reached",
    "W408": "analysis-stopped",
    # tests (E5xx)
    "E501": "undefined-test-memory",
    "E502": "unknown-test-field",
    "E503": "test-failed",
    "E504": "invalid-test-value",
    # evaluation (E6xx): reported on decisions, not by lint
    "E601": "runtime-error",
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    file: str
    span: Span
    snippet: str = ""
    help: str | None = None

    @property
    def name(self) -> str:
        return CODES.get(self.code, "unknown")

    @property
    def location(self) -> str:
        return f"{self.file}:{self.span.line}:{self.span.column}"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file, self.span.line, self.span.column, self.code)


def source_text(text: str) -> str:
    """A file's text as every stage reads it, whichever way it arrived (read from disk
    or sent in a LintPolicy/ReloadPolicies request): without a leading byte-order mark,
    line ends as "\n" (a lone "\r" too, as reading a file in text mode makes it), so
    lint, fmt, test, serve and the RPCs take and refuse the same texts."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


class SourceFile:
    """The text of one `.mlp` file, to build diagnostics that quote it."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        # lines as the parser counts them: only "\n" ends one (a form feed or U+2028
        # inside a line does not, as `splitlines` would have it)
        self.lines = text.split("\n")

    def line(self, n: int) -> str:
        return self.lines[n - 1] if 1 <= n <= len(self.lines) else ""

    def snippet(self, span: Span) -> str:
        if span == NO_SPAN or span.line == 0:
            return ""
        if span.line == span.end_line:
            return self.line(span.line)[span.column - 1 : span.end_column - 1]
        first = self.line(span.line)[span.column - 1 :]
        return first + " …"

    def diag(
        self,
        code: str,
        span: Span,
        message: str,
        help: str | None = None,
        severity: Severity | None = None,
    ) -> Diagnostic:
        if severity is None:
            severity = Severity.WARNING if code.startswith("W") else Severity.ERROR
        return Diagnostic(code, severity, message, self.path, span, self.snippet(span), help)


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A "did you mean `x`?" help line for the closest candidate, if any is close."""
    pool = sorted(set(candidates))
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in pool}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f"did you mean `{close[0]}`?" if close else None


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sort by (file, line, column, code) and drop exact duplicates."""
    return sorted(dict.fromkeys(diags), key=Diagnostic.sort_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
