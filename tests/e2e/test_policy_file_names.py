"""The PolicyAdmin RPCs that take a policy set as `files` (name -> text), through a
real sidecar: ReloadPolicies, LintPolicy and Shadow load refuse a name that is no
`.mlp` file of a policy directory (empty, another suffix, absolute, `..`, spelt two
ways, a backslash or a control character) as INVALID_ARGUMENT on `files["NAME"]`,
with nothing loaded; Shadow status, promote and drop refuse a files map (only load
takes files). Before: every such name was built and served, and a files map on a
promote was ignored."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from memlineage.client import InvalidArgument, MemLineageClient
from memlineage.config import Config
from memlineage.grpc_api.admin_servicer import MAX_POLICY_TEXT
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc
from support.serve_process import NO_WEB_POLICY
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

GOOD = {p.name: p.read_text() for p in sorted(Path(BUNDLED_POLICIES).glob("*.mlp"))}

BAD_NAMES = {
    "": "an empty file name",
    "a.txt": "not a policy file name",
    "a.mlp.bak": "not a policy file name",
    ".mlp": "not a policy file name",
    "sub/": "an empty or . part",
    "./a.mlp": "an empty or . part",
    "a//b.mlp": "an empty or . part",
    "../a.mlp": "a .. in a file name",
    "sub/../../a.mlp": "a .. in a file name",
    "/etc/a.mlp": "an absolute path",
    "sub\\a.mlp": "a backslash",
    "a\nb.mlp": "a file name with a control or format character",
    "a\u202eplm.mlp": "a file name with a control or format character",
}


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    with RunningSidecar(Config(policy_dir=BUNDLED_POLICIES, reuse_decisions=False)) as s:
        with MemLineageClient(s.address, timeout=10) as client:
            client.record("web", creator="tool:web_fetch")
        yield s


@pytest.fixture
def admin(sidecar: RunningSidecar) -> Iterator[MemLineageClient]:
    with MemLineageClient(sidecar.address, timeout=10) as client:
        yield client
        client.shadow("drop")
        assert client.reload_policies().applied  # back to the bundled directory


def _rpcs(admin: MemLineageClient) -> dict[str, Callable[[dict[str, str]], object]]:
    return {
        "ReloadPolicies": admin.reload_policies,
        "LintPolicy": admin.lint_policy,
        "Shadow load": lambda files: admin.shadow("load", files),
    }


@pytest.mark.parametrize("name", list(BAD_NAMES))
def test_every_rpc_refuses_a_bad_name_naming_field_and_key_with_nothing_loaded(
    admin: MemLineageClient, name: str
) -> None:
    serving = admin.list_policies().version
    field = f"files[{json.dumps(name)}]"
    # a good set beside the one bad name: the request is refused whole
    files = {**GOOD, "zz_no_web.mlp": NO_WEB_POLICY, name: NO_WEB_POLICY}
    for rpc, call in _rpcs(admin).items():
        with pytest.raises(InvalidArgument) as refused:
            call(files)
        err = refused.value
        assert (err.reason, err.field) == ("INVALID_FILE_NAME", field), (rpc, err)
        assert err.details.startswith(f"{field}: {BAD_NAMES[name]}"), (rpc, err.details)
        assert "\n" not in err.details
        assert admin.list_policies().version == serving, rpc
        assert not admin.shadow("status").active, rpc
        decided = admin.check("read", "web")
        assert (decided.effect, decided.policy_version) == (pb.EFFECT_DEGRADE, serving), rpc


def test_the_first_bad_name_in_order_is_named_whatever_the_wire_order(
    sidecar: RunningSidecar,
) -> None:
    """A raw stub, so the status and details are gRPC's own, not the client's reading."""
    with grpc.insecure_channel(sidecar.address) as channel:
        stub = pb_grpc.PolicyAdminStub(channel)
        for files in ({"z.txt": "", "b.txt": ""}, {"b.txt": "", "z.txt": ""}):
            with pytest.raises(grpc.RpcError) as refused:
                stub.LintPolicy(pb.LintPolicyRequest(files=files), timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details().startswith('files["b.txt"]: not a policy file name')


def test_names_with_directories_load_and_the_cli_sends_them(
    admin: MemLineageClient, sidecar: RunningSidecar, tmp_path: Path
) -> None:
    nested = {f"sub/{n}": t for n, t in GOOD.items()}
    assert admin.lint_policy(nested).ok
    assert admin.shadow("load", nested).active
    admin.shadow("drop")
    candidate = tmp_path / "candidate"
    (candidate / "deep" / "er").mkdir(parents=True)
    for n, t in GOOD.items():
        (candidate / "deep" / n).write_text(t)
    (candidate / "deep" / "er" / "zz_no_web.mlp").write_text(NO_WEB_POLICY)
    cli = [sys.executable, "-m", "memlineage", "shadow", "load"]
    target = ["--target", sidecar.address]
    out = subprocess.run(
        [*cli, str(candidate), *target], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert admin.shadow("status").active
    # one file that is no .mlp: the server's words, not a traceback
    (tmp_path / "notes.txt").write_text(NO_WEB_POLICY)
    out = subprocess.run(
        [*cli, str(tmp_path / "notes.txt"), *target], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'files["notes.txt"]: not a policy file name' in out.stderr, out.stderr


@pytest.mark.parametrize("action", ["status", "promote", "drop"])
def test_only_load_takes_files(admin: MemLineageClient, action: str) -> None:
    serving = admin.list_policies().version
    loaded = admin.shadow("load", {**GOOD, "zz_no_web.mlp": NO_WEB_POLICY})
    assert loaded.active and loaded.version != serving
    with pytest.raises(InvalidArgument) as refused:
        admin.shadow(action, {"other.mlp": NO_WEB_POLICY})
    assert refused.value.field == "files"
    assert refused.value.details == "files: only load takes files"
    # nothing done: the candidate still compared, the serving set still serving
    status = admin.shadow("status")
    assert status.active and status.version == loaded.version
    assert admin.list_policies().version == serving


def test_every_rpc_refuses_more_policy_text_than_a_request_may_send(
    admin: MemLineageClient,
) -> None:
    """A set past `MAX_POLICY_TEXT` in all is refused before any parse (before, the
    4 MB a message holds kept a worker parsing for a minute or more): INVALID_ARGUMENT
    on `files`, nothing loaded; one character less is parsed."""
    serving = admin.list_policies().version
    pad = MAX_POLICY_TEXT - len(NO_WEB_POLICY)
    too_much = {"a.mlp": NO_WEB_POLICY, "b.mlp": "#" * (pad + 1)}
    for rpc, call in _rpcs(admin).items():
        with pytest.raises(InvalidArgument) as refused:
            call(too_much)
        err = refused.value
        assert (err.reason, err.field) == ("POLICY_TEXT_TOO_LARGE", "files"), (rpc, err)
        assert f"{MAX_POLICY_TEXT + 1:,} characters of policy text" in err.details, rpc
        assert admin.list_policies().version == serving and not admin.shadow("status").active
    at_most = admin.lint_policy({"a.mlp": NO_WEB_POLICY, "b.mlp": "#" * pad})
    assert at_most.ok, at_most
