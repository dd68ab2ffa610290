"""Sidecar configuration: defaults < TOML file < environment < command-line flags.

Environment variables: MEMLINEAGE_LISTEN, MEMLINEAGE_STORE, MEMLINEAGE_DATA_DIR,
MEMLINEAGE_POLICY_DIR, MEMLINEAGE_FAIL_MODE, MEMLINEAGE_DECISION_LOG,
MEMLINEAGE_DECISION_LOG_KEY, MEMLINEAGE_DECISION_LOG_MAX_BYTES, MEMLINEAGE_METRICS_PORT,
MEMLINEAGE_TOKENS ("tokA=ns1,ns2;tokB=*admin*" style: `token=namespace,...`, with `admin`
as a namespace entry meaning an admin token).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memlineage.scoring.config import ScoringConfig

FAIL_MODES = ("closed", "degraded")


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the setting."""


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """One configured bearer token: the namespaces it may use, and admin rights."""

    token: str
    namespaces: tuple[str, ...]
    admin: bool = False
    name: str = ""  # how logs name the caller (the `[tokens.NAME]` table, or envN)


@dataclass(frozen=True)
class Config:
    listen: str = "127.0.0.1:50051"
    store: str = "embedded"  # embedded | embedded:///dir | redis://… | redis+cluster://…
    data_dir: str | None = None  # shorthand for embedded:///data_dir
    policy_dir: str = "policies"
    fail_mode: str = "closed"
    decision_log: str = "-"  # "-" stderr, "off", or a file path
    # HMAC-SHA-256 key of the log's hash chain (None: plain SHA-256); not in repr
    decision_log_key: str | None = field(default=None, repr=False)
    decision_log_max_bytes: int = 0  # a file log rotates to FILE.1 past this size; 0: never
    decision_log_keep: int = 5  # rotated files kept (FILE.1 … FILE.N)
    metrics_port: int | None = None
    lineage_depth: int = 16
    record_access: bool = True
    # Reads are summed in memory and written this often: each flush changes the rows
    # read since (their cached records, facts and scores are rebuilt), so flushing less
    # often is cheaper; access statistics are at most this late (Explain and the sweep
    # flush first).
    access_flush_seconds: float = 2.0
    reuse_decisions: bool = True  # repeat a Check's decision while it is exact
    # Decisions the store keeps per namespace for Explain and Feedback of any sidecar,
    # after a restart (Redis, an embedded data dir); written every access_flush_seconds
    decision_retention: int = 10_000
    grpc_workers: int = 0  # gRPC worker threads; 0: 4 on embedded, 32 on Redis
    grace_seconds: float = 5.0
    # Redis: seconds to wait for a reply / to connect; a store that does not answer
    # within them is UNAVAILABLE (keep them well under the clients' deadlines, 5 s)
    redis_socket_timeout: float = 1.0
    redis_connect_timeout: float = 1.0
    tokens: tuple[TokenGrant, ...] = field(default_factory=tuple)
    tls_cert: str | None = None
    tls_key: str | None = None
    sweep_interval: float = 60.0  # seconds between background sweep passes; 0: off
    sweep_batch: int = 1000  # memories examined per namespace per pass
    # embedded data dir: snapshot once this much op JSON was written since the last one
    compact_log_bytes: int = 16 * 1024 * 1024
    scoring: ScoringConfig = field(default_factory=ScoringConfig)

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
        return self


def _tokens_from_table(table: Mapping[str, object]) -> tuple[TokenGrant, ...]:
    grants = []
    for name, spec in table.items():
        if not isinstance(spec, Mapping) or "token" not in spec:
            raise ConfigError(f"tokens.{name} needs a `token` (and `namespaces`, `admin`)")
        grants.append(
            TokenGrant(
                str(spec["token"]),
                tuple(spec.get("namespaces", ())),
                bool(spec.get("admin", False)),
                name,
            )
        )
    return tuple(grants)


def _tokens_from_env(text: str) -> tuple[TokenGrant, ...]:
    grants = []
    for i, part in enumerate(p for p in text.split(";") if p.strip()):
        token, sep, spaces = part.partition("=")
        if not sep:
            raise ConfigError("MEMLINEAGE_TOKENS entries are token=ns1,ns2[,admin]")
        names = [n.strip() for n in spaces.split(",") if n.strip()]
        grants.append(
            TokenGrant(
                token.strip(), tuple(n for n in names if n != "admin"), "admin" in names, f"env{i}"
            )
        )
    return tuple(grants)


def _scoring_value(name: str, value: object) -> Any:
    """One `[scoring]` value as its ScoringConfig field's type; TypeError/ValueError if not."""
    if name in ("half_lives", "type_costs"):
        if not isinstance(value, Mapping):
            raise TypeError("must be a table")
        return {str(k): float(v) for k, v in value.items()}
    if name == "credibility_priors":
        if not isinstance(value, list | tuple):
            raise TypeError("must be a list of [pattern, credibility] pairs")
        return tuple((str(p), float(c)) for p, c in value)
    if not isinstance(value, int | float | str):
        raise TypeError("must be a number")
    return float(value)


def _scoring_from_table(table: Mapping[str, object], path: str) -> ScoringConfig:
    """`[scoring]`: any ScoringConfig field; `half_lives` a table of class -> seconds."""
    known = {f.name: f for f in fields(ScoringConfig)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown scoring setting(s) {unknown}")
    values: dict[str, Any] = {}
    for name, value in table.items():
        try:
            values[name] = _scoring_value(name, value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: scoring.{name}: {exc}") from exc
    return ScoringConfig(**values)


_ENV = {
    "listen": "MEMLINEAGE_LISTEN",
    "store": "MEMLINEAGE_STORE",
    "data_dir": "MEMLINEAGE_DATA_DIR",
    "policy_dir": "MEMLINEAGE_POLICY_DIR",
    "fail_mode": "MEMLINEAGE_FAIL_MODE",
    "decision_log": "MEMLINEAGE_DECISION_LOG",
    "decision_log_key": "MEMLINEAGE_DECISION_LOG_KEY",
    "decision_log_max_bytes": "MEMLINEAGE_DECISION_LOG_MAX_BYTES",
    "metrics_port": "MEMLINEAGE_METRICS_PORT",
    "decision_retention": "MEMLINEAGE_DECISION_RETENTION",
}


def _coerce(name: str, value: object) -> Any:
    """``value`` as the type of the Config field ``name`` (so the result's type varies)."""
    kind = {f.name: f.type for f in fields(Config)}[name]
    try:
        if "int" in str(kind) and not isinstance(value, int):
            return int(str(value))
        if "float" in str(kind) and not isinstance(value, float):
            return float(str(value))
        if "bool" in str(kind) and isinstance(value, str):
            return value.lower() in ("1", "true", "yes", "on")
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    return value


def load_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Config:
    cfg = Config()
    env = os.environ if env is None else env
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        tokens = data.pop("tokens", {})
        scoring = _scoring_from_table(data.pop("scoring", {}), path)
        known = {f.name for f in fields(Config)} - {"tokens", "scoring"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) {unknown}")
        cfg = replace(
            cfg,
            **{k: _coerce(k, v) for k, v in data.items()},
            tokens=_tokens_from_table(tokens),
            scoring=scoring,
        )
    for name, var in _ENV.items():
        if env.get(var):
            cfg = replace(cfg, **{name: _coerce(name, env[var])})
    if env.get("MEMLINEAGE_TOKENS"):
        cfg = replace(cfg, tokens=_tokens_from_env(env["MEMLINEAGE_TOKENS"]))
    for name, value in (overrides or {}).items():
        if value is not None:
            cfg = replace(cfg, **{name: _coerce(name, value)})
    return cfg.validated()
