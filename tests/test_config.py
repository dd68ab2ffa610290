"""Configuration: file < environment < flags, and precise errors for bad values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memlineage.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[1]


def test_example_config_loads() -> None:
    cfg = load_config(str(REPO / "deploy" / "memlineage.toml"), env={})
    assert cfg.store == "embedded" and cfg.metrics_port == 9464
    assert {t.name: (t.namespaces, t.admin) for t in cfg.tokens} == {
        "travel-agent": (("default",), False),
        "ops": ((), True),
    }
    assert cfg.store_url().startswith("embedded:///")
    assert cfg.grpc_workers == 0  # automatic


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('listen = "127.0.0.1:1"\nfail_mode = "closed"\n')
    env = {
        "MEMLINEAGE_LISTEN": "127.0.0.1:2",
        "MEMLINEAGE_FAIL_MODE": "degraded",
        "MEMLINEAGE_TOKENS": "t1=a,b;t2=admin",
    }
    cfg = load_config(str(f), env=env, overrides={"listen": "127.0.0.1:3", "store": None})
    assert cfg.listen == "127.0.0.1:3" and cfg.fail_mode == "degraded"
    assert [(t.token, t.namespaces, t.admin) for t in cfg.tokens] == [
        ("t1", ("a", "b"), False),
        ("t2", (), True),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('fail_mode = "sometimes"', "fail_mode must be one of"),
        ('listen = "nowhere"', "listen must be HOST:PORT"),
        ('colour = "blue"', "unknown setting 'colour'"),
        ("metrics_prot = 1", "unknown setting 'metrics_prot' (did you mean 'metrics_port'?)"),
        ('metrics_port = "x"', "metrics_port"),
        ("[tokens.a]\nnamespaces = ['x']", "tokens.a needs a `token`"),
        ("listen = ", "c.toml"),
        ("grpc_workers = -1", "c.toml: grpc_workers: must be 0 to 1024, got -1"),
        ("grpc_workers = 5000", "grpc_workers: must be 0 to 1024, got 5000"),
        ("access_flush_seconds = 0", "access_flush_seconds: must be 0.01 to 3600, got 0"),
        ("access_flush_seconds = 1e9", "access_flush_seconds: must be 0.01 to 3600, got 1e+09"),
        ("[scoring]\ncolour = 1", "unknown scoring setting 'colour'"),
        ("[scoring]\nalpah = 1", "unknown scoring setting 'alpah' (did you mean 'alpha'?)"),
        ("[scoring]\nalpha = 'much'", "scoring.alpha: must be a number, got 'much'"),
        ("[scoring]\nalpha = [1]", "scoring.alpha: must be a number"),
        ("[scoring]\nhalf_lives = 3", "scoring.half_lives: must be a table"),
        ("[scoring.half_lives]\nhigh = 'soon'", "scoring.half_lives: must be a number, got 'soon'"),
        ("[scoring]\ncredibility_priors = 0.5", "scoring.credibility_priors: must be a list"),
        ("[scoring]\ncredibility_priors = [['user:*']]", "scoring.credibility_priors: not enough"),
        # values out of their range (before: accepted, bending every score or, for a
        # port past 65535, serving on another port, the number modulo 65536)
        ('listen = "127.0.0.1:99999"', "listen port must be 0 to 65535, got 99999"),
        ("metrics_port = 70000", "metrics_port: must be 0 to 65535, got 70000"),
        ('store = "mysql://x"', "store must be embedded, embedded:///dir, redis://"),
        # fsync where no commit can take it (in memory, or Redis): refused, not ignored
        ("fsync = true", "fsync applies to the embedded store with a data directory"),
        ('fsync = true\nstore = "redis://h:1/0"', "got store 'redis://h:1/0'"),
        ("grace_seconds = -1", "grace_seconds: must be 0 to 3600, got -1"),
        # found by an outside audit: each was accepted
        ("compact_log_bytes = -5", "compact_log_bytes: must be 1 to 1,099,511,627,776, got -5"),
        ("sweep_interval = inf", "sweep_interval: must be a finite number (0 to 604800), got inf"),
        ("lineage_depth = 10000000000", "lineage_depth: must be 1 to 64, got 1e+10"),
        ("decision_log_keep = 0", "decision_log_keep: must be 1 to 1000, got 0"),
        ("[scoring]\nalpha = -1", "scoring: alpha must be in [0, 1], got -1.0"),
        ("[scoring]\nrank_value_weight = nan", "scoring: rank_value_weight must be in [0, 1]"),
        ("[scoring]\ncredibility_priors = [['user:*', 2]]", "credibility_priors.user:* must be in"),
        ("[scoring]\ndefault_volatility = 'weird'", "default_volatility 'weird' is not one of"),
        ("[scoring.half_lives]\nhigh = 0", "scoring: half_lives.high must be > 0, got 0.0"),
        ("[scoring]\nprior_strength = 0", "scoring: prior_strength must be > 0"),
        # an int past float's range (before: OverflowError, a traceback)
        (
            "lineage_depth = " + "9" * 400,
            "lineage_depth: must be 1 to 64, got 999999... (400 digits)",
        ),
        # nested past tomllib's recursion (before: RecursionError, a traceback)
        ("decision_log = " + "[" * 5000 + "]" * 5000, "nested deeper than the TOML parser goes"),
    ],
)
def test_bad_configuration_is_named(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(str(f), env={})


def test_every_problem_of_a_file_is_named_at_once(tmp_path: Path) -> None:
    """An outside audit's file: before, only `[scoring]`'s unknown key was named, and
    the others one run at a time."""
    f = tmp_path / "c.toml"
    f.write_text("listen = 3\nmetrics_prot = 1\n[scoring]\nalpah = 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(f), env={})
    assert str(err.value) == "; ".join(
        (
            f"{f}: unknown scoring setting 'alpah' (did you mean 'alpha'?)",
            f"{f}: unknown setting 'metrics_prot' (did you mean 'metrics_port'?)",
            f"{f}: listen: must be a string",
        )
    )


def test_a_range_error_names_where_the_value_was_given(tmp_path: Path) -> None:
    """The file and key, the environment variable or the flag (before: only the setting,
    so `--lineage-depth -3` read like a problem in the file); a Config built in code
    is checked against the same declared ranges."""
    from memlineage.config import Config

    with pytest.raises(ConfigError, match=r"^MEMLINEAGE_LINEAGE_DEPTH: must be 1 to 64, got 0$"):
        load_config(env={"MEMLINEAGE_LINEAGE_DEPTH": "0"})
    with pytest.raises(ConfigError, match=r"^--lineage-depth: must be 1 to 64, got -3$"):
        load_config(env={}, overrides={"lineage_depth": "-3"})
    with pytest.raises(ConfigError, match=r"^redis_socket_timeout must be > 0 and <= 60, got 0$"):
        Config(redis_socket_timeout=0.0).validated()


def test_an_unknown_memlineage_variable_is_named_with_the_nearest_setting() -> None:
    import subprocess
    import sys

    from memlineage.config import unknown_env

    env = {"MEMLINEAGE_LISTN": "x", "MEMLINEAGE_LISTEN": "127.0.0.1:1", "MEMLINEAGE_TOKEN": "t"}
    assert unknown_env(env) == [
        "MEMLINEAGE_LISTN is not a setting and is ignored (did you mean MEMLINEAGE_LISTEN?)"
    ]
    assert unknown_env({"MEMLINEAGE_CONFIG": "c.toml", "HOME": "/"}) == []
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "config", "show"],
        env={"PATH": "/usr/bin:/bin", "MEMLINEAGE_LISTN": "x"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and out.stderr.startswith(
        "warning: configuration: MEMLINEAGE_LISTN is not a setting"
    ), out.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # each was accepted; `serve` then stopped with a traceback, or ran without auth
        ("tok=", "MEMLINEAGE_TOKENS: tokens.env0: needs at least one namespace, or admin"),
        ("tok=,", "MEMLINEAGE_TOKENS: tokens.env0: needs at least one namespace, or admin"),
        (";", "MEMLINEAGE_TOKENS: names no token (only separators)"),
        (" ; ", "MEMLINEAGE_TOKENS: names no token (only separators)"),
        ("a=ns1;a=ns2,admin", "MEMLINEAGE_TOKENS: tokens.env1: the same token as tokens.env0"),
        ("tok=*", "MEMLINEAGE_TOKENS: tokens.env0: namespace '*' is not 1 to 128 of letters"),
        ("tok=ns,as=robot:x", "MEMLINEAGE_TOKENS: tokens.env0: speaks_as 'robot:x' is not KIND:"),
        ("tok=ns,as=", "MEMLINEAGE_TOKENS: tokens.env0: speaks_as '' is not KIND:NAME"),
    ],
)
def test_tokens_that_cannot_serve_are_refused_where_they_are_given(env: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_config(env={"MEMLINEAGE_TOKENS": env})


def test_token_tables_that_cannot_serve_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    for tables, message in (
        ('[tokens.a]\ntoken = ""\nnamespaces = ["x"]', "tokens.a: the token must be 1 to 4096"),
        ('[tokens.a]\ntoken = " t "\nnamespaces = ["x"]', "tokens.a: the token must be"),
        ('[tokens.a]\ntoken = "t"\nnamespaces = []', "tokens.a: needs at least one namespace"),
        (
            '[tokens.a]\ntoken = "t"\nnamespaces = ["x"]\n[tokens.b]\ntoken = "t"\nadmin = true',
            "tokens.b: the same token as tokens.a",
        ),
        ('[tokens.a]\ntoken = "t"\nnamespaces = ["a\\nb"]', "tokens.a: namespace 'a\\nb' is not"),
    ):
        f.write_text(tables + "\n")
        with pytest.raises(ConfigError, match="^" + re.escape(f"{f}: tokens: {message}")):
            load_config(str(f), env={})
    from memlineage.config import Config, TokenGrant

    with pytest.raises(ConfigError, match=r"the same token as tokens\.a"):  # a Config in code
        Config(
            tokens=(TokenGrant("t", ("x",), name="a"), TokenGrant("t", ("y",), name="b"))
        ).validated()


def test_a_tokens_identities_come_from_the_file_the_environment_and_round_trip(
    tmp_path: Path,
) -> None:
    f = tmp_path / "t.toml"
    f.write_text(
        '[tokens.runtime]\ntoken = "rt"\nnamespaces = ["a"]\nspeaks_as = ["agent:*", "tool:*"]\n'
        '[tokens.app]\ntoken = "ap"\nnamespaces = ["a"]\n'
    )
    runtime, app = load_config(str(f), env={}).tokens
    assert runtime.speaks_as == ("agent:*", "tool:*") and app.speaks_as == ()
    (env,) = load_config(env={"MEMLINEAGE_TOKENS": "rt=a,b,as=agent:*,as=tool:read_*"}).tokens
    assert env.namespaces == ("a", "b") and env.speaks_as == ("agent:*", "tool:read_*")
    f.write_text('[tokens.x]\ntoken = "t"\nnamespaces = ["a"]\nspeaks_as = "agent:*"\n')
    with pytest.raises(ConfigError, match=r"tokens\.x\.speaks_as must be a list of strings"):
        load_config(str(f), env={})
    import tomllib

    from memlineage.config import TokenGrant
    from memlineage.config.kinds import TOKENS

    tables = tomllib.loads("tokens = " + TOKENS.toml((runtime, app)))["tokens"]
    assert TOKENS.convert(tables, "file") == (runtime, app)
    both = (runtime, app)  # written back as a table and as text, read back the same
    assert TOKENS.convert(TOKENS.text(both), "env") == tuple(
        TokenGrant(g.token, g.namespaces, g.admin, f"env{i}", g.speaks_as)
        for i, g in enumerate(both)
    )


def test_scoring_table_sets_each_field_with_its_type(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        "[scoring]\nalpha = 1\nhalf_lives = { high = 60, low = inf }\n"
        "credibility_priors = [['user:*', 1], ['*', 0.25]]\n"
    )
    scoring = load_config(str(f), env={}).scoring
    assert scoring.alpha == 1.0 and isinstance(scoring.alpha, float)
    assert scoring.half_lives == {"high": 60.0, "low": float("inf")}
    assert scoring.credibility_priors == (("user:*", 1.0), ("*", 0.25))


def test_token_grants_are_configuration() -> None:
    """TokenGrant is defined by the configuration; the transport's auth uses that class."""
    from memlineage.config import TokenGrant
    from memlineage.grpc_api import auth

    assert auth.TokenGrant is TokenGrant and TokenGrant.__module__.startswith("memlineage.config")


def test_an_unreadable_config_file_is_named_with_the_system_reason(tmp_path: Path) -> None:
    """Not Python's "[Errno 2] No such file or directory: 'PATH'" after the path again."""
    with pytest.raises(ConfigError) as missing:
        load_config(str(tmp_path / "none.toml"), env={})
    assert str(missing.value) == f"{tmp_path / 'none.toml'}: No such file or directory"
    with pytest.raises(ConfigError) as directory:
        load_config(str(tmp_path), env={})
    assert str(directory.value) == f"{tmp_path}: Is a directory"
