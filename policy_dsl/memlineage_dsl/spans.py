"""Sub-spans for precise underlining of names inside a declaration.

The AST keeps one span per declaration; these helpers find the name inside it
(`const NAME`, `given memory NAME`) so a diagnostic underlines just the name.
"""

from __future__ import annotations

import re

from .ast import Span
from .diagnostics import SourceFile


def sub_span(src: SourceFile, span: Span, prefix: str, name: str) -> Span:
    """The span of `name` inside `span`, found right after the regex `prefix`."""
    pattern = re.compile(prefix + "(" + re.escape(name) + r")\b")
    m = pattern.match(src.line(span.line), max(span.column - 1, 0))
    if not m:
        return span
    return Span(span.line, m.start(1) + 1, span.line, m.end(1) + 1)


def head_span(span: Span, name: str) -> Span:
    """The first `len(name)` characters of a node that starts with its name."""
    return Span(span.line, span.column, span.line, span.column + len(name))


_SCORE = re.compile(r"\bscore\s+-?[0-9.]+(\s*\.\.\s*-?[0-9.]+)?")


def score_span(src: SourceFile, span: Span) -> Span:
    """The `score a .. b` part of an `expect` line (the expect has no finer spans)."""
    m = _SCORE.search(src.line(span.line), max(span.column - 1, 0))
    return Span(span.line, m.start() + 1, span.line, m.end() + 1) if m else span
