"""Mending one syntax error so the rest of an item is still checked.

After a syntax error the parser reports it, mends the text here and parses on, so a
misspelt attribute behind a `5 mins`, or a second mistake behind a missing `)`, is
reported in the same run. Every mend keeps the text's length and its line breaks,
so every later position (and so every later diagnostic) stays where it was.

Two kinds of mend, tried in order:
- what the error's hint says (`syntax.repaired`: a spaced duration joined, `=` as
  `==`, a misspelt keyword spelt right, a single-quoted string double-quoted);
- a search in the style of Burke and Fisher's repair: blank the unexpected token
  out, or put a missing `)`, `]`, `}` or `,` into the space before it; the mend that
  lets the parser read farthest is kept, and only when it reads at least
  `MIN_PROGRESS` more tokens (or to the end of the item) -- a mend that only moves
  the error one token on would report errors of a rule nobody wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .syntax import lark_parser, repaired

MIN_PROGRESS = 3
"""Tokens a searched mend must let the parser read past the error before it is kept."""

# Punctuation the search may insert where the parser expected it.
_INSERTABLE = {"RPAR": ")", "RSQB": "]", "RBRACE": "}", "COMMA": ","}

_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_0-9.]+|->|\.\.|==|!=|<=|>=|\S')


def mend(text: str, err: UnexpectedInput) -> str | None:
    """`text` with the error at `err` mended, or None when no mend is good enough."""
    hinted = repaired(text, err) or _requoted(text, err)
    if hinted is not None:
        return hinted
    if _error_pos(text, err) is None:
        return None
    best: tuple[int, str] | None = None
    for candidate, end in _candidates(text, err):
        reached = _reach(candidate)
        if reached < len(candidate) and _tokens_between(candidate, end, reached) < MIN_PROGRESS:
            continue
        if best is None or reached > best[0]:
            best = (reached, candidate)
    return None if best is None else best[1]


def _error_pos(text: str, err: UnexpectedInput) -> int | None:
    if isinstance(err, UnexpectedCharacters):
        return err.pos_in_stream
    token = getattr(err, "token", None)
    if isinstance(err, UnexpectedToken) and isinstance(token, Token) and token.type != "$END":
        return token.start_pos
    return None


def _candidates(text: str, err: UnexpectedInput) -> Iterator[tuple[str, int]]:
    """Mended texts, each with the position where the mend ends."""
    if isinstance(err, UnexpectedCharacters):
        at = err.pos_in_stream or 0
        yield text[:at] + " " + text[at + 1 :], at + 1
        return
    assert isinstance(err, UnexpectedToken)
    token = err.token
    start, end = token.start_pos or 0, token.end_pos or 0
    expected = set(err.expected or ())
    gap = len(text[:start]) - len(text[:start].rstrip(" \t"))
    for name in sorted(expected & _INSERTABLE.keys()):
        if gap >= 1:  # `)` into the space before the token: `(a and b deny` -> `(a and b)deny`
            mark = start - gap
            yield text[:mark] + _INSERTABLE[name] + text[mark + 1 :], start
    word = text[start:end]
    if "\n" not in word:
        yield text[:start] + " " * len(word) + text[end:], end


def _reach(text: str) -> int:
    """How far the parser reads `text`: the error's position, or its length if none."""
    try:
        lark_parser().parse(text, start="start")
    except UnexpectedEOF:
        return len(text)
    except UnexpectedInput as err:
        pos = _error_pos(text, err)
        return len(text) if pos is None else pos
    return len(text)


def _tokens_between(text: str, start: int, end: int) -> int:
    return len(_TOKENS.findall(text, start, max(start, end)))


def _requoted(text: str, err: UnexpectedInput) -> str | None:
    """`'fact'` -> `"fact"`, as the hint "strings use double quotes" says."""
    if not isinstance(err, UnexpectedCharacters):
        return None
    at = err.pos_in_stream or 0
    if text[at : at + 1] != "'":
        return None
    close = text.find("'", at + 1)
    if close < 0 or "\n" in text[at:close] or '"' in text[at:close]:
        return None
    return text[:at] + '"' + text[at + 1 : close] + '"' + text[close + 1 :]
