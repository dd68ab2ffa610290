"""A baseline revision of this repository checked out beside the working tree (a
temporary ``git worktree``), for the benches that run its code against the tree's
(`instructions_bench.py`, `revision_bench.py`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def checkout(revision: str, prefix: str) -> Iterator[tuple[str, Path]]:
    """`revision` (short hash) and the directory it is checked out in, removed (with
    its worktree entry) on leaving."""
    rev = subprocess.run(
        ["git", "rev-parse", "--short", revision],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    base = tmp / "baseline"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(base), rev], cwd=REPO, check=True
    )
    try:
        yield rev, base
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO)
        shutil.rmtree(tmp, ignore_errors=True)


def pythonpath(code: Path) -> str:
    """The ``PYTHONPATH`` that makes a Python process import the code of checkout `code`
    (the server and the language) before the installed (the working tree's)."""
    return os.pathsep.join([str(code / "server"), str(code / "policy_dsl")])
