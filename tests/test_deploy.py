"""deploy/ and the policy CI example, checked offline by the real validators (the dev
extra installs them): the Kubernetes manifest with `kubernetes-validate --strict`
(its bundled schemas), the compose file and the workflow with check-jsonschema's
vendored compose-spec and github-workflows schemas, the Dockerfile with hadolint.
A missing validator fails (never skips): these files have no other test before a
deployment. Then what no schema knows: the settings the files name exist, the
image's user is numeric and matches the pod's, the probes ask real services."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from memlineage import cli
from memlineage.config import CONFIG_ENV, SETTINGS, load_config

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
WORKFLOW = REPO / "docs" / "examples" / "github-policy-ci.yml"
SETTING_ENVS = {s.env for s in SETTINGS} | {CONFIG_ENV}


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).parent / name
    assert tool.exists(), f"{name} is missing: install the dev extra (pip install -e '.[dev]')"
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_kubernetes_manifests_validate_strictly() -> None:
    assert MANIFESTS
    out = run_tool("kubernetes-validate", "--strict", *map(str, MANIFESTS))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed for resource deployment/" in out.stdout + out.stderr


def test_compose_file_validates_against_the_compose_spec() -> None:
    out = run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    "schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"]
)
def test_policy_ci_workflow_validates_against_the_github_workflow_schema(schema: str) -> None:
    """The workflow schema, and check-jsonschema's own rule that every job has a timeout."""
    out = run_tool("check-jsonschema", "--builtin-schema", schema, str(WORKFLOW))
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_passes_hadolint() -> None:
    out = run_tool("hadolint", "--no-color", str(DOCKERFILE))
    assert out.returncode == 0, out.stdout + out.stderr


def test_validators_reject_a_broken_file(tmp_path: Path) -> None:
    """The checks above can fail: each validator refuses a file with one mistake."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFESTS[0].read_text().replace("containerPort:", "containerPorts:"))
    assert run_tool("kubernetes-validate", "--strict", str(bad)).returncode != 0
    bad.write_text(COMPOSE.read_text().replace("image:", "imag:"))
    assert (
        run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(bad)).returncode
        != 0
    )
    bad.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:"))
    assert (
        run_tool(
            "check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(bad)
        ).returncode
        != 0
    )
    docker = tmp_path / "Dockerfile"
    docker.write_text(re.sub(r"(?m)^USER .*$", "USER memlineage", DOCKERFILE.read_text()))
    assert run_tool("hadolint", "--no-color", str(docker)).returncode != 0


# ----------------------------------------------------------------- beyond the schemas


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def manifests() -> list[dict[str, Any]]:
    return [d for m in MANIFESTS for d in yaml.safe_load_all(m.read_text()) if d]


def sidecar_container() -> dict[str, Any]:
    deployment = next(d for d in manifests() if d["kind"] == "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "memlineage")


def test_image_runs_as_a_numeric_user_the_pod_requires() -> None:
    users = [rest for op, rest in dockerfile_instructions() if op == "USER"]
    assert len(users) == 1 and re.fullmatch(r"\d+(:\d+)?", users[0]), users
    uid, _, gid = users[0].partition(":")
    security = sidecar_container()["securityContext"]
    assert security["runAsNonRoot"] is True
    assert str(security["runAsUser"]) == uid and str(security.get("runAsGroup", gid)) == gid


def test_deploy_files_name_only_real_settings() -> None:
    envs = [
        tok.split("=", 1)[0]
        for op, rest in dockerfile_instructions()
        if op == "ENV"
        for tok in shlex.split(rest)
    ]
    compose = yaml.safe_load(COMPOSE.read_text())
    envs += list(compose["services"]["memlineage"]["environment"])
    envs += [e["name"] for e in sidecar_container().get("env", [])]
    assert envs and set(envs) <= SETTING_ENVS, sorted(set(envs) - SETTING_ENVS)


def test_configmap_configuration_loads(tmp_path: Path) -> None:
    configmap = next(d for d in manifests() if d["kind"] == "ConfigMap")
    for name, text in configmap["data"].items():
        path = tmp_path / name
        path.write_text(text)
        cfg = load_config(str(path), env={})
        host = cfg.listen.rpartition(":")[0]
        # the kubelet's probes connect to the pod's IP, so loopback would never be ready
        assert host not in ("127.0.0.1", "localhost"), cfg.listen


def test_probes_ask_services_the_sidecar_reports() -> None:
    from memlineage.grpc_api.server import SERVICE_NAMES

    c = sidecar_container()
    assert c["readinessProbe"]["grpc"].get("service", "") == ""  # store-dependent
    # liveness must not follow the store: PolicyAdmin keeps serving through an outage
    # (tests/e2e/test_store_outage.py), so a Redis outage does not restart pods
    assert c["livenessProbe"]["grpc"]["service"] == SERVICE_NAMES[1]
    assert SERVICE_NAMES[1] == "memlineage.v1.PolicyAdmin"


def workflow_commands() -> list[list[str]]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    commands = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                if line.startswith("memlineage "):
                    argv = shlex.split(line.split(">", 1)[0].replace("$POLICY_DIR", "policies"))
                    commands.append(argv[1:])
    return commands


def test_policy_ci_workflow_runs_real_commands_on_the_bundled_policies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its lint (SARIF and human), fmt --check and test, on this repository's policies/."""
    commands = workflow_commands()
    assert [c[0] for c in commands] == ["lint", "lint", "fmt", "test"]
    monkeypatch.chdir(REPO)
    for argv in commands:
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(argv) == 0, (argv, out.getvalue())
        if "sarif" in argv:
            sarif = json.loads(out.getvalue())
            assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"]


def test_example_configuration_scoring_block_loads_when_uncommented(tmp_path: Path) -> None:
    text = (DEPLOY / "memlineage.toml").read_text()
    head, _, block = text.partition("# [scoring]\n")
    assert block, "deploy/memlineage.toml has no commented [scoring] example"
    lines = [
        "[scoring]",
        *(line.removeprefix("#").removeprefix(" ") for line in block.splitlines()),
    ]
    path = tmp_path / "m.toml"
    path.write_text(head + "\n".join(lines) + "\n")
    scoring = load_config(str(path), env={}).scoring
    assert scoring.archive_below == 0.3 and scoring.half_lives["high"] == 600.0
