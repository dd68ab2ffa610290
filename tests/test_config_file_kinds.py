"""A configuration file that is not a small UTF-8 regular file is refused with its path
and why, not read without end (/dev/zero) nor answered with a traceback (not UTF-8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from memlineage.config import ConfigError, load_config

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI of this checkout (not whichever copy is installed)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(str(REPO / d) for d in ("server", "policy_dsl")),
    }
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_config_file_that_is_not_utf8_is_named_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'sidecar_id = "caf\xe9"\n')
    with pytest.raises(ConfigError) as err:
        load_config(str(bad), env={})
    assert str(err.value) == f"{bad}: not UTF-8 (byte 17): TOML is UTF-8"
    out = _cli("config", "show", "--config", str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr == f"error: configuration: {bad}: not UTF-8 (byte 17): TOML is UTF-8\n"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_the_config_file_is_refused_not_read_without_end(device: str) -> None:
    out = _cli("config", "show", "--config", device)  # before: ran until the timeout
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"error: configuration: {device}: not a regular file (a FIFO, device or socket)\n"
    )


def test_a_fifo_or_a_huge_file_as_the_config_file_is_refused(tmp_path: Path) -> None:
    from memlineage.config.settings import MAX_CONFIG_BYTES

    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)  # no writer: an open that blocked would wait for ever
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(str(fifo), env={})
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(ConfigError) as err:
        load_config(str(huge), env={})
    assert str(err.value) == f"{huge}: larger than {MAX_CONFIG_BYTES:,} bytes"
