"""Sidecar configuration: defaults < TOML file < environment < command-line flags.

The `Config` dataclass (`definition.py`) is the one definition of every setting:
each field's annotation is its type, its default the default, and its metadata the
section, help, environment variable and flag (derived from the name unless spelled
out). `[scoring]` keys are `ScoringConfig`'s fields, with their help in `help.py`;
value kinds are in `kinds.py`.
`SETTINGS` is built from those, and everything else is generated from `SETTINGS`:
the file loader, the environment reader, the `serve` flags (`add_setting_flags`,
`settings.py`) and docs/configuration.md (`render_docs`, `memlineage config docs`,
`docs.py`), so the three
routes and the docs cannot drift apart.
"""

from __future__ import annotations

from memlineage.config.definition import Config
from memlineage.config.docs import render_docs, render_show
from memlineage.config.help import SECTIONS
from memlineage.config.kinds import (
    BOOL,
    CONFIG_ENV,
    FAIL_MODES,
    FLOAT,
    INT,
    PRIORS,
    STR,
    TABLE,
    TOKENS,
    ConfigError,
    Kind,
    T,
    TokenGrant,
)
from memlineage.config.settings import (
    BY_KEY,
    SETTINGS,
    Setting,
    add_setting_flags,
    flag_overrides,
    load_config,
    resolve_config,
    typed_flags,
    unknown_env,
    value_of,
)

__all__ = [
    "BOOL",
    "BY_KEY",
    "CONFIG_ENV",
    "FAIL_MODES",
    "FLOAT",
    "INT",
    "PRIORS",
    "SECTIONS",
    "SETTINGS",
    "STR",
    "TABLE",
    "TOKENS",
    "Config",
    "ConfigError",
    "Kind",
    "Setting",
    "T",
    "TokenGrant",
    "add_setting_flags",
    "flag_overrides",
    "load_config",
    "render_docs",
    "render_show",
    "resolve_config",
    "typed_flags",
    "unknown_env",
    "value_of",
]
