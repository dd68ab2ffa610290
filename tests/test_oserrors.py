"""`memlineage.oserrors`: how an OSError about a file is said to a person."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from memlineage.oserrors import reason, said


def test_a_file_error_is_its_path_and_the_system_reason(tmp_path: Path) -> None:
    with pytest.raises(OSError) as missing:
        open(tmp_path / "none.log")  # noqa: SIM115 - the error is the point
    assert said(missing.value) == f"{tmp_path / 'none.log'}: No such file or directory"
    assert reason(missing.value) == "No such file or directory"
    with pytest.raises(OSError) as renamed:
        os.rename(tmp_path / "none", tmp_path / "other")
    assert said(renamed.value) == (
        f"{tmp_path / 'none'} -> {tmp_path / 'other'}: No such file or directory"
    )


def test_an_error_without_a_file_or_reason_is_said_as_raised() -> None:
    own = OSError("cannot listen on 127.0.0.1:1: address in use")
    assert said(own) == reason(own) == "cannot listen on 127.0.0.1:1: address in use"
    bare = OSError(errno.EACCES, "Permission denied")
    assert said(bare) == "[Errno 13] Permission denied"  # no file: Python's own text
    assert reason(bare) == "Permission denied"
