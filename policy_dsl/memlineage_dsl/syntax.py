"""Syntax errors as diagnostics: the LALR parser, and "expected ..." help lines.

Split from the parser so that the transformer (parser.py) and what reports its
failures stay short: `lark_parser()` is built once and shared; `error_to_diag`
turns a Lark error into a positioned diagnostic with a hint (a misspelt keyword,
`=` for `==`, a spaced duration `5 mins`); `repaired` mends a spaced duration so
the rest of an item is still checked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast as A
from . import grammar_blob
from .diagnostics import Diagnostic, SourceFile, did_you_mean

# Human spelling of grammar terminals, for "expected ..." help lines.
_TERMINAL_TEXT = {
    "NAME": "a name",
    "STRING": "a string",
    "NUMBER": "a number",
    "DURATION": "a duration",
    "COMP_OP": "a comparison",
    "$END": "end of file",
}


class _WholeWords:
    """Lets every lexer state see a name, so a keyword is only ever a whole word.

    Lark's contextual lexer matches only what the parser's state accepts; where no
    name is accepted, `whenn` lexed as `when` + `n` (an "unknown name `n`" for a
    misspelt keyword). With NAME always accepted, `whenn` is one name and the error
    is at it ("did you mean `when`?")."""

    always_accept = ("NAME",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


def parser_options() -> dict[str, Any]:
    """How the parser is built (`grammar_blob`: the shipped one was built so)."""
    return {
        "parser": "lalr",
        "propagate_positions": True,
        "maybe_placeholders": True,
        "postlex": _WholeWords(),
        "start": ["start", "expr"],  # `expr`: the values inside a message's braces
    }


@cache
def lark_parser() -> Lark:
    return grammar_blob.load(**parser_options())


@cache
def _terminal_text() -> dict[str, str]:
    """Map terminal names (LBRACE, POLICY…) to what a user would type."""
    out = dict(_TERMINAL_TEXT)
    for term in lark_parser().terminals:
        if term.name not in out and term.pattern.type == "str":
            out[term.name] = f"`{term.pattern.value}`"
    return out


def tok_span(tok: Token) -> A.Span:
    return A.Span(tok.line or 0, tok.column or 0, tok.end_line or 0, tok.end_column or 0)


def _keyword_for(expected: set[str], token: Token | None) -> str | None:
    """The keyword a misspelt word stands for (`whne` -> `when`), when one is close."""
    if token is None or token.type != "NAME":
        return None
    words = sorted(_terminal_text().get(e, e) for e in expected)
    keywords = [w.strip("`") for w in words if w.startswith("`") and w[1:-1].isalpha()]
    hint = did_you_mean(str(token), keywords)
    return hint.split("`")[1] if hint else None


def _expected_help(expected: set[str], token: Token | None) -> str | None:
    names = _terminal_text()
    words = sorted(names.get(e, e) for e in expected)
    keyword = _keyword_for(expected, token)
    if keyword is not None:
        return f"did you mean `{keyword}`?"
    if token is not None and str(token) == "=" and "COMP_OP" in expected:
        return "try `==` instead of `=`"
    if not words:
        return None
    shown = ", ".join(words[:8]) + (", …" if len(words) > 8 else "")
    return f"expected {shown}"


# A string with any escape (the grammar's STRING takes only \" \\ \n \t), and an
# escape it does not take: what an "unterminated string" really is.
_ANY_ESCAPE_STRING = re.compile(r'"([^"\\\n]|\\.)*"')
_UNKNOWN_ESCAPE = re.compile(r'\\[^"\\nt]')


def error_to_diag(
    src: SourceFile, err: UnexpectedInput, text: str, chunked: bool = False
) -> Diagnostic:
    line, col = err.line or 1, err.column or 1
    if isinstance(err, UnexpectedCharacters):
        ch = src.line(line)[col - 1 : col] or "?"
        span = A.Span(line, col, line, col + 1)
        help_ = (
            "strings use double quotes"
            if ch == "'"
            else _expected_help(set(err.allowed or ()), None)
        )
        if ch == '"':
            closed = _ANY_ESCAPE_STRING.match(src.line(line), col - 1)
            bad = _UNKNOWN_ESCAPE.search(closed.group(0)) if closed else None
            if closed and bad:  # a whole string, but an escape it does not know
                at = col + bad.start()
                return src.diag(
                    "E001",
                    A.Span(line, at, line, at + 2),
                    f"unknown escape `{bad.group(0)}` in a string",
                    'a string knows `\\"`, `\\\\`, `\\n` and `\\t`',
                )
            return src.diag("E001", span, "unterminated string", 'close the string with `"`')
        shown = ch if ch.isprintable() else f"U+{ord(ch):04X}"  # a NUL, a control byte
        if ch.isdigit():  # not 0-9 (the lexer reads those): 0.\u09ea (Bengali four) looks like 0.8
            help_ = (
                f"`{ch}` is {unicodedata.name(ch, 'a digit of another script')}: numbers "
                "are written with the digits 0-9 (so that a policy reads as it decides)"
            )
        return src.diag("E002", span, f"unexpected character `{shown}`", help_)
    token_type = getattr(getattr(err, "token", None), "type", None)
    if isinstance(err, UnexpectedEOF) or token_type == "$END":
        parsed = text.rstrip().split("\n")  # lines as Lark counts them
        last = len(parsed)
        end_col = len(parsed[-1]) + 1
        span = A.Span(last, end_col, last, end_col)
        expected = set(getattr(err, "expected", ()) or ())
        help_ = (
            "is a closing `}` missing?" if "RBRACE" in expected else _expected_help(expected, None)
        )
        if chunked:
            what = (
                "missing `}` before the next item"
                if "RBRACE" in expected
                else ("unexpected end of item")
            )
            return src.diag("E003", span, what, help_)
        return src.diag("E003", span, "unexpected end of file", help_)
    if not isinstance(err, UnexpectedToken):  # never: no other kind is left
        return src.diag("E001", A.Span(line, col, line, col + 1), "syntax error")
    token: Token = err.token
    span = tok_span(token)
    expected = set(getattr(err, "expected", ()) or ())
    joined = _spaced_duration(text, token)
    if joined is not None:
        return src.diag(
            "E001",
            span,
            f"unexpected `{token}`",
            f"a duration is one word: write `{joined[2]}`",
        )
    return src.diag("E001", span, f"unexpected `{token}`", _expected_help(expected, token))


# Unit words people write after a number, and the unit the language spells.
_UNIT_WORDS = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), "ms"),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "s"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "w"),
}


def _spaced_duration(text: str, token: Token) -> tuple[int, int, str] | None:
    """`5 mins` at `token`: (start, end) of the whole phrase in `text` and `5m`."""
    unit = _UNIT_WORDS.get(str(token).lower()) if token.type == "NAME" else None
    if unit is None or token.start_pos is None:
        return None
    m = re.search(r"([0-9]+(?:\.[0-9]+)?)[ \t]+$", text[: token.start_pos])
    if m is None:
        return None
    return m.start(), token.start_pos + len(str(token)), f"{m.group(1)}{unit}"


MAX_REPAIRS = 5
"""Syntax errors reported per item: after each, the item is repaired and parsed on."""


def repaired(text: str, err: UnexpectedInput) -> str | None:
    """`text` with the error at `err` mended as its hint says, so the rest of the item
    can be checked: a spaced duration joined (`5 mins` -> `5m`), a comparison's `= `
    written `==` (`a = "x"`: where `==` was expected), a misspelt keyword written as the
    keyword it is closest to (`whne` -> `when`; a longer keyword only where spaces follow
    the word). Each mend keeps the text's length, so every later position stays where it
    was. None for any other error (recovery.py searches for a mend then)."""
    token = getattr(err, "token", None)
    if not isinstance(err, UnexpectedToken) or token is None or token.type == "$END":
        return None
    if token.start_pos is None or token.end_pos is None:
        return None
    joined = _spaced_duration(text, token)
    if joined is not None:
        start, end, word = joined
        return text[:start] + word.ljust(end - start) + text[end:]
    at = token.start_pos
    expected = set(getattr(err, "expected", ()) or ())
    if str(token) == "=" and "COMP_OP" in expected and text[at + 1 : at + 2] in (" ", "\t"):
        return text[:at] + "==" + text[at + 2 :]
    keyword = _keyword_for(expected, token)
    if keyword is None:
        return None
    end = at + len(str(token))
    if len(keyword) <= len(str(token)):  # `whne` -> `when`, `whenn` -> `when `
        return text[:at] + keyword.ljust(end - at) + text[end:]
    grow = len(keyword) - len(str(token))  # `wen  x` -> `when x`: into the space after it
    if text[end : end + grow + 1].strip(" \t") == "" and len(text) > end + grow:
        return text[:at] + keyword + text[end + grow :]
    return None
