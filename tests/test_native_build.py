"""The hot path compiled by mypyc (setup.py): compiled in this install, deciding
exactly as the plain sources do, refused when its sources were edited since."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memlineage_dsl.native import refuse_stale, stale

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "tests" / "support" / "native_workload.py"
PURE = os.environ.get("MEMLINEAGE_PURE_PYTHON", "") not in ("", "0")


def compiled_modules() -> list[str]:
    """The module names setup.py compiles (read from its LANGUAGE and SERVER lists)."""
    lists: dict[str, list[str]] = {}
    for node in ast.parse((REPO / "setup.py").read_text()).body:
        if not isinstance(node, ast.Assign):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in ("LANGUAGE", "SERVER"):
            lists[target.id] = ast.literal_eval(node.value)
    return [f"memlineage_dsl.{m}" for m in lists["LANGUAGE"]] + [
        "memlineage." + m.replace("/", ".") for m in lists["SERVER"]
    ]


def test_the_hot_path_runs_compiled() -> None:
    names = compiled_modules()
    assert "memlineage.engine.checks" in names and "memlineage_dsl.evaluator" in names
    for name in names:
        path = importlib.import_module(name).__file__ or ""
        assert path.endswith(".py" if PURE else ".so"), (name, path)


def plain_copy(dest: Path) -> Path:
    """The checkout's sources, without any compiled module, under `dest`."""
    for package in ("server", "policy_dsl"):
        for src in (REPO / package).rglob("*"):
            if src.is_file() and src.suffix != ".so" and "__pycache__" not in src.parts:
                target = dest / src.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(src.read_bytes())
    return dest


def transcript(pythonpath: str | None, seed: int) -> list[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [sys.executable, str(WORKLOAD), str(REPO / "policies"), str(seed), "300"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.splitlines()


@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_and_plain_sources_answer_alike(tmp_path: Path, seed: int) -> None:
    """Every answer of a seeded run (records, checks, FilterRank, acts, feedback,
    the clock moving; reuse off and on) is the same, score for score, from the
    compiled modules and from a copy of the plain sources."""
    copy = plain_copy(tmp_path)
    plain = transcript(f"{copy / 'server'}{os.pathsep}{copy / 'policy_dsl'}", seed)
    here = transcript(None, seed)
    assert len(plain) == 600
    effects = "".join(plain)
    assert all(f'"{e}"' in effects for e in ("allow", "deny", "degrade"))
    assert here == plain


def test_a_source_edited_after_its_build_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "pkg" / "memlineage_dsl"
    package.mkdir(parents=True)
    (package / "facts.py").write_text("x = 1\n")
    built = package / "facts.cpython-311-x86_64-linux-gnu.so"
    built.write_bytes(b"")
    (package / "native__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "evaluator.py").write_text("x = 1\n")  # never compiled: not checked
    past = time.time() - 60
    os.utime(package / "facts.py", (past, past))
    assert stale(str(package)) == []
    refuse_stale(str(package))
    os.utime(package / "facts.py")  # edited now, after its build
    assert stale(str(package)) == [str(package / "facts.py")]
    refuse_stale(str(package))  # not a git checkout: installed files are not checked
    (tmp_path / ".git").mkdir()
    with pytest.raises(ImportError, match=r"pkg/memlineage_dsl/facts\.py changed after"):
        refuse_stale(str(package))


def test_this_checkout_is_current() -> None:
    assert stale(str(REPO / "server" / "memlineage")) == []
    assert stale(str(REPO / "policy_dsl" / "memlineage_dsl")) == []
