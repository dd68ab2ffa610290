"""docs/configuration.md is generated from the settings' definition and must be current;
README's configuration paragraph points to it and names only real settings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from memlineage.config import BY_KEY, SETTINGS, render_docs

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "configuration.md"


def test_committed_configuration_doc_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render_docs(), (
        "docs/configuration.md is stale: run "
        "`.venv/bin/memlineage config docs > docs/configuration.md`"
    )


def test_config_docs_command_prints_the_doc() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "config", "docs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == render_docs()


def test_doc_names_every_setting_by_all_three_routes() -> None:
    text = render_docs()
    for s in SETTINGS:
        row = next(line for line in text.splitlines() if f"`{s.env}`" in line)
        assert f"`{s.key.rpartition('.')[2]}`" in row and f"`{s.flag}" in row, s.key


def test_readme_points_to_the_doc_and_names_real_settings() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("- Configuration:") :].split("\n- ", 1)[0]
    assert "docs/configuration.md" in section
    for var in re.findall(r"MEMLINEAGE_[A-Z_]+", section):
        assert var in {s.env for s in SETTINGS} | {"MEMLINEAGE_CONFIG"}, var
    for flag in re.findall(r"`(--[a-z-]+)", section):
        assert any(flag in (s.flag, *s.aliases) for s in SETTINGS) or flag == "--config", flag
    assert BY_KEY  # the definition is not empty
