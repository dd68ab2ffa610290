"""Every setting through each of the three routes (file, environment, `serve` flag),
and the precedence file < environment < flag for each: SETTINGS is generated from
one definition, so these tests walk it, and a new setting without a sample here fails."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memlineage import cli_parser
from memlineage.config import (
    BOOL,
    BY_KEY,
    SETTINGS,
    ConfigError,
    Setting,
    TokenGrant,
    load_config,
    value_of,
)
from memlineage.scoring.config import ScoringConfig

INF = math.inf
# Three values per setting, each differing from the one before (and the first from
# the default), all valid: file gets the first, env the second, a flag the third.
SAMPLES: dict[str, tuple[Any, Any, Any]] = {
    "listen": ("127.0.0.1:1", "127.0.0.1:2", "0.0.0.0:3"),
    "grpc_workers": (1, 2, 3),
    "grpc_runtime": ("aio", "sync", "aio"),
    "cpu_affinity": ("0", "1", "0-1"),
    "grace_seconds": (1.5, 2.5, 3.5),
    "tls_cert": ("a.pem", "b.pem", "c.pem"),
    "tls_key": ("a.key", "b.key", "c.key"),
    "sidecar_id": ("sc-a", "sc-b", "sc-c"),
    "tokens": (
        (TokenGrant("t-a", ("ns1",), False, "a"),),
        (TokenGrant("t-b", ("ns1", "ns2"), False), TokenGrant("t-c", (), True)),
        (TokenGrant("t-d", ("ns3",), True),),
    ),
    "store": ("redis://a:1/0", "redis+cluster://b:2,c:3", "embedded:///tmp/x"),
    "data_dir": ("/d1", "/d2", "/d3"),
    "fsync": (True, False, True),
    "redis_socket_timeout": (2.0, 3.0, 0.5),
    "redis_connect_timeout": (2.0, 3.0, 0.5),
    "redis_wait_replicas": (1, 2, 3),
    "redis_wait_timeout": (0.2, 0.3, 0.4),
    "compact_log_bytes": (1, 2, 3),
    "policy_dir": ("p1", "p2", "p3"),
    "fail_mode": ("degraded", "closed", "degraded"),
    "lineage_depth": (1, 2, 3),
    "reuse_decisions": (False, True, False),
    "keep_views": (False, True, False),
    "shadow_policy_dir": ("s1", "s2", "s3"),
    "decision_log": ("off", "/tmp/decisions.log", "-"),
    "decision_log_key": ("k1", "k2", "k3"),
    "decision_log_inputs": (True, False, True),
    "decision_log_max_bytes": (10, 20, 30),
    "decision_log_keep": (1, 2, 3),
    "decision_retention": (1, 2, 3),
    "record_access": (False, True, False),
    "access_flush_seconds": (0.5, 1.5, 2.5),
    "metrics_port": (9001, 9002, 9003),
    "metrics_host": ("127.0.0.2", "0.0.0.0", "::1"),
    "tracing": ("console", "file:/tmp/spans.jsonl", "http://127.0.0.1:4318/v1/traces"),
    "sweep_interval": (0.0, 10.0, 20.5),
    "sweep_batch": (1, 2, 3),
    "max_future_seconds": (60.0, 7200.0, 0.0),
    "simulation": (True, False, True),
    # each with the default class (`low`): a table replaces the whole default
    "scoring.half_lives": (
        {"high": 1.0, "low": INF},
        {"medium": 2.0, "low": INF},
        {"static": 3.0, "low": INF},
    ),
    "scoring.default_volatility": ("high", "medium", "static"),
    "scoring.credibility_priors": (
        (("user:*", 1.0),),
        (("tool:*", 0.2), ("*", 0.4)),
        (("*", 0.1),),
    ),
    "scoring.type_costs": ({"plan": 0.3}, {"a": 1.0, "b": 2.0}, {"c": 3.0}),
    "scoring.max_objections": (1, 2, 5),
}
for _s in SETTINGS:  # the scalar [scoring] numbers: any three distinct values will do
    if _s.key.startswith("scoring.") and _s.key not in SAMPLES:
        SAMPLES[_s.key] = (0.11, 0.22, 0.33)

# tls_cert and tls_key go together: the file always carries a pair, which the setting
# under test then overrides; fsync needs a data directory.
BASE = {"tls_cert": "base.pem", "tls_key": "base.key", "data_dir": "/base"}


def toml_text(values: dict[str, Any]) -> str:
    """A TOML file of settings by key (`scoring.x` into a `[scoring]` table)."""
    top = [f"{k} = {BY_KEY[k].kind.toml(v)}" for k, v in values.items() if "." not in k]
    tables: dict[str, list[str]] = {}
    for k, v in values.items():
        if "." in k:
            table, _, name = k.partition(".")
            tables.setdefault(table, []).append(f"{name} = {BY_KEY[k].kind.toml(v)}")
    out = top + [line for t, lines in tables.items() for line in (f"[{t}]", *lines)]
    return "\n".join(out) + "\n"


def flag_args(s: Setting, value: Any) -> list[str]:
    if s.kind is BOOL:
        return [s.flag if value else f"--no-{s.flag[2:]}"]
    return [s.flag, s.kind.text(value)]


def via_flags(*args: str) -> dict[str, object]:
    """The overrides `memlineage serve ARGS` hands to load_config (the real parser)."""
    from memlineage.config import flag_overrides

    return flag_overrides(cli_parser.parser().parse_args(["serve", *args]))


def comparable(key: str, value: Any) -> Any:
    """Tokens compare without their names (which say the route: file table, envN, flagN)."""
    if key == "tokens":
        return tuple((g.token, g.namespaces, g.admin) for g in value)
    return value


def file_with(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "c.toml"
    path.write_text(toml_text({**BASE, **values}))
    return str(path)


def test_every_setting_has_samples() -> None:
    assert sorted(SAMPLES) == sorted(BY_KEY)
    for key, (a, b, c) in SAMPLES.items():
        assert a != BY_KEY[key].default and a != b and b != c, key


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_each_route_sets_the_setting(tmp_path: Path, key: str) -> None:
    s, (a, _, _) = BY_KEY[key], SAMPLES[key]
    base = file_with(tmp_path, {})
    by_file = load_config(file_with(tmp_path, {key: a}), env={})
    by_env = load_config(base, env={s.env: s.kind.text(a)})
    by_flag = load_config(base, env={}, overrides=via_flags(*flag_args(s, a)))
    for cfg in (by_file, by_env, by_flag):
        assert comparable(key, value_of(cfg, key)) == comparable(key, a)


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_precedence_file_then_environment_then_flag(tmp_path: Path, key: str) -> None:
    s, (a, b, c) = BY_KEY[key], SAMPLES[key]
    path = file_with(tmp_path, {key: a})
    env = {s.env: s.kind.text(b)}
    flags = via_flags(*flag_args(s, c))
    assert comparable(key, value_of(load_config(path, env={}), key)) == comparable(key, a)
    assert comparable(key, value_of(load_config(path, env=env), key)) == comparable(key, b)
    got = value_of(load_config(path, env=env, overrides=flags), key)
    assert comparable(key, got) == comparable(key, c)
    got = value_of(load_config(path, env={}, overrides=flags), key)  # flag over file alone
    assert comparable(key, got) == comparable(key, c)


def test_defaults_are_the_dataclasses_defaults() -> None:
    cfg = load_config(env={})
    for s in SETTINGS:
        assert value_of(cfg, s.key) == s.default, s.key
    assert cfg.scoring == ScoringConfig()


def test_layers_merge_key_by_key(tmp_path: Path) -> None:
    """A [scoring] key from the environment leaves the file's other [scoring] keys."""
    path = file_with(tmp_path, {"scoring.alpha": 0.9, "scoring.beta": 0.8, "listen": "h:1"})
    cfg = load_config(path, env={"MEMLINEAGE_SCORING_ALPHA": "0.7"}, overrides={"store": None})
    assert (cfg.scoring.alpha, cfg.scoring.beta, cfg.listen) == (0.7, 0.8, "h:1")


def test_text_forms() -> None:
    env = {
        "MEMLINEAGE_RECORD_ACCESS": "off",
        "MEMLINEAGE_REUSE_DECISIONS": "YES",
        "MEMLINEAGE_SCORING_HALF_LIVES": "high=60, medium = 1e3,low=inf",
        "MEMLINEAGE_SCORING_CREDIBILITY_PRIORS": "user:*=0.95,*=0.5",
        "MEMLINEAGE_TOKENS": "ta=a,b;tb=admin",
        "MEMLINEAGE_METRICS_PORT": " 9100 ",
    }
    cfg = load_config(env=env)
    assert (cfg.record_access, cfg.reuse_decisions, cfg.metrics_port) == (False, True, 9100)
    assert cfg.scoring.half_lives == {"high": 60.0, "medium": 1000.0, "low": INF}
    assert cfg.scoring.credibility_priors == (("user:*", 0.95), ("*", 0.5))
    assert cfg.tokens == (
        TokenGrant("ta", ("a", "b"), False, "env0"),
        TokenGrant("tb", (), True, "env1"),
    )
    flagged = load_config(env={}, overrides=via_flags("--tokens", "tf=x"))
    assert flagged.tokens == (TokenGrant("tf", ("x",), False, "flag0"),)


def test_empty_environment_variable_is_unset() -> None:
    assert load_config(env={"MEMLINEAGE_LISTEN": "", "MEMLINEAGE_METRICS_PORT": ""}) == (
        load_config(env={})
    )


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        (
            {"MEMLINEAGE_METRICS_PORT": "x"},
            {},
            "MEMLINEAGE_METRICS_PORT: must be an integer, got 'x'",
        ),
        ({"MEMLINEAGE_RECORD_ACCESS": "maybe"}, {}, "MEMLINEAGE_RECORD_ACCESS: must be true or"),
        ({"MEMLINEAGE_TOKENS": "no-equals"}, {}, "MEMLINEAGE_TOKENS: entries are token="),
        ({"MEMLINEAGE_SCORING_TYPE_COSTS": "plan"}, {}, "TYPE_COSTS: entries are NAME=NUMBER"),
        ({}, {"grpc_workers": "many"}, "--grpc-workers: must be an integer, got 'many'"),
        ({}, {"scoring.alpha": "much"}, "--scoring-alpha: must be a number, got 'much'"),
        ({}, {"colour": "blue"}, "unknown setting 'colour'"),
        # values checked once merged (their form, their range): named where given too
        # (before: `listen must be HOST:PORT` alone, whichever route set it)
        ({"MEMLINEAGE_LISTEN": "nowhere"}, {}, "MEMLINEAGE_LISTEN: listen must be HOST:PORT"),
        ({}, {"listen": "nowhere"}, "--listen: listen must be HOST:PORT"),
        ({"MEMLINEAGE_FAIL_MODE": "often"}, {}, "MEMLINEAGE_FAIL_MODE: fail_mode must be one"),
        ({}, {"store": "mysql://x"}, "--store: store must be embedded"),
        ({"MEMLINEAGE_TRACING": "loud"}, {}, "MEMLINEAGE_TRACING: tracing must be off"),
        ({"MEMLINEAGE_METRICS_HOST": "a b"}, {}, "MEMLINEAGE_METRICS_HOST: metrics_host must"),
    ],
)
def test_a_bad_value_names_its_route(
    env: dict[str, str], overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(env=env, overrides=overrides)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("listen = 5", "c.toml: listen: must be a string"),
        ("grpc_workers = 1.5", "c.toml: grpc_workers: must be an integer"),
        ("record_access = 1", "c.toml: record_access: must be true or false"),
        ("scoring = 1", "c.toml: scoring must be a table"),
        ("[tokens.a]\ntoken = 'x'\nnamespace = ['y']", "tokens.a: unknown key(s) ['namespace']"),
        ("[tokens.a]\ntoken = 'x'\nnamespaces = 'y'", "tokens.a.namespaces must be a list"),
        ("[scoring]\ndefault_volatility = 3", "scoring.default_volatility: must be a string"),
        ('listen = "nowhere"', "c.toml: listen must be HOST:PORT, got 'nowhere'"),
    ],
)
def test_file_values_are_checked_by_type(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(str(path), env={})


def test_string_scoring_setting_from_the_file(tmp_path: Path) -> None:
    """default_volatility is a string (it used to be read as a number and refused)."""
    path = tmp_path / "c.toml"
    path.write_text('[scoring]\ndefault_volatility = "medium"\n')
    assert load_config(str(path), env={}).scoring.default_volatility == "medium"


def test_config_file_from_the_environment(tmp_path: Path) -> None:
    path = file_with(tmp_path, {"lineage_depth": 7})
    assert load_config(env={"MEMLINEAGE_CONFIG": path}).lineage_depth == 7
    other = tmp_path / "other.toml"
    other.write_text("lineage_depth = 9\n")
    assert load_config(str(other), env={"MEMLINEAGE_CONFIG": path}).lineage_depth == 9


def test_policy_dir_flag_keeps_its_name_and_has_the_regular_one() -> None:
    assert via_flags("--policies", "a")["policy_dir"] == "a"
    assert via_flags("--policy-dir", "b")["policy_dir"] == "b"


def test_config_show_command_reports_values_and_origins(tmp_path: Path) -> None:
    """`memlineage config show`, a real process: the file from $MEMLINEAGE_CONFIG, an
    env variable over it, a flag over both; secrets hidden."""
    path = file_with(tmp_path, {"listen": "127.0.0.1:1", "lineage_depth": 4})
    env = {
        **os.environ,
        "MEMLINEAGE_CONFIG": path,
        "MEMLINEAGE_LISTEN": "127.0.0.1:2",
        "MEMLINEAGE_DECISION_LOG_KEY": "s3cret",
    }
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "config", "show", "--scoring-alpha", "0.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert 'listen = "127.0.0.1:2"  # env MEMLINEAGE_LISTEN' in lines
    assert f"lineage_depth = 4  # file {path}" in lines
    assert "scoring.alpha = 0.5  # flag --scoring-alpha" in lines
    assert "# metrics_port unset  # default" in lines
    assert 'decision_log_key = "<hidden>"  # env MEMLINEAGE_DECISION_LOG_KEY' in lines
    assert "s3cret" not in out.stdout
    assert len(lines) == len(SETTINGS)


def test_config_show_names_each_flag_as_typed() -> None:
    """Before: `--no-fsync` showed as `flag --fsync` (the flag that sets it true) and
    the alias `--policy-dir` as `flag --policies`; each origin is now the flag typed,
    as an env origin is the variable set and a file origin the file read."""

    def show(*args: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "memlineage", "config", "show", *args],
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("MEMLINEAGE_")},
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    typed = show("--no-fsync", "--policy-dir", "y", "--no-record-access")
    assert "fsync = false  # flag --no-fsync" in typed
    assert 'policy_dir = "y"  # flag --policy-dir' in typed
    assert "record_access = false  # flag --no-record-access" in typed
    regular = show("--policies", "z", "--record-access")
    assert 'policy_dir = "z"  # flag --policies' in regular
    assert "record_access = true  # flag --record-access" in regular


def test_a_refused_flag_value_names_the_flag_as_typed() -> None:
    args = cli_parser.parser().parse_args(["serve", "--policy-dir", "p", "--grpc-workers", "x"])
    from memlineage.config import flag_overrides, typed_flags

    assert typed_flags(args) == {"policy_dir": "--policy-dir", "grpc_workers": "--grpc-workers"}
    with pytest.raises(ConfigError, match=r"^--grpc-workers: must be an integer, got 'x'"):
        load_config(env={}, overrides=flag_overrides(args), flags=typed_flags(args))


def test_sweep_namespace_help_says_every_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "default: the caller's; all of them"; a sweep's empty namespace is every
    namespace (RunSweep's), the other commands' the caller's."""

    def help_of(command: str) -> str:
        with pytest.raises(SystemExit):
            cli_parser.parser().parse_args([command, "--help"])
        return " ".join(capsys.readouterr().out.split())

    assert "--namespace NAMESPACE namespace (default: every namespace)" in help_of("sweep")
    for command in ("check", "explain"):
        assert "--namespace NAMESPACE namespace (default: the caller's)" in help_of(command)


def test_serve_reports_a_bad_flag_value_as_configuration() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "serve", "--lineage-depth", "deep"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMLINEAGE_")},
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: configuration: --lineage-depth: must be an integer, got 'deep'"
    )
