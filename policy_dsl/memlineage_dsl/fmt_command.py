"""`memlineage fmt`: rewrite, list (`check`) or diff `.mlp` files in canonical form.

Exit codes follow `opa fmt --fail` / `gofmt -l`: 0 nothing to do, 1 some file
would change (check mode), 2 some file has syntax errors (never rewritten).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import TextIO

from .diagnostics import Severity, SourceFile
from .formatter import format_source
from .loader import Unreadable, collect_files, read_regular
from .render import render_human

OK, WOULD_CHANGE, BROKEN = 0, 1, 2


def _read(raw: bytes) -> str:
    # a lone "\r" is kept (inside a string literal); CRLF becomes LF.
    return raw.decode("utf-8").replace("\r\n", "\n")


def _lines(text: str) -> list[str]:
    """Split on "\\n" only (str.splitlines also splits on U+2028 inside strings)."""
    return [ln if ln.endswith("\n") else ln + "\n" for ln in re.split(r"(?<=\n)", text) if ln]


def _diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(_lines(old), _lines(new), f"{path} (original)", f"{path} (formatted)")
    )


def fmt_paths(paths: Iterable[str], check: bool, diff: bool, out: TextIO) -> int:
    """Format files and directories (their `.mlp` files). Returns the exit code.

    Without `check` or `diff` files are rewritten in place; `check` prints each
    path that would change, `diff` prints a unified diff; neither writes.
    """
    status = OK
    for path in collect_files(paths):
        try:
            raw = read_regular(path)
            text = _read(raw)
        except (OSError, UnicodeDecodeError) as err:
            why = Unreadable.of(err).reason
            out.write(f"{path}:1:1: error[E006]: cannot read `{path}`: {why}\n")
            status = BROKEN
            continue
        formatted, diags = format_source(text, path)
        if formatted is None:  # as `lint` shows it: the line quoted, the span marked
            errors = [d for d in diags if d.severity is Severity.ERROR]
            out.write(render_human(errors, {path: SourceFile(path, text)}))
            status = BROKEN
            continue
        if formatted.encode("utf-8") == raw:
            continue
        if check:
            out.write(f"{path}\n")
            status = max(status, WOULD_CHANGE)
        if diff:
            out.write(_diff(path, text, formatted))
        if not check and not diff:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(formatted)
    return status
