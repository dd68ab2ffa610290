"""A policy set whose own test blocks fail is not served: not at start, not on a
reload, not as a shadow candidate (before: only `memlineage test` ran them, and a
reload or a promotion put such a set in service; an outside audit), and `memlineage
replay` refuses it as a candidate as it does one with no policy (E305)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder, PolicyLoadError
from memlineage.engine.replay import replay_command
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.serve_process import run_serve
from support.sidecar import BUNDLED_POLICIES

POLICY = (
    'policy doubt priority 5 {\n  on read\n  when memory.confidence < 0.5\n  deny "doubtful"\n}\n'
)
PASSING = (
    'test "doubt" {\n  given memory m { creator: "agent:a", confidence: 0.2 }\n'
    "  expect read m -> deny\n}\n"
)
FAILING = PASSING.replace("-> deny", "-> allow")


def _set(directory: Path, test: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "main.mlp").write_text(POLICY + test, encoding="utf-8")
    return directory


def _codes(diagnostics: list) -> list[str]:  # type: ignore[type-arg]
    return [d.code for d in diagnostics if d.severity == "error"]


def test_a_set_whose_test_fails_does_not_start(tmp_path: Path) -> None:
    broken = _set(tmp_path / "p", FAILING)
    with pytest.raises(PolicyLoadError) as caught:
        PolicyHolder(str(broken))
    assert _codes(caught.value.diagnostics) == ["E503"]
    out = run_serve(["--policies", str(broken)], timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out
    assert 'main.mlp:8:3: error[E503]: test "doubt" failed: expected allow' in out.stderr


def test_a_reload_or_a_candidate_whose_test_fails_is_refused(tmp_path: Path) -> None:
    served = tmp_path / "p"
    shutil.copytree(BUNDLED_POLICIES, served)
    holder = PolicyHolder(str(served))
    before = holder.current
    (served / "zz.mlp").write_text(POLICY + FAILING, encoding="utf-8")
    out = holder.reload()
    assert not out.applied and _codes(out.diagnostics) == ["E503"]
    assert holder.current is before
    sent = holder.reload({"a.mlp": POLICY + FAILING})
    assert not sent.applied and _codes(sent.diagnostics) == ["E503"]
    candidate, diagnostics = PolicyHolder.candidate(files={"a.mlp": POLICY + FAILING})
    assert candidate is None and _codes(diagnostics) == ["E503"]
    passing, _ = PolicyHolder.candidate(files={"a.mlp": POLICY + PASSING})
    assert passing is not None
    assert holder.reload({"a.mlp": POLICY + PASSING}).applied


def test_replay_refuses_a_candidate_the_sidecar_would_not_serve(tmp_path: Path) -> None:
    """Exit 2 with the diagnostic, as at start: a candidate whose test fails, or one
    with no policy (an outside audit: `replay --fail-on any` replayed the first and
    exited 0, a green gate on a set no sidecar takes)."""
    log = tmp_path / "decisions.log"
    with log.open("w", encoding="utf-8") as sink:
        engine = Engine(
            EmbeddedStore(),
            PolicyHolder(BUNDLED_POLICIES),
            log=DecisionLog(sink),
            capture_inputs=True,
        )
        alice = Creator("user", "user:alice")
        engine.record(MemoryRecord("m", "default", creator_id="user:alice"), alice)
        engine.check("default", "read", ("m",), alice)
    failing = _set(tmp_path / "failing", FAILING)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.mlp").write_text("const limit = 3\n", encoding="utf-8")
    for candidate, said in ((failing, "error[E503]"), (empty, "error[E305]")):
        out = io.StringIO()
        assert replay_command([str(log)], str(candidate), "any", out, 1) == 2, out.getvalue()
        assert said in out.getvalue() and "replayed" not in out.getvalue(), out.getvalue()
    passing = _set(tmp_path / "passing", PASSING)
    out = io.StringIO()
    assert replay_command([str(log)], str(passing), "any", out, 1) == 0, out.getvalue()
    assert "2 replayed" in out.getvalue()
