"""Sidecar configuration: defaults < TOML file < environment < command-line flags.

The `Config` dataclass below is the one definition of every setting: each field's
annotation is its type, its default the default, and its metadata the section,
help, environment variable and flag (derived from the name unless spelled out).
`[scoring]` keys are `ScoringConfig`'s fields, with their help in `_SCORING_HELP`.
`SETTINGS` is built from those, and everything else is generated from `SETTINGS`:
the file loader, the environment reader, the `serve` flags (`add_setting_flags`)
and docs/configuration.md (`render_docs`, `memlineage config docs`), so the three
routes and the docs cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from memlineage.scoring.config import ScoringConfig

FAIL_MODES = ("closed", "degraded")
CONFIG_ENV = "MEMLINEAGE_CONFIG"  # the file's path, when --config is not given

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the setting."""


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """One configured bearer token: the namespaces it may use, and admin rights."""

    token: str
    namespaces: tuple[str, ...]
    admin: bool = False
    name: str = ""  # how logs name the caller (the `[tokens.NAME]` table, or envN/flagN)


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
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("must be an integer")
    return value


def _float(value: object, _route: str = "") -> float:
    if isinstance(value, str):
        return float(value.strip())
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


_TOKEN_KEYS = {"token", "namespaces", "admin"}


def _tokens(value: object, route: str) -> tuple[TokenGrant, ...]:
    """The file's `[tokens.NAME]` tables, or the text `tok=ns1,ns2;tok2=admin`."""
    if isinstance(value, str):
        grants = []
        for i, part in enumerate(p for p in value.split(";") if p.strip()):
            token, sep, spaces = part.partition("=")
            if not sep or not token.strip():
                raise ValueError("entries are token=namespace[,namespace...][,admin]")
            names = [n.strip() for n in spaces.split(",") if n.strip()]
            grants.append(
                TokenGrant(
                    token.strip(),
                    tuple(n for n in names if n != "admin"),
                    "admin" in names,
                    f"{route}{i}",
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
        grants.append(
            TokenGrant(
                _str(spec["token"], route),
                tuple(spaces),
                _bool(spec.get("admin", False), route),
                str(name),
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
        f"namespaces = {json.dumps(list(g.namespaces))}, admin = {str(g.admin).lower()} }}"
        for g in grants
    ]
    return "{ " + ", ".join(tables) + " }" if tables else "{}"


def _tokens_text(grants: tuple[TokenGrant, ...]) -> str:
    return ";".join(
        f"{g.token}=" + ",".join([*g.namespaces, *(["admin"] if g.admin else [])]) for g in grants
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
    "`TOKEN=NAMESPACE[,NAMESPACE...][,admin]` entries joined by `;` (replaces every token)",
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


# ------------------------------------------------------------------ the definition


@dataclass(frozen=True, slots=True)
class _Meta:
    help: str
    section: str
    flag: str = ""  # default: --NAME-WITH-DASHES
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    secret: bool = False  # never shown by `config show`; flag help warns about ps


_META = "memlineage.setting"
_TABLE_META = "memlineage.settings-table"


def _setting(
    default: T,
    help: str,
    section: str,
    *,
    flag: str = "",
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] = (),
    secret: bool = False,
) -> T:
    """A Config field that is a setting (its metadata is everything but type and default)."""
    meta = _Meta(help, section, flag, aliases, choices, secret)
    return field(default=default, repr=not secret, metadata={_META: meta})


def _setting_factory(
    factory: Callable[[], T], help: str, section: str, *, secret: bool = False
) -> T:
    meta = _Meta(help, section, secret=secret)
    return field(default_factory=factory, repr=not secret, metadata={_META: meta})


@dataclass(frozen=True)
class Config:
    listen: str = _setting(
        "127.0.0.1:50051", "HOST:PORT the gRPC server listens on (port 0: any free one)", "serving"
    )
    grpc_workers: int = _setting(
        0,
        "gRPC worker threads for unary calls, 0 to 1024; 0: automatic, 4 on embedded (CPU-bound), "
        "32 on Redis (waits on the network). Watch streams have a pool of their own",
        "serving",
    )
    grace_seconds: float = _setting(
        5.0, "on SIGTERM, seconds in-flight calls get before the server stops", "serving"
    )
    tls_cert: str | None = _setting(
        None, "PEM certificate chain file; with tls_key, the server speaks TLS", "serving"
    )
    tls_key: str | None = _setting(None, "PEM private key file of tls_cert", "serving")
    sidecar_id: str = _setting(
        "",
        "this sidecar's name in decision-log `labels.id` and the trace resource's "
        "`service.instance.id`; empty: the host name",
        "serving",
    )
    tokens: tuple[TokenGrant, ...] = _setting_factory(
        tuple,
        "bearer tokens and the namespaces each may use (see Tokens below); none: one "
        "namespace `default`, admin RPCs from loopback only",
        "auth",
        secret=True,
    )
    store: str = _setting(
        "embedded",
        "the lineage store: `embedded` (in memory), `embedded:///DIR`, `redis://HOST:PORT/DB`, "
        "`redis+cluster://H1:P1,H2:P2`",
        "store",
    )
    data_dir: str | None = _setting(
        None,
        "with store `embedded`: persist in this directory (shorthand for `embedded:///DIR`)",
        "store",
    )
    redis_socket_timeout: float = _setting(
        1.0,
        "Redis: seconds to wait for a reply, in (0, 60]; a store that does not answer in time "
        "is UNAVAILABLE (keep it well under the clients' deadlines, 5 s)",
        "store",
    )
    redis_connect_timeout: float = _setting(
        1.0, "Redis: seconds to wait for a connection, in (0, 60]", "store"
    )
    compact_log_bytes: int = _setting(
        16 * 1024 * 1024,
        "embedded data dir: fold the op log into a snapshot once this many bytes of ops were "
        "written since the last one (bounds the replay at start)",
        "store",
    )
    policy_dir: str = _setting(
        "policies",
        "directory of `.mlp` policies, loaded at start and on SIGHUP / ReloadPolicies",
        "policies",
        flag="--policies",
        aliases=("--policy-dir",),
    )
    fail_mode: str = _setting(
        "closed",
        "when the store is unavailable: `closed` answers UNAVAILABLE, `degraded` degrades reads",
        "policies",
        choices=FAIL_MODES,
    )
    lineage_depth: int = _setting(
        16, "ancestors and descendants loaded per decision, >= 1", "policies"
    )
    shadow_policy_dir: str | None = _setting(
        None,
        "a candidate policy directory decided beside the serving one from the start (never "
        "changing an answer); `memlineage shadow status|promote|drop`",
        "policies",
    )
    reuse_decisions: bool = _setting(
        True,
        "answer a repeated Check from the decision it got, until a write to its namespace "
        "(by any sidecar) or a time threshold its policies test",
        "policies",
    )
    decision_log: str = _setting(
        "-",
        "where decisions are logged, one hash-chained JSON line each: `-` stderr, `off`, or a "
        "file (`memlineage log verify` checks the chain)",
        "decisions",
    )
    decision_log_inputs: bool = _setting(
        False,
        "each decision-log line carries what its decision read (`input`: the request, the "
        "lineage facts, the counts) so `memlineage replay` can re-decide it; larger lines",
        "decisions",
    )
    decision_log_key: str | None = _setting(
        None,
        "HMAC-SHA-256 key of the log's hash chain (unset: plain SHA-256, which anyone can "
        "recompute); best given in the environment",
        "decisions",
        secret=True,
    )
    decision_log_max_bytes: int = _setting(
        0,
        "a file log rotates to FILE.1 (older ones shift) past this size; 0: never "
        "(logrotate: rename, then SIGHUP)",
        "decisions",
    )
    decision_log_keep: int = _setting(
        5, "rotated log files kept, FILE.1 (newest) to FILE.N; >= 1", "decisions"
    )
    decision_retention: int = _setting(
        10_000,
        "decisions the store keeps per namespace for Explain and Feedback by any sidecar, also "
        "after a restart (Redis, an embedded data dir); 1 to 10000000",
        "decisions",
    )
    record_access: bool = _setting(
        True, "count reads (last access, access count), which the value score uses", "access"
    )
    access_flush_seconds: float = _setting(
        2.0,
        "reads are summed in memory and written this often, 0.01 to 3600: each flush changes "
        "the rows read since, so less often is cheaper; statistics are at most this late "
        "(Explain and the sweep flush first)",
        "access",
    )
    metrics_port: int | None = _setting(
        None, "serve Prometheus metrics on 127.0.0.1:PORT (unset: no metrics endpoint)", "metrics"
    )
    tracing: str = _setting(
        "off",
        "OpenTelemetry spans, one per unary RPC (`pip install 'memlineage[tracing]'`): `off`, "
        "`console` (JSON lines to stderr), `file:PATH` (JSON lines appended), or an OTLP/HTTP "
        "endpoint `http(s)://HOST:4318/v1/traces`; OTEL_* variables (sampler, service name, "
        "headers) apply",
        "tracing",
    )
    sweep_interval: float = _setting(
        60.0, "seconds between background governance sweep passes; 0: off", "lifecycle"
    )
    sweep_batch: int = _setting(1000, "memories examined per namespace per pass, >= 1", "lifecycle")
    max_future_seconds: float = _setting(
        300.0,
        "how far ahead of the server's clock a request's `time` may be, 0 to 86400 s (a later "
        "one is INVALID_ARGUMENT `time`); earlier times are allowed",
        "time",
    )
    simulation: bool = _setting(
        False,
        "run on a simulated clock the callers advance: a request's `time` moves it forward "
        "(never back: an earlier one is INVALID_ARGUMENT), max_future_seconds does not apply, "
        "the background sweep is off; embedded store only (docs/simulation.md)",
        "time",
    )
    scoring: ScoringConfig = field(
        default_factory=ScoringConfig, metadata={_TABLE_META: ScoringConfig}
    )

    def store_url(self) -> str:
        if self.data_dir and self.store == "embedded":
            return f"embedded://{Path(self.data_dir).resolve()}"
        return self.store

    def validated(self) -> Config:
        if self.fail_mode not in FAIL_MODES:
            raise ConfigError(f"fail_mode must be one of {FAIL_MODES}, got {self.fail_mode!r}")
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"listen must be HOST:PORT, got {self.listen!r}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key go together")
        if self.lineage_depth < 1:
            raise ConfigError("lineage_depth must be >= 1")
        if self.sweep_interval < 0 or self.sweep_batch < 1:
            raise ConfigError("sweep_interval must be >= 0 and sweep_batch >= 1")
        if not 0.01 <= self.access_flush_seconds <= 3600:
            raise ConfigError("access_flush_seconds must be between 0.01 and 3600")
        if not 0 <= self.grpc_workers <= 1024:
            raise ConfigError("grpc_workers must be 0 (automatic) to 1024")
        if not (0 < self.redis_socket_timeout <= 60 and 0 < self.redis_connect_timeout <= 60):
            raise ConfigError(
                "redis_socket_timeout and redis_connect_timeout must be in (0, 60] seconds"
            )
        if not 1 <= self.decision_retention <= 10_000_000:
            raise ConfigError("decision_retention must be between 1 and 10000000")
        if self.decision_log_max_bytes < 0 or self.decision_log_keep < 1:
            raise ConfigError("decision_log_max_bytes must be >= 0 and decision_log_keep >= 1")
        if not (
            self.tracing in ("off", "console")
            or (self.tracing.startswith("file:") and len(self.tracing) > 5)
            or re.match(r"https?://[^/\s]+", self.tracing)
        ):
            raise ConfigError(
                "tracing must be off, console, file:PATH or an http(s):// OTLP endpoint, "
                f"got {self.tracing!r}"
            )
        if not 0 <= self.max_future_seconds <= 86_400:
            raise ConfigError("max_future_seconds must be between 0 and 86400")
        if self.simulation and not self.store_url().startswith("embedded"):
            raise ConfigError(
                "simulation needs the embedded store: sidecars sharing a Redis run on wall time"
            )
        return self


# `[scoring]`: ScoringConfig's fields are its keys (name, type, default); their help
# and section are here, because the scoring room holds no configuration plumbing.
# A field without an entry (or an entry without a field) fails at import.
_SCORING_HELP: dict[str, tuple[str, str]] = {
    "half_lives": (
        "seconds for a memory's reliability to halve, per volatility class (`inf`: no decay); "
        "the table replaces the default one",
        "scoring-reliability",
    ),
    "default_volatility": (
        "the volatility class of a memory recorded without one",
        "scoring-reliability",
    ),
    "credibility_priors": (
        "a source's prior credibility: [fnmatch pattern of `kind:id`, credibility] pairs, the "
        "first match wins (no match: 0.5)",
        "scoring-reliability",
    ),
    "prior_strength": (
        "pseudo-observations behind a prior: one bad claim moves a source's credibility little",
        "scoring-reliability",
    ),
    "contradiction_weight": (
        "kappa: what a contradicting claim costs (0.5: an equally credible one costs 25%)",
        "scoring-reliability",
    ),
    "consensus_weight": (
        "rho: the share of the gap to 1 each confirming source closes",
        "scoring-reliability",
    ),
    "alpha": ("weight of accuracy (reliability) in the value", "scoring-value"),
    "beta": ("weight of relevance in the value", "scoring-value"),
    "gamma": ("weight of utility in the value", "scoring-value"),
    "delta": ("weight of cost in the value (subtracted)", "scoring-value"),
    "relevance_half_life": (
        "seconds since the last access for relevance to halve",
        "scoring-value",
    ),
    "frequency_boost": ("added to relevance at frequency_saturation accesses", "scoring-value"),
    "frequency_saturation": ("accesses that give the full frequency_boost", "scoring-value"),
    "utility_saturation": ("derivations plus successful uses that give utility 1", "scoring-value"),
    "type_costs": ("cost per memory type (`type = cost`)", "scoring-value"),
    "default_cost": ("cost of a memory type not in type_costs", "scoring-value"),
    "archive_below": (
        "the sweep archives an active or pending memory whose value is below this",
        "scoring-lifecycle",
    ),
    "evict_below": (
        "the sweep evicts an archived memory whose value is below this (an idle memory with "
        "no feedback settles near 0.19)",
        "scoring-lifecycle",
    ),
    "evict_after_archived": (
        "seconds a memory stays archived before it may be evicted",
        "scoring-lifecycle",
    ),
    "hot_window": (
        "a memory accessed within this many seconds is reviewed every hot_interval",
        "scoring-lifecycle",
    ),
    "hot_interval": ("seconds between reviews of a hot memory", "scoring-lifecycle"),
    "cold_interval": ("seconds between reviews of any other memory", "scoring-lifecycle"),
    "near_margin": (
        "a value within this of a threshold is reviewed every near_interval",
        "scoring-lifecycle",
    ),
    "near_interval": ("seconds between reviews of a memory near a threshold", "scoring-lifecycle"),
    "objection_window": (
        "seconds the owners of an agent-owned memory have to object (Object RPC) before the "
        "sweep archives or evicts it; they hear a `proposed` event on Watch; 0: no proposals",
        "scoring-lifecycle",
    ),
    "objection_postpone": (
        "seconds one objection postpones the transition (then it is proposed again)",
        "scoring-lifecycle",
    ),
    "max_objections": (
        "objections a memory may get while its value stays low; past them the next "
        "proposal is final",
        "scoring-lifecycle",
    ),
    "rank_reliability_weight": (
        "w_r: FilterRank multiplies by (1 - w_r + w_r * reliability)",
        "scoring-ranking",
    ),
    "rank_value_weight": (
        "w_v: FilterRank multiplies by (1 - w_v + w_v * value)",
        "scoring-ranking",
    ),
}

# Sections, in the order docs and `serve --help` list them: (id, title, introduction).
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("serving", "Serving", "The gRPC server: address, threads, shutdown, TLS."),
    ("auth", "Authentication", "Who may call, in which namespaces."),
    ("store", "Store", "Where lineage lives and how the store is reached."),
    ("policies", "Policies and decisions", "What decides, and how."),
    ("decisions", "Decision log and retention", "What is kept of each decision."),
    ("access", "Access statistics", "How reads are counted."),
    ("metrics", "Metrics", "Prometheus."),
    ("tracing", "Tracing", "OpenTelemetry spans of the RPCs; off unless set (docs/operating.md)."),
    ("lifecycle", "Governance sweep", "The background pass that archives and evicts by value."),
    (
        "time",
        "Time and simulation",
        "What time a request may state, and a clock the callers advance.",
    ),
    (
        "scoring-reliability",
        "Reliability and credibility",
        "How much a memory is believed, from its age and its sources.",
    ),
    (
        "scoring-value",
        "Value",
        "A memory's value, `alpha*accuracy + beta*relevance + gamma*utility - delta*cost`.",
    ),
    (
        "scoring-lifecycle",
        "Lifecycle thresholds and review schedule",
        "When the sweep archives, evicts and looks again.",
    ),
    (
        "scoring-ranking",
        "Ranking",
        "FilterRank's score: similarity x compliance x the two factors below.",
    ),
)


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as every route sees it: generated from Config / ScoringConfig."""

    key: str  # the file's key: `listen`, `scoring.alpha` (key `alpha` of `[scoring]`)
    kind: Kind
    default: Any
    help: str
    section: str
    env: str
    flag: str
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    secret: bool = False


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    assert f.default_factory is not MISSING
    return f.default_factory()


def _kind(owner: str, f: Field[Any]) -> Kind:
    try:
        return _KINDS[str(f.type)]
    except KeyError:
        raise TypeError(f"{owner}.{f.name}: no setting kind for type {f.type!r}") from None


def _build_settings() -> tuple[Setting, ...]:
    out: list[Setting] = []
    for f in fields(Config):
        table = f.metadata.get(_TABLE_META)
        if table is not None:
            names = [sf.name for sf in fields(table)]
            if sorted(names) != sorted(_SCORING_HELP):
                raise TypeError(f"_SCORING_HELP and {table.__name__}'s fields differ")
            for sf in fields(table):
                help_, section = _SCORING_HELP[sf.name]
                out.append(
                    Setting(
                        f"{f.name}.{sf.name}",
                        _kind(table.__name__, sf),
                        _default(sf),
                        help_,
                        section,
                        env=f"MEMLINEAGE_{f.name.upper()}_{sf.name.upper()}",
                        flag=f"--{f.name}-{sf.name.replace('_', '-')}",
                    )
                )
            continue
        meta: _Meta | None = f.metadata.get(_META)
        if meta is None:
            raise TypeError(f"Config.{f.name} is not declared with _setting()")
        out.append(
            Setting(
                f.name,
                _kind("Config", f),
                _default(f),
                meta.help,
                meta.section,
                env=f"MEMLINEAGE_{f.name.upper()}",
                flag=meta.flag or f"--{f.name.replace('_', '-')}",
                aliases=meta.aliases,
                choices=meta.choices,
                secret=meta.secret,
            )
        )
    known = {s for s, _, _ in SECTIONS}
    stray = sorted({s.section for s in out} - known)
    if stray:
        raise TypeError(f"settings in sections missing from SECTIONS: {stray}")
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _build_settings()
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
_TABLES = {f.name: f.metadata[_TABLE_META] for f in fields(Config) if _TABLE_META in f.metadata}


# ------------------------------------------------------------------ loading


def _convert(setting: Setting, raw: object, where: str, route: str) -> Any:
    try:
        return setting.kind.convert(raw, route)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _file_layer(path: str) -> dict[str, tuple[Any, str]]:
    """The file's settings by key, each with where it came from."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    raw: dict[str, object] = {}
    for key, value in data.items():
        if key in _TABLES:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{path}: {key} must be a table ([{key}])")
            unknown = sorted(k for k in value if f"{key}.{k}" not in BY_KEY)
            if unknown:
                raise ConfigError(f"{path}: unknown {key} setting(s) {unknown}")
            raw.update((f"{key}.{k}", v) for k, v in value.items())
    unknown = sorted(k for k in data if k not in BY_KEY and k not in _TABLES)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {unknown}")
    raw.update((k, v) for k, v in data.items() if k in BY_KEY)
    origin = f"file {path}"
    return {k: (_convert(BY_KEY[k], v, f"{path}: {k}", "file"), origin) for k, v in raw.items()}


def _env_layer(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Every set (non-empty) MEMLINEAGE_* variable of a setting."""
    return {
        s.key: (_convert(s, env[s.env], s.env, "env"), f"env {s.env}")
        for s in SETTINGS
        if env.get(s.env)
    }


def _flag_layer(overrides: Mapping[str, object]) -> dict[str, tuple[Any, str]]:
    """Overrides by setting key (the `serve` flags); None means not given."""
    out = {}
    for key, value in overrides.items():
        if value is None:
            continue
        s = BY_KEY.get(key)
        if s is None:
            raise ConfigError(f"unknown setting {key!r}")
        out[key] = (_convert(s, value, s.flag, "flag"), f"flag {s.flag}")
    return out


def resolve_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> tuple[Config, dict[str, str]]:
    """The validated Config and, per setting key, where its value came from."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    layers = [_file_layer(path)] if path else []
    layers += [_env_layer(env), _flag_layer(overrides or {})]
    values: dict[str, Any] = {}
    origins = {s.key: "default" for s in SETTINGS}
    for layer in layers:  # later layers win, key by key
        for key, (value, origin) in layer.items():
            values[key], origins[key] = value, origin
    top: dict[str, Any] = {k: v for k, v in values.items() if "." not in k}
    for name, table in _TABLES.items():
        prefix = name + "."
        top[name] = table(
            **{k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}
        )
    return Config(**top).validated(), origins


def load_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Config:
    """Defaults < the TOML file (path, else $MEMLINEAGE_CONFIG) < env < overrides (flags)."""
    return resolve_config(path, env, overrides)[0]


def value_of(cfg: Config, key: str) -> Any:
    """A setting's value in ``cfg`` by its key (`listen`, `scoring.alpha`)."""
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------ flags


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """`--config` and one flag per setting, in argument groups by section."""
    parser.add_argument(
        "--config", metavar="FILE", help=f"TOML configuration file (default: ${CONFIG_ENV})"
    )
    groups = {
        sid: parser.add_argument_group(("scoring: " if sid.startswith("scoring-") else "") + title)
        for sid, title, _ in SECTIONS
    }
    for s in SETTINGS:
        default = "unset" if s.default is None else s.kind.text(s.default) or "none"
        help_ = f"{s.help} (default: {default}; env {s.env})"
        if s.secret:
            help_ += "; on a command line it is visible to other local users, prefer the env"
        help_ = help_.replace("%", "%%")
        group = groups[s.section]
        if s.kind is BOOL:
            group.add_argument(
                s.flag, *s.aliases, dest=s.key, action=argparse.BooleanOptionalAction, help=help_
            )
        else:
            group.add_argument(
                s.flag,
                *s.aliases,
                dest=s.key,
                choices=s.choices or None,
                metavar=None if s.choices else s.key.rpartition(".")[2].upper(),
                help=help_,
            )


def flag_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The settings given as flags (parsed by add_setting_flags), by key."""
    return {s.key: getattr(args, s.key, None) for s in SETTINGS}


# ------------------------------------------------------------------ docs and show


def _doc_default(s: Setting) -> str:
    if s.default is None:
        return "unset"
    return f"`{s.kind.toml(s.default)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section_rows(settings: Iterable[Setting]) -> list[str]:
    rows = [
        "| key | type | default | environment | flag | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in settings:
        flag = ", ".join(f"`{f}`" for f in (s.flag, *s.aliases))
        if s.kind is BOOL:
            flag = f"`{s.flag}` / `--no-{s.flag[2:]}`"
        kind = s.kind.name + (": " + ", ".join(f"`{c}`" for c in s.choices) if s.choices else "")
        key = s.key.rpartition(".")[2]
        rows.append(
            f"| `{key}` | {_cell(kind)} | {_cell(_doc_default(s))} | `{s.env}` | {flag} "
            f"| {_cell(s.help)}{' (a secret)' if s.secret else ''} |"
        )
    return rows


def render_docs() -> str:
    """docs/configuration.md, generated from SETTINGS (`memlineage config docs`)."""
    kinds = sorted({id(s.kind): s.kind for s in SETTINGS}.values(), key=lambda k: k.name)
    out = [
        "# Configuration",
        "",
        "<!-- Generated from server/memlineage/config.py by `memlineage config docs >",
        "docs/configuration.md`; tests/test_config_docs.py fails when this file is stale. -->",
        "",
        "Every setting can be given in three ways, and a later one wins, key by key:",
        "",
        "1. the TOML file: `memlineage serve --config FILE` (or `$MEMLINEAGE_CONFIG`);",
        "   `[scoring]` keys in a `[scoring]` table, tokens as `[tokens.NAME]` tables;",
        "   an unknown key is an error that names it;",
        "2. the environment: `MEMLINEAGE_<KEY>` (`MEMLINEAGE_SCORING_<KEY>` for `[scoring]`);",
        "   an empty variable counts as unset;",
        "3. a flag of `memlineage serve`: `--<key-with-dashes>` (`--scoring-<key>`).",
        "",
        "So the precedence is defaults < file < environment < flags. A table or list",
        "(`tokens`, `scoring.half_lives`, ...) is one value: a later route replaces it",
        "whole. `memlineage config show` takes the same `--config` and flags as `serve`",
        "and prints every value with where it came from (secrets hidden). A bad value",
        "stops the sidecar with one line naming the file and key, the variable or the",
        "flag, e.g. `error: configuration: MEMLINEAGE_METRICS_PORT: invalid literal ...`.",
        "",
        "`deploy/memlineage.toml` is an example file.",
        "",
        "## Value forms",
        "",
        "| type | in the file | in the environment and flags |",
        "|---|---|---|",
        *[f"| {k.name} | {_cell(_FILE_FORMS[k.name])} | {_cell(k.text_form)} |" for k in kinds],
        "",
        "A setting whose default is *unset* cannot be unset again by a later route.",
        "",
    ]
    for sid, title, intro in SECTIONS:
        level = "##"
        if sid.startswith("scoring-"):
            level = "###"
            if sid == "scoring-reliability":
                out += _SCORING_DOC
        rows = _section_rows(s for s in SETTINGS if s.section == sid)
        out += [f"{level} {title}", "", intro, "", *rows, ""]
        if sid == "auth":
            out += _TOKENS_DOC
    return "\n".join(out).rstrip("\n") + "\n"


_FILE_FORMS = {
    "string": '`"text"`',
    "integer": "`16`",
    "number": "`2.0`, `60`, `inf`",
    "boolean": "`true` / `false`",
    "table of numbers": "`[scoring.half_lives]` with `NAME = NUMBER` lines, or `{ NAME = NUMBER }`",
    "list of [pattern, number]": '`[["user:*", 0.9], ["*", 0.5]]`',
    "token tables": "`[tokens.NAME]` tables (below)",
}

_TOKENS_DOC = [
    "### Tokens",
    "",
    "A caller sends `authorization: Bearer TOKEN`; the token decides the namespaces it",
    "may use, and an admin token may also list, reload and lint policies. In the",
    "file, one table per token; `NAME` is how logs name the caller:",
    "",
    "```toml",
    "[tokens.travel-agent]",
    'token = "change-me-agent"',
    'namespaces = ["default"]   # a list of strings; default: none',
    "",
    "[tokens.ops]",
    'token = "change-me-ops"',
    "admin = true               # default: false",
    "```",
    "",
    "In `MEMLINEAGE_TOKENS` (or `--tokens`), entries `TOKEN=NS1,NS2` joined by `;`,",
    "where the namespace entry `admin` makes an admin token; logs name them `env0`,",
    "`env1`, ... (`flag0`, ... from the flag):",
    "",
    "```sh",
    'MEMLINEAGE_TOKENS="change-me-agent=default;change-me-ops=admin"',
    "```",
    "",
    "A token's value is a secret: prefer the environment (from a secret store) or a",
    "file only the sidecar can read to a flag, which other local users can see.",
    "",
]

_SCORING_DOC = [
    "## Scoring: `[scoring]`",
    "",
    "Weights, half-lives, priors and thresholds of the scores (`server/memlineage/scoring/`).",
    "In the file these keys sit in a `[scoring]` table (any key left out keeps its",
    "default); the environment and flags name them with a `SCORING_` / `scoring-` prefix:",
    "",
    "```toml",
    "[scoring]",
    'default_volatility = "medium"',
    'credibility_priors = [["user:*", 0.95], ["tool:*", 0.7], ["*", 0.5]]',
    "alpha = 0.5",
    "",
    "[scoring.half_lives]     # replaces the whole default table",
    "high = 600",
    "medium = 86400",
    "low = inf",
    "```",
    "",
    "```sh",
    "MEMLINEAGE_SCORING_ALPHA=0.5",
    'MEMLINEAGE_SCORING_HALF_LIVES="high=600,medium=86400,low=inf"',
    "memlineage serve --scoring-credibility-priors 'user:*=0.95,*=0.5'",
    "```",
    "",
]


def render_show(cfg: Config, origins: Mapping[str, str]) -> str:
    """Every setting as `key = value  # origin` (secrets hidden): `memlineage config show`."""
    lines = []
    for s in SETTINGS:
        value = value_of(cfg, s.key)
        if value is None:
            lines.append(f"# {s.key} unset  # {origins.get(s.key, 'default')}")
            continue
        shown = '"<hidden>"' if s.secret and value else s.kind.toml(value)
        lines.append(f"{s.key} = {shown}  # {origins.get(s.key, 'default')}")
    return "\n".join(lines) + "\n"
