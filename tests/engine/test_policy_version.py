"""The serving set's version depends on the files' contents and their names relative
to the policy directory only, not on how the directory was spelled."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from memlineage.engine.policies import PolicyHolder

BUNDLED = Path(__file__).resolve().parents[2] / "policies"


def test_the_version_does_not_depend_on_how_the_directory_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a" / "policies", tmp_path / "elsewhere"
    shutil.copytree(BUNDLED, a)
    shutil.copytree(BUNDLED, b)
    monkeypatch.chdir(tmp_path / "a")
    spellings = ["policies", "./policies/", str(a), os.path.relpath(a), str(b)]
    versions = {PolicyHolder(s).current.version for s in spellings}
    assert len(versions) == 1
    (b / "act_gate.mlp").write_text((b / "act_gate.mlp").read_text() + "\n# changed\n")
    assert PolicyHolder(str(b)).current.version not in versions
    (a / "act_gate.mlp").rename(a / "gate.mlp")  # a name is part of the set
    assert PolicyHolder(str(a)).current.version not in versions


def test_a_reload_of_the_same_directory_keeps_the_version(tmp_path: Path) -> None:
    shutil.copytree(BUNDLED, tmp_path / "p")
    holder = PolicyHolder(str(tmp_path / "p"))
    before = holder.current.version
    assert holder.reload().version == before
