"""A policy set with no policy allows everything, so it is never served (E305): not at
start, not on a reload of a directory emptied mid-deploy (ReloadPolicies, SIGHUP), not
from texts sent in a reload, not as a shadow candidate. The serving set stays (an
outside audit: each of these installed an empty allow-all set and answered applied)."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient
from memlineage.engine.policies import PolicyHolder, PolicyLoadError
from memlineage.v1 import memlineage_pb2 as pb
from memlineage_dsl.diagnostics import Diagnostic
from support.serve_process import ServeProcess, run_serve, serving_copy_of
from support.sidecar import BUNDLED_POLICIES

EMPTIES = {
    "no file": {},
    "an empty file": {"a.mlp": ""},
    "only a constant": {"a.mlp": "const limit = 3\n"},
}


def _errors(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics if d.severity == "error"]


def _fill(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


@pytest.mark.parametrize("case", EMPTIES)
def test_a_set_without_a_policy_is_refused_at_start(tmp_path: Path, case: str) -> None:
    empty = _fill(tmp_path / "p", EMPTIES[case])
    with pytest.raises(PolicyLoadError) as caught:
        PolicyHolder(str(empty))
    assert [d.code for d in caught.value.diagnostics] == ["E305"]
    out = run_serve(["--policies", str(empty)], timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out
    assert "error[E305]: the policy set holds no policy" in out.stderr


@pytest.mark.parametrize("case", EMPTIES)
def test_a_reload_or_a_candidate_without_a_policy_is_refused(tmp_path: Path, case: str) -> None:
    served = tmp_path / "p"
    shutil.copytree(BUNDLED_POLICIES, served)
    holder = PolicyHolder(str(served))
    before = holder.current
    for f in served.glob("*.mlp"):
        f.unlink()
    _fill(served, EMPTIES[case])
    out = holder.reload()
    assert not out.applied and out.version == before.version
    assert _errors(out.diagnostics) == ["E305"]
    assert holder.current is before
    if EMPTIES[case]:  # the same texts sent in the request
        sent = holder.reload(dict(EMPTIES[case]))
        assert not sent.applied and _errors(sent.diagnostics) == ["E305"]
        assert sent.diagnostics[-1].file == "a.mlp"
        candidate, diagnostics = PolicyHolder.candidate(files=dict(EMPTIES[case]))
        assert candidate is None and _errors(diagnostics) == ["E305"]
    candidate, diagnostics = PolicyHolder.candidate(str(served))
    assert candidate is None and _errors(diagnostics) == ["E305"]
    assert holder.current is before


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    with serving_copy_of(BUNDLED_POLICIES, tmp_path / "p") as server:
        yield server, tmp_path / "p"


def test_a_served_directory_emptied_mid_deploy_keeps_the_gate(
    served: tuple[ServeProcess, Path],
) -> None:
    """An injected web page behind a payment: denied by the bundled gate before and
    after a ReloadPolicies and a SIGHUP of the emptied directory."""
    server, policies = served
    with MemLineageClient(server.address, timeout=10) as ml:
        ml.record("page", creator="tool:web_search")
        ml.record("plan", creator="agent:planner", dependencies=["page"])
        first = ml.check("act", ["plan"], action="send_money")
        assert first.effect == pb.EFFECT_DENY
        saved = {f: f.read_text() for f in policies.glob("*.mlp")}
        for f in saved:
            f.unlink()
        out = ml.reload_policies()
        assert not out.applied and out.version == first.policy_version
        assert [d.code for d in out.diagnostics] == ["E305"]
        server.proc.send_signal(signal.SIGHUP)
        server.expect("SIGHUP: policy reload rejected", timeout=20)
        again = ml.check("act", ["plan"], action="send_money")
        assert again.effect == pb.EFFECT_DENY and again.policy_version == first.policy_version
        assert len(ml.list_policies().policies) > 0
        sent = ml.reload_policies({"policies/a.mlp": ""})
        assert not sent.applied and [d.code for d in sent.diagnostics] == ["E305"]
        assert ml.check("act", ["plan"], action="send_money").effect == pb.EFFECT_DENY
