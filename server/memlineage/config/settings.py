"""`SETTINGS`, generated from `Config` and `ScoringConfig`, and the three routes
built from it: the file loader, the environment reader, the `serve` flags."""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from memlineage.config.definition import _META, _TABLE_META, Config, _Meta
from memlineage.config.help import _SCORING_HELP, SECTIONS
from memlineage.config.kinds import _KINDS, BOOL, CONFIG_ENV, ConfigError, Kind, Range
from memlineage.nearest import nearest
from memlineage.oserrors import read_regular, reason


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
    range: Range | None = None


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
                range=meta.range,
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
        value = setting.kind.convert(raw, route)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    problem = setting.range.problem(value) if setting.range is not None else None
    if problem is not None:  # named where it was given, not only as the setting
        raise ConfigError(f"{where}: {problem}")
    return value


MAX_CONFIG_BYTES = 16 << 20
"""A configuration file larger than this is refused: no real one comes near it (the
largest holds some thousands of tokens), a mistyped path to a disk image does."""


def _file_layer(path: str) -> dict[str, tuple[Any, str]]:
    """The file's settings by key, each with where it came from."""
    try:
        data = tomllib.loads(read_regular(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: {reason(exc)}") from exc
    except UnicodeDecodeError as exc:  # before: a traceback (tomllib decodes it itself)
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start}): TOML is UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(
            f"{path}: a value is nested deeper than the TOML parser goes (no setting nests "
            "more than two levels)"
        ) from None
    # Every problem of the file in one message (before: the first group only, and an
    # operator fixed one run at a time), each unknown key with the nearest known one.
    problems: list[str] = []
    raw: dict[str, object] = {}
    for key, value in data.items():
        if key in _TABLES:
            if not isinstance(value, Mapping):
                problems.append(f"{path}: {key} must be a table ([{key}])")
                continue
            for k in sorted(k for k in value if f"{key}.{k}" not in BY_KEY):
                known = [s.key.partition(".")[2] for s in SETTINGS if s.key.startswith(f"{key}.")]
                problems.append(f"{path}: unknown {key} setting {k!r}{_nearest(k, known)}")
            raw.update((f"{key}.{k}", v) for k, v in value.items() if f"{key}.{k}" in BY_KEY)
    for k in sorted(k for k in data if k not in BY_KEY and k not in _TABLES):
        top = [s.key for s in SETTINGS if "." not in s.key]
        problems.append(f"{path}: unknown setting {k!r}{_nearest(k, top)}")
    raw.update((k, v) for k, v in data.items() if k in BY_KEY)
    origin = f"file {path}"
    out = {}
    for k, v in raw.items():
        try:
            out[k] = (_convert(BY_KEY[k], v, f"{path}: {k}", "file"), origin)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return out


def _nearest(name: str, known: list[str]) -> str:
    near = nearest(name, known)
    return f" (did you mean {near!r}?)" if near else ""


def _env_layer(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Every set (non-empty) MEMLINEAGE_* variable of a setting."""
    return {
        s.key: (_convert(s, env[s.env], s.env, "env"), f"env {s.env}")
        for s in SETTINGS
        if env.get(s.env)
    }


def _flag_layer(
    overrides: Mapping[str, object], typed: Mapping[str, str]
) -> dict[str, tuple[Any, str]]:
    """Overrides by setting key (the `serve` flags); None means not given. A value is
    named by the flag as typed (`typed`: `--no-fsync`, an alias), else its own flag."""
    out = {}
    for key, value in overrides.items():
        if value is None:
            continue
        s = BY_KEY.get(key)
        if s is None:
            raise ConfigError(f"unknown setting {key!r}")
        flag = typed.get(key, s.flag)
        out[key] = (_convert(s, value, flag, "flag"), f"flag {flag}")
    return out


CLIENT_ENV = ("MEMLINEAGE_TOKEN", "MEMLINEAGE_TARGET")
"""Variables of the CLI's client commands (not settings of the sidecar)."""


def unknown_env(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning per ``MEMLINEAGE_*`` variable that is no setting (a typo such as
    ``MEMLINEAGE_LISTN`` is otherwise ignored without a word), with the nearest name."""
    env = os.environ if env is None else env
    known = {s.env for s in SETTINGS} | {CONFIG_ENV, *CLIENT_ENV}
    out = []
    for name in sorted(n for n in env if n.startswith("MEMLINEAGE_") and n not in known):
        near = nearest(name, known)
        hint = f" (did you mean {near}?)" if near else ""
        out.append(f"{name} is not a setting and is ignored{hint}")
    return out


def resolve_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
    flags: Mapping[str, str] | None = None,
) -> tuple[Config, dict[str, str]]:
    """The validated Config and, per setting key, where its value came from (a flag
    named as typed: `flags`, by key, from `typed_flags`)."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    layers = [_file_layer(path)] if path else []
    layers += [_env_layer(env), _flag_layer(overrides or {}, flags or {})]
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
    try:
        return Config(**top).validated(), origins
    except ConfigError as exc:  # one setting's value: named where it was given too
        origin = origins.get(exc.setting or "", "default")
        if origin == "default":
            raise
        raise ConfigError(f"{origin.partition(' ')[2]}: {exc}", exc.setting) from None


def load_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
    flags: Mapping[str, str] | None = None,
) -> Config:
    """Defaults < the TOML file (path, else $MEMLINEAGE_CONFIG) < env < overrides (flags)."""
    return resolve_config(path, env, overrides, flags)[0]


def value_of(cfg: Config, key: str) -> Any:
    """A setting's value in ``cfg`` by its key (`listen`, `scoring.alpha`)."""
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------ flags

_TYPED = "_setting_flags_typed"  # the parsed namespace's {key: the flag as typed}


def _note_typed(namespace: argparse.Namespace, key: str, option: str | None) -> None:
    if option:
        typed = getattr(namespace, _TYPED, None)
        if typed is None:
            typed = {}
            setattr(namespace, _TYPED, typed)
        typed[key] = option


class _Store(argparse.Action):
    """A setting's flag: stores the value and notes the flag as typed (an alias too)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        _note_typed(namespace, self.dest, option_string)


class _Bool(argparse.BooleanOptionalAction):
    """A boolean setting's `--flag` / `--no-flag`, noting which one was typed."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        _note_typed(namespace, self.dest, option_string)


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
            group.add_argument(s.flag, *s.aliases, dest=s.key, action=_Bool, help=help_)
        else:
            group.add_argument(
                s.flag,
                *s.aliases,
                dest=s.key,
                action=_Store,
                choices=s.choices or None,
                metavar=None if s.choices else s.key.rpartition(".")[2].upper(),
                help=help_,
            )


def flag_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The settings given as flags (parsed by add_setting_flags), by key."""
    return {s.key: getattr(args, s.key, None) for s in SETTINGS}


def typed_flags(args: argparse.Namespace) -> dict[str, str]:
    """The flags as typed (`--no-fsync`, `--policy-dir`), by setting key: what `config
    show` names as a value's origin and a refused value's error names."""
    return dict(getattr(args, _TYPED, None) or {})
