"""A decision-log line names who sent the request (`requested_by`, OPA's field), not only
the actor the request claims: with tokens, the token's name, so an audit can tell which
caller claimed to act as `user:alice`; a decision reused for a second caller names the
second; without tokens, `local`. The chain covers the field (`log verify`, and an
edited `requested_by` breaks it)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from memlineage import cli
from memlineage.client import MemLineageClient
from memlineage.config import Config, TokenGrant
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

APP = TokenGrant("tok-app-0001", ("shop",), name="shop-app")
OPS = TokenGrant("tok-ops-0002", ("shop",), name="ops-console")


def lines(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_each_line_names_the_token_that_asked(tmp_path: Path) -> None:
    log = tmp_path / "decisions.log"
    config = replace(Config(policy_dir=BUNDLED_POLICIES, decision_log=str(log)), tokens=(APP, OPS))
    with RunningSidecar(config) as s:
        with MemLineageClient(s.address, token=APP.token, timeout=10) as app:
            app.record("city", creator="user:alice")
            app.check("read", "city")
        with MemLineageClient(s.address, token=OPS.token, timeout=10) as ops:
            # ops claims to act as the user: the actor says so, requested_by does not
            ops.check("update", "city", actor="user:alice")
            ops.check("read", "city")  # the same request as app's: reused, ops's line
    written = lines(log)
    assert [(e["op"], e["actor"], e["requested_by"]) for e in written] == [
        ("write", "user:alice", "shop-app"),
        ("read", "user:shop", "shop-app"),
        ("update", "user:alice", "ops-console"),
        ("read", "user:shop", "ops-console"),
    ]
    assert cli.main(["log", "verify", str(log)]) == 0


def test_without_tokens_the_caller_is_local_and_the_chain_covers_it(tmp_path: Path) -> None:
    log = tmp_path / "decisions.log"
    with (
        RunningSidecar(Config(policy_dir=BUNDLED_POLICIES, decision_log=str(log))) as s,
        MemLineageClient(s.address, timeout=10) as c,
    ):
        c.record("city", creator="user:alice")
        c.check("read", "city")
    assert {e["requested_by"] for e in lines(log)} == {"local"}
    assert cli.main(["log", "verify", str(log)]) == 0
    text = log.read_text(encoding="utf-8")
    log.write_text(text.replace('"requested_by":"local"', '"requested_by":"other"', 1))
    assert cli.main(["log", "verify", str(log)]) == 1
