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
        "travel-agent": (("default",), False), "ops": ((), True)}
    assert cfg.store_url().startswith("embedded:///")
    assert cfg.grpc_workers == 0  # automatic


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('listen = "127.0.0.1:1"\nfail_mode = "closed"\n')
    env = {"MEMLINEAGE_LISTEN": "127.0.0.1:2", "MEMLINEAGE_FAIL_MODE": "degraded",
           "MEMLINEAGE_TOKENS": "t1=a,b;t2=admin"}
    cfg = load_config(str(f), env=env, overrides={"listen": "127.0.0.1:3", "store": None})
    assert cfg.listen == "127.0.0.1:3" and cfg.fail_mode == "degraded"
    assert [(t.token, t.namespaces, t.admin) for t in cfg.tokens] == [
        ("t1", ("a", "b"), False), ("t2", (), True)]


@pytest.mark.parametrize(("text", "message"), [
    ('fail_mode = "sometimes"', "fail_mode must be one of"),
    ('listen = "nowhere"', "listen must be HOST:PORT"),
    ('colour = "blue"', "unknown setting(s) ['colour']"),
    ('metrics_port = "x"', "metrics_port"),
    ("[tokens.a]\nnamespaces = ['x']", "tokens.a needs a `token`"),
    ("listen = ", "c.toml"),
    ("grpc_workers = -1", "grpc_workers must be 0 (automatic) to 1024"),
    ("grpc_workers = 5000", "grpc_workers must be 0 (automatic) to 1024"),
])
def test_bad_configuration_is_named(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(str(f), env={})
