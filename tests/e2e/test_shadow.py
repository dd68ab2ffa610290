"""A shadow candidate beside the serving policies, through a real sidecar: it never
changes an answer, its disagreements are counted by policy and effect pair (the
admin RPC, `memlineage shadow status`, Prometheus), and it is promoted or dropped
atomically."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import InvalidArgument, MemLineageClient, PermissionDenied
from memlineage.client.errors import FailedPrecondition
from memlineage.config import Config, TokenGrant
from memlineage.metrics import Metrics
from memlineage.v1 import memlineage_pb2 as pb
from prometheus_client import generate_latest
from support.serve_process import NO_WEB_POLICY
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

NO_WEB = NO_WEB_POLICY


@pytest.fixture
def candidate(tmp_path: Path) -> Path:
    out = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, out)
    (out / "zz_no_web.mlp").write_text(NO_WEB)
    return out


TOKENS = (TokenGrant("admin", ("default",), admin=True), TokenGrant("user", ("default",)))


def _reusing() -> RunningSidecar:
    """The bundled set with decision reuse on (the default), on the embedded store."""
    return RunningSidecar(Config(policy_dir=BUNDLED_POLICIES, tokens=TOKENS, store="embedded"))


@contextlib.contextmanager
def _admin_and_user(
    running: RunningSidecar,
) -> Iterator[tuple[RunningSidecar, MemLineageClient, MemLineageClient]]:
    """`running` started, with a client of the admin token and one of the user's."""
    with (
        running as s,
        MemLineageClient(s.address, token="admin", timeout=10) as admin,
        MemLineageClient(s.address, token="user", timeout=10) as user,
    ):
        yield s, admin, user


def _sidecar(candidate: Path | None, store: str = "embedded") -> RunningSidecar:
    return RunningSidecar(
        Config(
            policy_dir=BUNDLED_POLICIES,
            shadow_policy_dir=str(candidate) if candidate else None,
            tokens=TOKENS,
            reuse_decisions=False,
            store=store,
        )
    )


@pytest.fixture(params=["embedded", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_server").emptied())
    return "embedded"


def test_the_candidate_is_compared_never_served_then_promoted(
    candidate: Path, store_url: str
) -> None:
    with _admin_and_user(_sidecar(candidate, store_url)) as (s, admin, user):
        user.record("web", creator="tool:web_fetch")
        user.record("city", creator="user:alice")
        serving = admin.list_policies().version
        for _ in range(3):
            assert user.check("read", "web").effect == pb.EFFECT_DEGRADE  # unchanged
        assert user.check("read", "city").effect == pb.EFFECT_ALLOW
        status = admin.shadow("status")
        assert status.active and status.version != serving and status.serving_version == serving
        assert status.compared >= 5 and status.disagreed == 3
        [diff] = list(status.diffs)
        assert (diff.policy, diff.serving, diff.candidate, diff.count) == (
            "no_web_at_all",
            pb.EFFECT_DEGRADE,
            pb.EFFECT_DENY,
            3,
        )
        assert diff.examples[0] == "read web"
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "memlineage",
                "shadow",
                "status",
                "--target",
                s.address,
                "--token",
                "admin",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
        assert "no_web_at_all: degrade -> deny  3  e.g. read web" in cli.stdout
        with pytest.raises(PermissionDenied):
            user.shadow("status")
        promoted = admin.shadow("promote")
        assert not promoted.active and promoted.serving_version == status.version
        assert user.check("read", "web").effect == pb.EFFECT_DENY  # the candidate serves
        with pytest.raises(FailedPrecondition):
            admin.shadow("promote")  # nothing loaded any more


def _bundled_files(*changes: tuple[str, str]) -> dict[str, str]:
    """The bundled set as ReloadPolicies/Shadow files, each change (old, new) made once
    (a candidate's tests must pass beside it, or it is not loaded)."""
    files = {p.name: p.read_text() for p in sorted(Path(BUNDLED_POLICIES).glob("*.mlp"))}
    for change in changes:
        [name] = [n for n, text in files.items() if change[0] in text]
        files[name] = files[name].replace(*change)
    return files


_WEB_TEST = ("expect read web -> degrade with downrank(0.5)", "expect read web -> degrade")
_WEB_DENIED = ("expect read web -> degrade with downrank(0.5)", "expect read web -> deny")


def test_a_candidate_loaded_after_reused_decisions_compares_every_one() -> None:
    """With reuse on, a Check decided (and reused) before the load is compared on each
    later ask (before: answered by reuse, never compared, `0 disagreed` of traffic the
    candidate flips; an outside audit). After the candidate goes, reuse comes back."""
    with _admin_and_user(_reusing()) as (s, admin, user):
        user.record("web", creator="tool:web_fetch")
        engine = s.sidecar.engine
        for _ in range(5):  # decided once, then reused
            assert user.check("read", "web").effect == pb.EFFECT_DEGRADE
        assert engine.reused == 4
        assert admin.shadow("load", {"x.mlp": NO_WEB}).active
        for _ in range(5):
            assert user.check("read", "web").effect == pb.EFFECT_DEGRADE  # still served
        assert engine.reused == 4
        status = admin.shadow("status")
        assert (status.compared, status.disagreed) == (5, 5)
        # the candidate is this one policy alone: the bundled one that fired is gone
        counts = {d.policy: d.count for d in status.diffs}
        assert counts == {"no_web_at_all": 5, "unvetted_tool_output": 5}
        admin.shadow("drop")
        user.check("read", "web")
        user.check("read", "web")
        assert engine.reused > 4  # reuse again


def test_a_candidate_that_drops_an_obligation_disagrees_naming_its_policy() -> None:
    """Same effect, other obligations: a disagreement under the policy whose obligations
    changed (before: effects only were compared, and a policy firing on both sides was
    reported as `<resolution>`)."""
    weaker = _bundled_files(
        (
            'degrade annotate("from a tool that is not on the trusted list"), downrank(0.5)',
            'degrade annotate("from a tool that is not on the trusted list")',
        ),
        _WEB_TEST,
    )
    deny_instead = _bundled_files(
        (
            'degrade annotate("from a tool that is not on the trusted list"), downrank(0.5)',
            'deny "from a tool that is not on the trusted list"',
        ),
        _WEB_DENIED,
    )
    # its own test left as it was: the candidate contradicts it, and is not loaded
    untested = _bundled_files(
        (
            'degrade annotate("from a tool that is not on the trusted list"), downrank(0.5)',
            'degrade annotate("from a tool that is not on the trusted list")',
        )
    )
    with _admin_and_user(_sidecar(None)) as (_, admin, user):
        user.record("tip", creator="tool:some_tool")
        user.record("city", creator="user:alice")
        refused = admin.shadow("load", untested)
        assert not refused.active
        assert [d.code for d in refused.diagnostics if d.severity == "error"] == ["E503"]
        assert admin.shadow("load", weaker).active
        answer = user.check("read", "tip")
        assert answer.effect == pb.EFFECT_DEGRADE
        assert {o.kind for o in answer.obligations} >= {"annotate", "downrank"}
        user.check("read", "city")
        status = admin.shadow("status")
        assert (status.compared, status.disagreed) == (2, 1)
        [diff] = list(status.diffs)
        assert (diff.policy, diff.serving, diff.candidate) == (
            "unvetted_tool_output",
            pb.EFFECT_DEGRADE,
            pb.EFFECT_DEGRADE,
        )
        assert "downrank" in diff.serving_obligations
        assert "downrank" not in diff.candidate_obligations
        assert admin.shadow("load", deny_instead).active  # fires on both sides, other effect
        user.check("read", "tip")
        [diff] = list(admin.shadow("status").diffs)
        assert (diff.policy, diff.serving, diff.candidate) == (
            "unvetted_tool_output",
            pb.EFFECT_DEGRADE,
            pb.EFFECT_DENY,
        )


def test_load_drop_and_a_candidate_that_does_not_compile() -> None:
    with _sidecar(None) as s, MemLineageClient(s.address, token="admin", timeout=10) as admin:
        assert not admin.shadow("status").active
        with pytest.raises(InvalidArgument):
            admin.shadow("load")  # no files and no shadow_policy_dir
        bad = admin.shadow("load", {"x.mlp": "policy p { on read when memory.nope deny }"})
        assert not bad.active and bad.diagnostics[0].code == "E102"
        good = admin.shadow("load", {"x.mlp": NO_WEB})
        assert good.active
        dropped = admin.shadow("drop")
        assert not dropped.active and dropped.serving_version == good.serving_version


def test_disagreements_are_exported_to_prometheus() -> None:
    metrics = Metrics()
    metrics.watch_shadow(lambda: (7, [("no_web_at_all", "degrade", "deny", 3)]))
    text = generate_latest(metrics.registry).decode()
    assert "memlineage_shadow_compared_total 7.0" in text
    assert (
        'memlineage_shadow_disagreements_total{candidate="deny",policy="no_web_at_all",'
        'serving="degrade"} 3.0'
    ) in text


WEAK_BELOW = """policy weak_below priority 90 {
  on read
  when any(d in descendants(memory) : d.confidence < 0.5)
  deny "something built on it is weak"
}
"""


def test_a_candidate_that_walks_descendants_sees_them_though_the_serving_set_does_not() -> None:
    """No bundled policy walks descendants, so a decision of the serving set loads none;
    a candidate that does makes them loaded too (the walk of both sets), and it
    disagrees on the memory with a weak descendant only. After the candidate goes, the
    walk is the serving set's again, and a new candidate is walked for anew."""
    with _admin_and_user(_reusing()) as (_, admin, user):
        user.record("base", creator="user:alice")
        user.record("solid", creator="user:alice")
        user.record("guess", creator="agent:planner", confidence=0.3, dependencies=["base"])
        for mid in ("base", "solid"):  # walked for the serving set alone first
            assert user.check("read", mid).effect == pb.EFFECT_ALLOW
        files = _bundled_files()
        files["zz_weak_below.mlp"] = WEAK_BELOW
        for _ in range(2):  # loaded, dropped, loaded again
            assert admin.shadow("load", files).active
            for mid in ("base", "solid"):
                assert user.check("read", mid).effect == pb.EFFECT_ALLOW  # still served
            status = admin.shadow("status")
            assert (status.compared, status.disagreed) == (2, 1)
            assert {d.policy for d in status.diffs} == {"weak_below"}
            admin.shadow("drop")
