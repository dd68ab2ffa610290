"""Rolling a candidate out through a real `memlineage serve` and the CLI: a promotion
outlives a SIGHUP (logrotate sends one) while the policy directory is unchanged, and a
changed directory still reloads; `shadow load DIR` versions the set as `serve` of that
directory would however DIR is spelled, and refuses a directory with no `.mlp` file or
a file that is not UTF-8 with one line (outside audit P: a rotation rolled a promotion
back; four spellings gave four versions; an empty directory loaded the server's own
shadow directory; a non-UTF-8 file printed a traceback)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.serve_process import NO_WEB_POLICY, ServeProcess, serving_copy_of
from support.sidecar import BUNDLED_POLICIES

NO_WEB = NO_WEB_POLICY


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    with serving_copy_of(BUNDLED_POLICIES, tmp_path / "serving") as server:
        yield server, tmp_path / "serving"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )


def test_a_promotion_outlives_a_sighup_until_the_directory_changes(
    served: tuple[ServeProcess, Path], tmp_path: Path
) -> None:
    server, policies = served
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    (candidate / "zz_no_web.mlp").write_text(NO_WEB)
    with MemLineageClient(server.address, timeout=10) as ml:
        ml.record("web", creator="tool:web_fetch")
        serving = ml.check("read", "web")
        assert serving.effect == pb.EFFECT_DEGRADE
        loaded = _cli("shadow", "load", str(candidate), "--target", server.address)
        assert loaded.returncode == 0, loaded.stderr
        promoted = ml.shadow("promote")
        assert ml.check("read", "web").effect == pb.EFFECT_DENY

        server.proc.send_signal(signal.SIGHUP)
        server.expect("SIGHUP: the policy directory is as it was last loaded", timeout=20)
        kept = ml.check("read", "web")
        assert kept.effect == pb.EFFECT_DENY
        assert kept.policy_version == promoted.serving_version

        (policies / "zz_no_web.mlp").write_text(NO_WEB)  # the operator writes it down
        server.proc.send_signal(signal.SIGHUP)
        server.expect("SIGHUP: policies reloaded", timeout=20)
        after = ml.check("read", "web")
        assert after.effect == pb.EFFECT_DENY
        # the same files as the candidate: the same version, from the directory now
        assert after.policy_version == promoted.serving_version


def test_shadow_load_versions_the_set_as_serve_does_however_spelled(
    served: tuple[ServeProcess, Path], tmp_path: Path
) -> None:
    server, policies = served
    with MemLineageClient(server.address, timeout=10) as ml:
        serving = ml.list_policies().version
        spellings = [
            (str(policies), None),
            ("serving", tmp_path),
            ("./serving/", tmp_path),
            (".", policies),
        ]
        for spelled, cwd in spellings:
            out = _cli("shadow", "load", spelled, "--target", server.address, cwd=cwd)
            assert out.returncode == 0, out.stderr
            assert f"shadow {serving}:" in out.stdout, (spelled, out.stdout)
            assert ml.shadow("drop").serving_version == serving


def test_shadow_load_refuses_an_empty_directory_and_a_file_not_utf8(
    served: tuple[ServeProcess, Path], tmp_path: Path
) -> None:
    server, _ = served
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.txt").write_text("no policies here")
    out = _cli("shadow", "load", str(empty), "--target", server.address)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"error: {empty}: no .mlp file to load\n"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.mlp").write_bytes(b"\xff\xfe policy")
    out = _cli("shadow", "load", str(bad), "--target", server.address)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: {bad / 'x.mlp'}: not UTF-8 (byte 0: ")
    with MemLineageClient(server.address, timeout=10) as ml:
        assert not ml.shadow("status").active  # nothing was loaded
    # a candidate the server refuses: its problems name the files as the user typed
    # the directory (before: relative to it, `broken.mlp:2:8`, as they were sent)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "broken.mlp").write_text("policy p priority 1 {\n  on read\n  deny\n  when\n}\n")
    out = _cli("shadow", "load", str(broken), "--target", server.address)
    assert out.returncode == 1, out
    assert f"{broken / 'broken.mlp'}:" in out.stdout and "\nbroken.mlp:" not in out.stdout
