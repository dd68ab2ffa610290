"""`memlineage serve` as an operator runs it: a real process, SIGHUP reloads the
policy directory (a broken set is rejected and the old one keeps serving),
SIGTERM shuts down gracefully, the embedded data directory survives a restart;
`memlineage check` and `memlineage explain` talk to it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from memlineage.client import MemLineageClient
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc
from support.serve_process import REASONING_POLICY, run_serve, serve_refusal
from support.serve_process import ServeProcess as Served

POLICY = REASONING_POLICY


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, Path, Path]]:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "main.mlp").write_text(POLICY)
    data = tmp_path / "data"
    s = Served(["--policies", str(policies), "--data-dir", str(data)])
    yield s, policies, data
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env} if env else None,
    )


def test_serve_reload_on_sighup_and_graceful_stop(served) -> None:
    s, policies, data = served
    with MemLineageClient(s.address) as c:
        assert c.health() == "SERVING"
        c.record("guess", creator="reasoning:planner", confidence=0.5)
        assert c.check("read", "guess").effect == pb.EFFECT_DENY
        first = c.list_policies().version

        # A valid change, picked up on SIGHUP.
        (policies / "main.mlp").write_text(POLICY.replace("0.7", "0.4"))
        s.proc.send_signal(signal.SIGHUP)
        s.expect(r"SIGHUP: policies reloaded")
        second = c.list_policies().version
        assert second != first
        assert c.check("read", "guess").effect == pb.EFFECT_ALLOW

        # A broken change is rejected with file:line:col; the old set keeps serving.
        (policies / "main.mlp").write_text(POLICY.replace("when", "whne"))
        s.proc.send_signal(signal.SIGHUP)
        s.expect(r"main\.mlp:3:3: unexpected `whne`")
        assert c.list_policies().version == second
        assert c.check("read", "guess").effect == pb.EFFECT_ALLOW

    assert s.stop() == 0

    # The embedded data directory survives the restart.
    (policies / "main.mlp").write_text(POLICY)
    again = Served(["--policies", str(policies), "--data-dir", str(data)])
    try:
        with MemLineageClient(again.address) as c:
            assert c.explain("guess").memory.creator.id == "reasoning:planner"
            assert c.check("read", "guess").effect == pb.EFFECT_DENY
    finally:
        assert again.stop() == 0


def test_graceful_stop_ends_watch_streams_at_once(served) -> None:
    """SIGTERM with a Watch open: the stream ends with UNAVAILABLE (its client resumes
    from its cursor elsewhere) well before the 5 s grace; the process exits 0."""
    s, _, _ = served
    channel = grpc.insecure_channel(s.address)
    stream = pb_grpc.MemLineageStub(channel).Watch(pb.WatchRequest(from_oldest=True))
    with MemLineageClient(s.address) as c:
        c.record("m", creator="user:alice")
    assert next(stream).memory_id == "m"  # the stream is open and live
    started = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    with pytest.raises(grpc.RpcError) as info:
        next(stream)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "shutting down" in (info.value.details() or "")
    assert s.proc.wait(timeout=20) == 0
    assert time.monotonic() - started < 4.0  # not the whole 5 s grace
    channel.close()


def test_check_and_explain_commands(served) -> None:
    s, _, _ = served
    with MemLineageClient(s.address) as c:
        c.record("city", creator="user:alice")
        c.record("hotel", creator="agent:planner", dependencies=["city"])
        c.record("guess", creator="reasoning:planner", confidence=0.2)
    ok = cli("check", "read", "hotel", "--target", s.address)
    assert ok.returncode == 0 and ok.stdout.startswith("ALLOW  score 1.000")
    denied = cli("check", "read", "guess", "--target", s.address)
    assert denied.returncode == 3
    assert "fired      low_confidence_reasoning: doubtful reasoning" in denied.stdout
    # one spelling across commands: --format json (and --json, its shorthand)
    as_json = cli("check", "read", "guess", "--format", "json", "--target", s.address)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["effect"] == "EFFECT_DENY"
    short = cli("check", "read", "guess", "--json", "--target", s.address)
    assert json.loads(short.stdout).keys() == json.loads(as_json.stdout).keys()
    text = cli("check", "read", "hotel", "--format", "text", "--target", s.address)
    assert text.stdout.startswith("ALLOW  score 1.000")
    dot = cli("explain", "city", "--format", "dot", "--target", s.address)
    assert dot.returncode == 0 and dot.stdout.startswith("digraph")
    assert re.search(r'"city"\s*->\s*"hotel"', dot.stdout), dot.stdout
    mermaid = cli("explain", "hotel", "--format", "mermaid", "--target", s.address)
    assert mermaid.returncode == 0 and mermaid.stdout.startswith("flowchart")
    missing = cli("explain", "nope", "--target", s.address)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
    # before: city alone; a command line the client refuses is 2 (docs/operating.md)
    two = cli("check", "read", "city", "guess", "--target", s.address)
    assert (two.returncode, two.stdout) == (2, ""), two
    assert two.stderr == "error: memory_id: read takes one id, got 2\n", two.stderr
    # a depth past the sidecar's limit names the flag (before: the request's field)
    deep = cli("explain", "city", "--depth", "100", "--target", s.address)
    assert (deep.returncode, deep.stderr) == (
        2,
        "error: --depth 100: must be an integer in [0, 64] (0: the default), got 100\n",
    )
    # the target from the environment, as the token (before: only --target)
    env = cli("check", "read", "hotel", env={"MEMLINEAGE_TARGET": s.address})
    assert env.returncode == 0 and env.stdout.startswith("ALLOW"), env


def test_serve_refuses_a_broken_policy_directory(tmp_path: Path) -> None:
    (tmp_path / "bad.mlp").write_text("policy p { on read when memory.confidnce < 1 deny }\n")
    out = run_serve(["--policies", str(tmp_path)])
    assert out.returncode == 1
    assert "bad.mlp:1:32: error[E102]" in out.stderr


_DEEP = "policy p { on read when " + "not (" * 600 + "true" + ")" * 600 + " deny }\n"
_WIDE_PRIORITY = 'policy p priority 2147483648 { on read when memory.id == "b" deny "x" }\n'


@pytest.mark.parametrize(
    ("text", "where"), [(_DEEP, "bad.mlp:1:"), (_WIDE_PRIORITY, "bad.mlp:1:19:")]
)
def test_serve_refuses_a_hostile_policy_with_its_position(
    tmp_path: Path, text: str, where: str
) -> None:
    """600 nested terms, a priority past int32: one positioned line, no traceback."""
    (tmp_path / "bad.mlp").write_text(text)
    out = run_serve(["--policies", str(tmp_path)])
    assert out.returncode == 1
    assert where in out.stderr and "error[E" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_sweep_command_over_grpc_and_directly_on_a_store(served, tmp_path: Path) -> None:
    s, _, _ = served
    with MemLineageClient(s.address) as c:
        c.record("note", creator="agent:planner")
    out = cli("sweep", "--target", s.address)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("0 moved, 0 refused")  # nothing due yet

    direct = tmp_path / "direct"
    with open_store(f"embedded://{direct}", clock=lambda: time.time() - 40 * 86400) as store:
        store.record(
            MemoryRecord(
                id="stale", namespace="default", creator_kind="agent", creator_id="agent:planner"
            )
        )
    out = cli("sweep", "--store", f"embedded://{direct}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("stale: active -> archived (value 0.198 below 0.3)")
    assert out.stdout.strip().endswith("examined 1, 1 moved, 0 refused")


def test_a_second_server_on_a_held_data_directory_refuses_to_start(served) -> None:
    """One line naming the holder, exit 1, no traceback (before: it started SERVING on
    a stale copy of the data and failed every write)."""
    s, policies, data = served
    line = serve_refusal(
        ["--policies", str(policies), "--data-dir", str(data), "--listen", "127.0.0.1:0"]
    )
    assert f"in use by another store (pid {s.proc.pid})" in line, line
    s.proc.send_signal(signal.SIGKILL)  # the holder dies: the kernel drops its lock
    s.proc.wait(timeout=30)
    again = Served(["--policies", str(policies), "--data-dir", str(data)])
    try:
        with MemLineageClient(again.address) as c:
            assert c.health() == "SERVING"
    finally:
        again.kill()


def test_fsync_is_a_setting_serve_applies_and_its_banner_reports(tmp_path: Path) -> None:
    """`--fsync` reaches the store (before: only `EmbeddedStore(fsync=True)` in Python
    could ask for it; README promised it to operators): the banner says what an
    acknowledged write survives, read from the running database; a store with no
    commit to sync refuses the setting instead of ignoring it."""
    policies = Path(__file__).resolve().parents[2] / "policies"
    for flags, survives in (
        (["--fsync"], "a killed process and a power loss (fsync at every commit)"),
        ([], "a killed process, not a power loss"),
    ):
        s = Served(["--policies", str(policies), "--data-dir", str(tmp_path / "d"), *flags])
        s.kill()
        assert f"writes survive {survives}" in s.banner, s.banner
    out = run_serve(["--policies", str(policies), "--fsync"])
    assert out.returncode == 2 and out.stderr.startswith(
        "error: configuration: fsync applies to the embedded store with a data directory"
    ), out


def test_a_call_without_a_token_says_how_to_give_one() -> None:
    policies = Path(__file__).resolve().parents[2] / "policies"
    s = Served(["--policies", str(policies), "--tokens", "tok=default"])
    try:
        out = cli("check", "read", "m", "--target", s.address)
        assert out.returncode == 1 and out.stderr.startswith("error: UNAUTHENTICATED"), out
        assert out.stderr.endswith("(pass --token, or set MEMLINEAGE_TOKEN)\n"), out.stderr
        ok = cli("check", "read", "m", "--target", s.address, env={"MEMLINEAGE_TOKEN": "tok"})
        assert ok.returncode == 0, ok
    finally:
        s.kill()


@pytest.mark.any_runtime
def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    """A store that is not there, a store URL no backend takes, a closed pipe: a line on
    stderr and an exit code, never a traceback (before: each a Python traceback, and a
    sweep of a mistyped data directory created an empty store and reported success)."""
    missing = tmp_path / "nowhere"
    out = cli("sweep", "--store", f"embedded://{missing}")
    assert (out.returncode, out.stderr) == (
        2,
        f"error: --store: no embedded store in {missing} (lineage.sqlite3)\n",
    )
    assert not missing.exists()
    out = cli("sweep", "--store", "bogus://x")
    assert out.returncode == 2 and out.stderr.startswith("error: --store: unknown store")
    out = cli("sweep", "--store", "redis://127.0.0.1:1/0")
    assert out.returncode == 1 and out.stderr.startswith("error: redis unavailable"), out.stderr
    script = Path(__file__).resolve().parents[2] / "docs" / "examples" / "travel_week.jsonl"
    piped = subprocess.run(
        f"{sys.executable} -m memlineage simulate {script} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and piped.stdout.count("\n") == 1
    assert "Traceback" not in piped.stderr, piped.stderr
    # tokens that cannot serve: one line before anything starts (before: a traceback
    # once the store and engine were built)
    out = cli("serve", "--tokens", "tok=", "--listen", "127.0.0.1:0")
    assert (out.returncode, out.stderr) == (
        2,
        "error: configuration: --tokens: tokens.flag0: needs at least one namespace, or admin\n",
    )
    # a --timeout that is no wait: argparse's line for every remote command (before:
    # a traceback from the client for explain, shadow and sweep; nan was taken)
    for command in (["explain", "m"], ["shadow", "status"], ["sweep"], ["check", "read", "m"]):
        for bad in ("0", "-1", "nan", "inf"):
            out = cli(*command, "--timeout", bad, "--target", "127.0.0.1:1")
            assert out.returncode == 2, (command, bad, out.stderr)
            assert out.stderr.strip().endswith(
                f"argument --timeout: {bad!r}: must be a finite number of seconds > 0"
            ), out.stderr
    # a depth or batch past the requests' int32: argparse's line (before: a protobuf
    # "Value out of range" traceback)
    for command, option in ((["explain", "m"], "--depth"), (["sweep"], "--batch")):
        for bad, said in (("9" * 21, ": must be 0 to 2,147,483,647"), ("x", " is not an integer")):
            out = cli(*command, option, bad, "--target", "127.0.0.1:1")
            assert out.returncode == 2, (command, bad, out.stderr)
            assert out.stderr.strip().endswith(f"argument {option}: {bad!r}{said}"), out.stderr
    # a mistyped flag: the subcommand's own usage and the flag it meant (before: the top
    # usage, `memlineage [-h] [--version] COMMAND ...`, and no hint)
    out = cli("serve", "--listn", "127.0.0.1:0")
    assert out.returncode == 2 and out.stderr.startswith("usage: memlineage serve "), out.stderr
    assert out.stderr.endswith(
        "memlineage serve: error: unrecognized arguments: --listn 127.0.0.1:0 "
        "(did you mean --listen?)\n"
    ), out.stderr
    out = cli("store", "check", "d", "--bogus")
    assert (
        out.stderr.splitlines()[-1]
        == "memlineage store check: error: unrecognized arguments: --bogus"
    )


def test_a_decision_log_that_cannot_be_opened_is_named_with_its_setting(tmp_path: Path) -> None:
    """Before: "error: [Errno 21] Is a directory: ...", or for a device file "[Errno 22]
    Invalid argument", naming neither the setting nor, then, the file."""
    (tmp_path / "a-file").write_text("")
    for target, why in (
        (str(tmp_path / "no" / "such" / "dir" / "d.log"), "No such file or directory"),
        (str(tmp_path / "a-file" / "d.log"), "Not a directory"),
        (str(tmp_path), "Is a directory"),
    ):
        line = serve_refusal(["--decision-log", target])
        assert line == f"error: decision_log {target}: cannot be opened to append to ({why})"


def test_metrics_listen_where_metrics_host_says(tmp_path: Path) -> None:
    """metrics_host moves the endpoint off 127.0.0.1 (before: loopback only, whatever a
    container or pod needed); a metrics port in use is one line naming the settings."""
    import socket
    import urllib.request

    from support.redis_servers import free_port

    port = free_port()
    s = Served(["--metrics-port", str(port), "--metrics-host", "127.0.0.2"])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=5) as r:
                    assert b"memlineage_" in r.read()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        s.kill()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        line = serve_refusal(["--metrics-port", str(taken.getsockname()[1])])
        assert line.startswith(
            f"error: cannot serve metrics on 127.0.0.1:{taken.getsockname()[1]} "
            "(metrics_host, metrics_port): "
        ), line
    finally:
        taken.close()


def test_metrics_port_zero_takes_a_free_port_and_the_ready_line_names_it() -> None:
    """`--metrics-port 0`: the endpoint listens on a port the system chose, and the
    ready line says which (before: it listened where no one could tell; benches and
    tests picked a port by binding and releasing one, which another process could
    take meanwhile)."""
    import urllib.request

    s = Served(["--metrics-port", "0"])
    try:
        found = re.search(r", metrics on 127\.0\.0\.1:(\d+)\)$", s.banner.rstrip())
        assert found is not None, s.banner
        port = int(found.group(1))
        assert port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert b"memlineage_" in r.read()
    finally:
        s.kill()
    plain = Served([])  # no endpoint: the ready line says none
    try:
        assert "metrics on" not in plain.banner, plain.banner
    finally:
        plain.kill()


def test_an_ipv6_loopback_caller_is_admin_without_tokens() -> None:
    """With no tokens, admin RPCs are for loopback callers: `[::1]` too (grpcio names
    that peer `ipv6:%5B::1%5D:PORT`, which the check did not know: refused before)."""
    from memlineage.client import MemLineageClient
    from support.serve_process import ServeProcess
    from support.sidecar import BUNDLED_POLICIES

    served = ServeProcess(["--listen", "[::1]:0", "--policies", BUNDLED_POLICIES])
    try:
        port = served.address.rsplit(":", 1)[1]
        with MemLineageClient(f"[::1]:{port}", timeout=10) as c:
            assert c.reload_policies().applied  # an admin RPC, answered
    finally:
        served.stop()


def test_a_sidecar_whose_store_is_down_is_named_as_answering(tmp_path: Path) -> None:
    """The sidecar answers UNAVAILABLE with its store's problem: the CLI says so (before:
    "no answer from ...: is a sidecar serving there?", hiding the Redis it cannot reach)."""
    from support.redis_servers import start_redis_server
    from support.serve_process import ServeProcess
    from support.sidecar import BUNDLED_POLICIES

    server = start_redis_server(tmp_path, aof=False)
    served = ServeProcess(["--store", server.url, "--policies", BUNDLED_POLICIES])
    try:
        server.stop(hard=True)  # the store is gone, the sidecar still serves
        out = cli("check", "read", "m", "--target", served.address, "--timeout", "5")
        assert out.returncode == 1, out
        assert out.stderr.startswith(
            f"error: the sidecar at {served.address} answered UNAVAILABLE: redis unavailable"
        ), out.stderr
    finally:
        served.stop()


@pytest.mark.parametrize("runtime", ["sync", "aio"])
def test_a_port_in_use_is_one_line_saying_so(runtime: str) -> None:
    """Before: gRPC's C-core log line ("E1206 ... add_port.cc:83] Failed to add port
    ...") on stderr, then "Failed to bind ...; set GRPC_VERBOSITY=debug ...", which
    says neither that the port is taken nor which setting moves it."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        line = serve_refusal(["--listen", f"127.0.0.1:{port}", "--grpc-runtime", runtime])
    finally:
        taken.close()
    assert line == (
        f"error: cannot listen on 127.0.0.1:{port}: the port is in use (another process "
        "listens there: stop it, or choose another port with the setting listen)"
    ), line
