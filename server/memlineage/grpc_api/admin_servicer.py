"""The PolicyAdmin service: the serving policy set (list, reload, lint), its shadow
candidate and the sweep, for admin callers only. Same handler wrapping as the
MemLineage service (`servicer.rpc`): bytes in, domain errors out as statuses."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from memlineage_dsl.diagnostics import Diagnostic, has_errors
from memlineage_dsl.pipeline import lint_texts

from memlineage.grpc_api import serde
from memlineage.grpc_api.auth import Principal
from memlineage.grpc_api.serde import diagnostics_to_pb
from memlineage.grpc_api.servicer import Ctx, ServiceBase, loggable, rpc
from memlineage.lineage.errors import ValidationError
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

log = logging.getLogger("memlineage.grpc")


def _name_problem(name: str) -> str | None:
    """What is wrong with a policy file's name, as `shadow load DIR` names them
    (`a.mlp`, `sub/b.mlp`: relative to the set, `/` between directories). A name that
    is no `.mlp` file, leaves the set (`..`) or spells a file two ways (`./a.mlp` is
    `a.mlp` to the loader) names no file of a policy directory, yet was built, versioned
    and quoted in diagnostics."""
    if not name:
        return "an empty file name: name each file as its path in the set, e.g. main.mlp"
    if not name.isprintable():
        return "a file name with a control or format character (not printable)"
    if "\\" in name:
        return "a backslash in a file name: separate directories with /"
    if name.startswith("/"):
        return "an absolute path: name the file relative to the policy set, e.g. sub/a.mlp"
    parts = name.split("/")
    if ".." in parts:
        return "a .. in a file name: every file lies inside the policy set"
    if "" in parts or "." in parts:
        return "an empty or . part in a file name: name each file one way, e.g. sub/a.mlp"
    if not name.endswith(".mlp") or parts[-1] == ".mlp":
        return "not a policy file name: a policy file's name ends in .mlp"
    return None


MAX_POLICY_TEXT = 1 << 20
"""Characters of policy text one request may send (LintPolicy, ReloadPolicies, a
shadow load): the bundled set is ~30,000. Parsing and checking take tens of µs per
character on a busy core, so the 4 MB a gRPC message may hold would keep a worker
(and the GIL the decisions need) for a minute or more (an outside audit)."""


def policy_files(files: Mapping[str, str]) -> dict[str, str]:
    """A request's `files` map, every name checked before anything is built: one bad
    name refuses the request (INVALID_ARGUMENT on `files["NAME"]`), nothing loaded. The
    names in order, so the one named does not depend on the map's order on the wire.
    More than `MAX_POLICY_TEXT` characters in all is refused too, before any parse."""
    for name in sorted(files):
        problem = _name_problem(name)
        if problem is not None:
            shown = json.dumps(name if len(name) <= 200 else name[:200] + "...")
            raise ValidationError(problem, field=f"files[{shown}]", code="INVALID_FILE_NAME")
    total = sum(len(text) for text in files.values())
    if total > MAX_POLICY_TEXT:
        raise ValidationError(
            f"{total:,} characters of policy text: at most {MAX_POLICY_TEXT:,} per request "
            "(a policy set of that size is loaded from its directory by the sidecar)",
            field="files",
            code="POLICY_TEXT_TOO_LARGE",
        )
    return dict(files)


class PolicyAdminService(ServiceBase, pb_grpc.PolicyAdminServicer):
    sweep_batch = 1000

    @rpc(pb.ListPoliciesRequest, admin=True)
    def ListPolicies(
        self, request: pb.ListPoliciesRequest, context: Ctx, principal: Principal
    ) -> pb.ListPoliciesResponse:
        return serde.policies_to_pb(self.engine.policies.current)

    @rpc(pb.ReloadPoliciesRequest, admin=True)
    def ReloadPolicies(
        self, request: pb.ReloadPoliciesRequest, context: Ctx, principal: Principal
    ) -> pb.ReloadPoliciesResponse:
        outcome = self.engine.policies.reload(policy_files(request.files) or None)
        if outcome.applied:
            log.info("policies reloaded: version %s", outcome.version)
        else:
            # The paths and texts are the caller's: quoted and cut short, so a name
            # with a newline cannot forge a log line, nor a long one flood the log.
            log.warning(
                "policy reload rejected: %s",
                "; ".join(loggable(f"{d.location}: {d.message}") for d in outcome.diagnostics[:5]),
            )
        out = pb.ReloadPoliciesResponse(applied=outcome.applied, version=outcome.version)
        diagnostics_to_pb(outcome.diagnostics, out.diagnostics)
        return out

    @rpc(pb.ShadowRequest, admin=True)
    def Shadow(
        self, request: pb.ShadowRequest, context: Ctx, principal: Principal
    ) -> pb.ShadowResponse:
        diagnostics: list[Diagnostic] = []
        if request.files and request.action != pb.SHADOW_ACTION_LOAD:
            # a status, promote or drop sent with files was answered as if it had none
            raise ValidationError("only load takes files", field="files")
        if request.action == pb.SHADOW_ACTION_LOAD:
            status, diagnostics = self.engine.shadow_load(policy_files(request.files) or None)
            log.info("shadow candidate: %s", status.version or "not loaded (errors)")
        elif request.action == pb.SHADOW_ACTION_PROMOTE:
            status = self.engine.shadow_promote()
            log.info("shadow candidate promoted: %s", self.engine.policies.current.version)
        elif request.action == pb.SHADOW_ACTION_DROP:
            status = self.engine.shadow_drop()
        elif request.action == pb.SHADOW_ACTION_UNSPECIFIED:
            status = self.engine.shadow.status()
        else:
            raise ValidationError(f"unknown action {request.action}", field="action")
        out = serde.shadow_to_pb(status, self.engine.policies.current.version)
        diagnostics_to_pb(diagnostics, out.diagnostics)
        return out

    @rpc(pb.RunSweepRequest, admin=True)
    def RunSweep(
        self, request: pb.RunSweepRequest, context: Ctx, principal: Principal
    ) -> pb.RunSweepResponse:
        report = self.engine.sweep(
            request.namespace or None,
            batch=request.batch or self.sweep_batch,
            time=serde.from_ts(request, "time"),
        )
        return serde.sweep_to_pb(report)

    @rpc(pb.LintPolicyRequest, admin=True)
    def LintPolicy(
        self, request: pb.LintPolicyRequest, context: Ctx, principal: Principal
    ) -> pb.LintPolicyResponse:
        if not request.files:
            raise ValidationError("names no file", field="files")
        diags = lint_texts(policy_files(request.files))
        out = pb.LintPolicyResponse(ok=not has_errors(diags))
        diagnostics_to_pb(diags, out.diagnostics)
        return out


__all__ = ["PolicyAdminService", "policy_files"]
