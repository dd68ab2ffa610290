"""Value kinds of settings (how a file value, an environment variable or a flag is
read and written back), and the types settings hold: `TokenGrant`, `ConfigError`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

FAIL_MODES = ("closed", "degraded")
GRPC_RUNTIMES = ("sync", "aio")
CONFIG_ENV = "MEMLINEAGE_CONFIG"  # the file's path, when --config is not given

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the setting. `setting`: its
    key, when one setting's value is wrong on its own (`resolve_config` then also names
    where that value came from: the variable, the flag or the file)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """One configured bearer token: the namespaces it may use, and admin rights."""

    token: str
    namespaces: tuple[str, ...]
    admin: bool = False
    name: str = ""  # how logs name the caller (the `[tokens.NAME]` table, or envN/flagN;
    # unset: `token#I`, its place in the list), one per token
    # globs of the identities (`kind:name`) the caller may state as a creator or actor;
    # none: any (the runtime holding the token is trusted to say who spoke)
    speaks_as: tuple[str, ...] = ()


def _shown(value: float) -> str:
    """A number as an error shows it; an int past float's range by its digits (`:g`
    of it raised OverflowError, a traceback for a setting of 400 digits)."""
    try:
        return f"{value:g}"
    except OverflowError:
        digits = str(abs(int(value)))
        return f"{'-' if value < 0 else ''}{digits[:6]}... ({len(digits)} digits)"


@dataclass(frozen=True, slots=True)
class Range:
    """The values a numeric setting takes: ``lo`` to ``hi`` (either None: unbounded),
    ``lo`` itself excluded when ``lo_open``; a float must also be finite. Declared
    with the setting, checked on every route where the value is read (so the error
    names the file, variable or flag it came from)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def problem(self, value: object) -> str | None:
        """Why ``value`` is out of range (None: it is in range, or not a number)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number ({self.describe()}), got {value}"
        low = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        if low or (self.hi is not None and value > self.hi):
            return f"must be {self.describe()}, got {_shown(value)}"
        return None

    def describe(self) -> str:
        def num(x: float) -> str:
            return f"{x:g}" if abs(x) < 1e6 else f"{int(x):,}"

        if self.lo is not None and self.hi is not None:
            if self.lo_open:
                return f"> {num(self.lo)} and <= {num(self.hi)}"
            return f"{num(self.lo)} to {num(self.hi)}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {num(self.lo)}"
        return f"<= {num(self.hi)}" if self.hi is not None else "any number"


# ------------------------------------------------------------------ CPU lists
_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
MAX_CPU = 65_535  # past any machine's count: a typo, not a CPU


def parse_cpus(text: str) -> frozenset[int]:
    """A CPU list as `taskset -c` and cpusets write it (`1`, `0,2`, `2-3,6`); empty:
    none (no pinning)."""
    spec = text.replace(" ", "")
    if not spec:
        return frozenset()
    if not _LIST.fullmatch(spec):
        raise ConfigError(f"cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got {text!r}")
    cpus: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("-")
        lo, hi = int(first), int(last or first)
        if hi < lo:
            raise ConfigError(f"cpu_affinity: the range {part} runs backwards (write {hi}-{lo})")
        if hi > MAX_CPU:
            raise ConfigError(f"cpu_affinity: CPU {hi} is past {MAX_CPU}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpus(cpus: Collection[int]) -> str:
    """`parse_cpus`'s form, ranges folded: {0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


# ------------------------------------------------------------------ value kinds


@dataclass(frozen=True, slots=True)
class Kind:
    """How one type of value is read (a TOML value or env/flag text) and written back."""

    name: str  # how docs name the type
    text_form: str  # how docs spell the env/flag text
    convert: Callable[[object, str], Any]  # (TOML value or text, route) -> value
    toml: Callable[[Any], str]  # value -> TOML literal
    text: Callable[[Any], str]  # value -> env/flag text


def _str(value: object, _route: str) -> str:
    if not isinstance(value, str):
        raise TypeError("must be a string")
    return value


def _int(value: object, _route: str) -> int:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:  # not Python's "invalid literal for int() with base 10"
            raise ValueError(f"must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("must be an integer")
    return value


def _float(value: object, _route: str = "") -> float:
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:  # not Python's "could not convert string to float"
            raise ValueError(f"must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("must be a number")
    return float(value)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _bool(value: object, _route: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be true or false (or 1/0, yes/no, on/off), got {value!r}")


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    """`a=1,b=2` as [(a, 1), (b, 2)]; the value is after the last `=`."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, number = part.rpartition("=")
        if not sep or not name.strip():
            raise ValueError(f"entries are {what}, got {part!r}")
        out.append((name.strip(), number))
    return out


def _table(value: object, _route: str) -> dict[str, float]:
    if isinstance(value, str):
        return {k: _float(v) for k, v in _pairs(value, "NAME=NUMBER")}
    if not isinstance(value, Mapping):
        raise TypeError("must be a table")
    return {str(k): _float(v) for k, v in value.items()}


def _priors(value: object, _route: str) -> tuple[tuple[str, float], ...]:
    if isinstance(value, str):
        return tuple((p, _float(c)) for p, c in _pairs(value, "PATTERN=CREDIBILITY"))
    if not isinstance(value, list | tuple):
        raise TypeError("must be a list of [pattern, credibility] pairs")
    return tuple((str(p), _float(c)) for p, c in value)


_TOKEN_KEYS = {"token", "namespaces", "admin", "speaks_as"}
_TOKEN_VALUE = re.compile(r"[\x21-\x7e]{1,4096}")  # visible ASCII: an HTTP header value
_NAMESPACE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")  # as the lineage model's ids
_SPEAKS_AS = re.compile(r"(?:user|tool|reasoning|agent|system|\*):[\x21-\x7e]{1,240}")


def check_tokens(grants: tuple[TokenGrant, ...]) -> tuple[TokenGrant, ...]:
    """Tokens a sidecar can serve with, else ValueError naming the entry: a value of
    visible ASCII (no space), each value once (two tables with one value gave it the
    first one's rights, silently), a namespace or admin each, namespace names as ids.
    Before, the bad ones stopped `serve` with a traceback, or every request failed."""
    seen: dict[str, str] = {}
    for g in grants:
        where = f"tokens.{g.name}" if g.name else "a token"
        if not _TOKEN_VALUE.fullmatch(g.token):
            raise ValueError(
                f"{where}: the token must be 1 to 4096 visible ASCII characters, no spaces"
            )
        if g.token in seen:
            raise ValueError(f"{where}: the same token as tokens.{seen[g.token]}")
        seen[g.token] = g.name
        if not g.namespaces and not g.admin:
            raise ValueError(f"{where}: needs at least one namespace, or admin")
        for n in g.namespaces:
            if not _NAMESPACE.fullmatch(n):
                raise ValueError(
                    f"{where}: namespace {n!r} is not 1 to 128 of letters, digits and ._:/-"
                )
        for pattern in g.speaks_as:
            if not _SPEAKS_AS.fullmatch(pattern):
                raise ValueError(
                    f"{where}: speaks_as {pattern!r} is not KIND:NAME (a glob; KIND one of "
                    "user, tool, reasoning, agent, system or *), at most 256 visible characters"
                )
    return grants


def _tokens(value: object, route: str) -> tuple[TokenGrant, ...]:
    """The file's `[tokens.NAME]` tables, or the text `tok=ns1,ns2;tok2=admin`
    (checked: `check_tokens`)."""
    return check_tokens(_read_tokens(value, route))


def _read_tokens(value: object, route: str) -> tuple[TokenGrant, ...]:
    if isinstance(value, str):
        if value.strip() and not value.replace(";", "").strip():
            raise ValueError("names no token (only separators): unset it to run without tokens")
        grants = []
        for i, part in enumerate(p for p in value.split(";") if p.strip()):
            token, sep, spaces = part.partition("=")
            if not sep or not token.strip():
                raise ValueError(
                    "entries are token=namespace[,namespace...][,admin][,as=KIND:NAME...]"
                )
            names = [n.strip() for n in spaces.split(",") if n.strip()]
            grants.append(
                TokenGrant(
                    token.strip(),
                    tuple(n for n in names if n != "admin" and not n.startswith("as=")),
                    "admin" in names,
                    f"{route}{i}",
                    tuple(n[3:] for n in names if n.startswith("as=")),
                )
            )
        return tuple(grants)
    if not isinstance(value, Mapping):
        raise TypeError("must be [tokens.NAME] tables")
    grants = []
    for name, spec in value.items():
        if not isinstance(spec, Mapping) or "token" not in spec:
            raise ValueError(f"tokens.{name} needs a `token` (and `namespaces`, `admin`)")
        unknown = sorted(set(spec) - _TOKEN_KEYS)
        if unknown:
            raise ValueError(f"tokens.{name}: unknown key(s) {unknown}")
        spaces = spec.get("namespaces", [])
        if not isinstance(spaces, list) or not all(isinstance(n, str) for n in spaces):
            raise ValueError(f"tokens.{name}.namespaces must be a list of strings")
        speaks = spec.get("speaks_as", [])
        if not isinstance(speaks, list) or not all(isinstance(n, str) for n in speaks):
            raise ValueError(f"tokens.{name}.speaks_as must be a list of strings")
        grants.append(
            TokenGrant(
                _str(spec["token"], route),
                tuple(spaces),
                _bool(spec.get("admin", False), route),
                str(name),
                tuple(speaks),
            )
        )
    return tuple(grants)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_float(x: float) -> str:
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else repr(float(x))


def _tokens_toml(grants: tuple[TokenGrant, ...]) -> str:
    tables = [
        f"{_toml_key(g.name)} = {{ token = {json.dumps(g.token)}, "
        f"namespaces = {json.dumps(list(g.namespaces))}, admin = {str(g.admin).lower()}"
        + (f", speaks_as = {json.dumps(list(g.speaks_as))}" if g.speaks_as else "")
        + " }"
        for g in grants
    ]
    return "{ " + ", ".join(tables) + " }" if tables else "{}"


def _tokens_text(grants: tuple[TokenGrant, ...]) -> str:
    return ";".join(
        f"{g.token}="
        + ",".join(
            [*g.namespaces, *(["admin"] if g.admin else []), *(f"as={a}" for a in g.speaks_as)]
        )
        for g in grants
    )


STR = Kind("string", "the text as is", _str, json.dumps, str)
INT = Kind("integer", "digits", _int, str, str)
FLOAT = Kind("number", "a number (`inf` for infinity)", _float, _toml_float, _toml_float)
BOOL = Kind(
    "boolean",
    "`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`; flags: `--NAME` / `--no-NAME`",
    _bool,
    lambda b: str(b).lower(),
    lambda b: str(b).lower(),
)
TABLE = Kind(
    "table of numbers",
    "`NAME=NUMBER,NAME=NUMBER` (replaces the whole table)",
    _table,
    lambda d: (
        "{ " + ", ".join(f"{_toml_key(k)} = {_toml_float(v)}" for k, v in d.items()) + " }"
        if d
        else "{}"
    ),
    lambda d: ",".join(f"{k}={_toml_float(v)}" for k, v in d.items()),
)
PRIORS = Kind(
    "list of [pattern, number]",
    "`PATTERN=NUMBER,PATTERN=NUMBER`, first match wins (replaces the whole list)",
    _priors,
    lambda ps: "[" + ", ".join(f"[{json.dumps(p)}, {_toml_float(c)}]" for p, c in ps) + "]",
    lambda ps: ",".join(f"{p}={_toml_float(c)}" for p, c in ps),
)
TOKENS = Kind(
    "token tables",
    "`TOKEN=NAMESPACE[,NAMESPACE...][,admin][,as=KIND:NAME...]` entries joined by `;` "
    "(replaces every token)",
    _tokens,
    _tokens_toml,
    _tokens_text,
)

# A field's annotation (a string: `from __future__ import annotations`) -> its kind;
# a Config or ScoringConfig field of any other type fails at import.
_KINDS = {
    "str": STR,
    "str | None": STR,
    "int": INT,
    "int | None": INT,
    "float": FLOAT,
    "bool": BOOL,
    "dict[str, float]": TABLE,
    "tuple[tuple[str, float], ...]": PRIORS,
    "tuple[TokenGrant, ...]": TOKENS,
}
