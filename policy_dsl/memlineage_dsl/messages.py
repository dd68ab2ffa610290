"""Messages with values: `deny "{memory.creator.id} is not trusted"`.

A rule's message may show values it computes, each an expression in braces
(`{{` and `}}` are literal braces). This module holds what the other stages
share about them, and nothing that needs the parser or the compiler:

- reading: the string body decoded with the source offset of every character
  (`decode`), cut into text and expressions (`split`), and the spans of a parsed
  expression moved to where it sits in the file (`relocate`), so a diagnostic
  points into the string;
- writing: the canonical text of a message for `fmt` (`message_text`);
- showing: how each type reads at run time (`SHOW`: 6 significant digits,
  `1h30m`, RFC 3339, lists joined), picked by the value's static type
  (`show_helper`), since a duration and a time are both floats when evaluated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from . import ast as A
from . import schema as S
from .diagnostics import SourceFile
from .typecheck import ExprChecker, Names, elem, is_list

_ESCAPES = {"n": "\n", "t": "\t"}


# ---------------------------------------------------------------- reading
def decode(body: str) -> tuple[str, list[int]]:
    """A STRING body with its escapes read, and for each character read (plus one
    past the end) its offset in `body`: where a diagnostic must point."""
    out: list[str] = []
    offsets: list[int] = []
    i = 0
    while i < len(body):
        offsets.append(i)
        if body[i] == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    offsets.append(len(body))
    return "".join(out), offsets


@dataclass(frozen=True, slots=True)
class Hole:
    """The text of one `{...}` of a decoded message, and where it starts in it."""

    text: str
    start: int


class TemplateError(Exception):
    """A brace out of place, between decoded offsets `start` and `end`."""

    def __init__(self, start: int, end: int, message: str, help: str) -> None:
        super().__init__(message)
        self.start, self.end, self.message, self.help = start, end, message, help


def _hole_end(text: str, i: int) -> int:
    """The index of the `}` closing the hole opened at `i`, skipping string literals
    in it (`{"}" in memory.tags}`); -1 when none does."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == '"':
            j += 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
        elif c == "}":
            return j
        j += 1
    return -1


def split(text: str) -> list[str | Hole]:
    """Decoded message text -> text and holes, in order (text merged, never empty).
    Raises TemplateError for an unclosed `{`, an empty `{}` or a lone `}`."""
    parts: list[str | Hole] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "{}" and text[i + 1 : i + 2] == c:
            buf.append(c)
            i += 2
            continue
        if c == "}":
            raise TemplateError(i, i + 1, "unmatched `}` in a message", "write `}}` for a brace")
        if c != "{":
            buf.append(c)
            i += 1
            continue
        end = _hole_end(text, i)
        if end < 0:
            raise TemplateError(
                i, i + 1, "unclosed `{` in a message", "close the value with `}`, or write `{{`"
            )
        if not text[i + 1 : end].strip():
            raise TemplateError(
                i, end + 1, "empty `{}` in a message", "put a value inside, or write `{{}}`"
            )
        if buf:
            parts.append("".join(buf))
            buf = []
        parts.append(Hole(text[i + 1 : end], i + 1))
        i = end + 1
    if buf:
        parts.append("".join(buf))
    return parts


def relocate(e: A.Expr, move: Callable[[A.Span], A.Span]) -> A.Expr:
    """`e` with every span (of every node) passed through `move`. Recursive: call it
    on an expression already known to be at most MAX_DEPTH deep."""
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):
        value = getattr(e, f.name)
        if isinstance(value, A.Span):
            changes[f.name] = value if value == A.NO_SPAN else move(value)
        elif isinstance(value, tuple):
            changes[f.name] = tuple(relocate(v, move) if _is_expr(v) else v for v in value)
        elif _is_expr(value):
            changes[f.name] = relocate(value, move)
    return dataclasses.replace(e, **changes)  # type: ignore[arg-type]  # fields of `e`


_EXPR_TYPES = (
    *(A.Number, A.Duration, A.Str, A.Bool, A.Now, A.Name, A.Attr),
    *(A.Call, A.Quant, A.ListLit, A.Unary, A.Binary, A.Cond),
)


def _is_expr(value: object) -> bool:
    return isinstance(value, _EXPR_TYPES)


def message_exprs(message: str | A.Message | None) -> tuple[A.Expr, ...]:
    return message.values if isinstance(message, A.Message) else ()


def check_values(ex: ExprChecker, message: str | A.Message | None) -> None:
    """Type-check each value of a message (E201 for one that cannot be shown)."""
    for e in message_exprs(message):
        t = ex.infer(e, {})
        if t in UNSHOWABLE or (is_list(t) and elem(t) in UNSHOWABLE):
            ex.error(
                "E201",
                e.span,
                f"a message cannot show `{t}`",
                "show one of its attributes, e.g. `{request.actor.id}`"
                if S.REQUEST in t
                else "show the value it matches, e.g. `{memory.creator.id}`",
            )


# ---------------------------------------------------------------- writing
def message_text(message: str | A.Message, show: Callable[[A.Expr], str]) -> str:
    """The body of a message as written (braces doubled in text, `{expr}`), unquoted."""
    parts = (message,) if isinstance(message, str) else message.parts
    return "".join(
        p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else "{" + show(p) + "}"
        for p in parts
    )


# ---------------------------------------------------------------- showing
def show_number(v: object) -> str:
    """Whole numbers as such (`3`), others to 6 significant digits (`0.333333`)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"a number was expected in the message, got {v!r}")
    if not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


_DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000))


def show_duration(v: object) -> str:
    """`5m`, `1h30m`, `2d3h`, `1.5s`, `250ms`: days down to milliseconds, rounded."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"a duration was expected in the message, got {v!r}")
    if not math.isfinite(v):
        return show_number(v)
    ms = round(abs(v) * 1000)
    sign = "-" if v < 0 and ms else ""
    if ms < 1000:
        return f"{sign}{ms}ms" if ms else "0s"
    out = []
    for unit, size in _DURATION_UNITS:
        n, ms = divmod(ms, size)
        if n:
            out.append(f"{n}{unit}")
    if ms:
        secs, frac = divmod(ms, 1000)
        out.append(f"{secs}.{frac:03d}".rstrip("0") + "s" if frac else f"{secs}s")
    return sign + "".join(out)


def show_time(v: object) -> str:
    """RFC 3339 in UTC (`2026-01-01T00:00:00Z`, milliseconds when there are some);
    a time no calendar holds reads as its number of seconds."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"a time was expected in the message, got {v!r}")
    try:
        moment = datetime.fromtimestamp(round(v, 3), UTC)
    except (OverflowError, ValueError, OSError):
        return show_number(v)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + "Z"


def show_text(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"a string was expected in the message, got {v!r}")
    return v


def show_bool(v: object) -> str:
    if not isinstance(v, bool):
        raise TypeError(f"a bool was expected in the message, got {v!r}")
    return "true" if v else "false"


def show_id(v: object) -> str:
    """A memory or a creator by its id, an argument by its name."""
    ident = getattr(v, "id", None)
    if isinstance(ident, str):
        return ident
    name = getattr(v, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"cannot show {v!r} in a message")


def show_list(show: Callable[[object], str], v: object) -> str:
    """Items joined with `, `; `(none)` for an empty list."""
    if isinstance(v, str) or not isinstance(v, Iterable):
        raise TypeError(f"a list was expected in the message, got {v!r}")
    return ", ".join(show(x) for x in v) or "(none)"


def show_any(v: object) -> str:
    """A value of no known type (an empty list literal's items): by its Python type."""
    if isinstance(v, bool):
        return show_bool(v)
    if isinstance(v, int | float):
        return show_number(v)
    if isinstance(v, str):
        return v
    if isinstance(v, list | tuple):
        return show_list(show_any, v)
    return show_id(v)


SHOW: dict[str, object] = {
    "_show_num": show_number,
    "_show_dur": show_duration,
    "_show_time": show_time,
    "_show_text": show_text,
    "_show_bool": show_bool,
    "_show_id": show_id,
    "_show_list": show_list,
    "_show_any": show_any,
}
_HELPERS = {
    S.NUMBER: "_show_num",
    S.DURATION: "_show_dur",
    S.TIME: "_show_time",
    S.STRING: "_show_text",
    S.BOOL: "_show_bool",
    S.MEMORY: "_show_id",
    S.CREATOR: "_show_id",
    S.ARGUMENT: "_show_id",
}
UNSHOWABLE = (S.REQUEST, S.SOURCES)


def show_helper(t: str) -> Callable[[str], str]:
    """For a static type, how to wrap the generated code of a value of that type."""
    if is_list(t):
        inner = _HELPERS.get(elem(t), "_show_any")
        return lambda code: f"_show_list({inner}, {code})"
    name = _HELPERS.get(t, "_show_any")
    return lambda code: f"{name}({code})"


def policy_typer(consts: Mapping[str, A.Expr], sources: Iterable[str]) -> Callable[[A.Expr], str]:
    """The static type of an expression of a policy (checked clean), for `show_helper`."""
    known: dict[str, str] = {}
    scratch = SourceFile("<types>", "")
    source_names = frozenset(sources)

    def const_type(name: str) -> str:
        if name not in known:
            known[name] = S.ANY  # a cycle: reported by the checker, never compiled
            plain = Names(consts, const_type, source_names, roots=False)
            known[name] = ExprChecker(scratch, plain).infer(consts[name], {})
        return known[name]

    names = Names(consts, const_type, source_names, roots=True)
    return lambda e: ExprChecker(scratch, names).infer(e, {})
