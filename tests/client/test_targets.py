"""A sidecar address gRPC cannot resolve is refused when it is given (the client's
constructor, the CLI's ``--target``), not after a call's whole deadline."""

from __future__ import annotations

import subprocess
import sys

import pytest
from memlineage.client import AsyncMemLineageClient, MemLineageClient
from memlineage.client.targets import check_target

GOOD = (
    "127.0.0.1:50051",
    "localhost",  # gRPC's default port
    "sidecar.memlineage.svc.cluster.local:443",
    "[::1]:50051",
    "[::1]",
    "::1",  # gRPC reads it as a bare IPv6 address
    "unix:/tmp/memlineage.sock",
    "unix:///tmp/memlineage.sock",
    "unix-abstract:memlineage",
    "dns:///localhost:50051",
    "ipv4:127.0.0.1:50051,127.0.0.2:50051",
    "custom-resolver://anything/at/all",
)

BAD = {
    "garbage::": "more than one ':'",
    ":50051": "no host before ':'",
    "host:": "port '' is not a number 1-65535",
    "host:0": "port '0' is not a number 1-65535",
    "host:65536": "port '65536' is not a number 1-65535",
    "host:http": "port 'http' is not a number 1-65535",
    "host:\uff15\uff10": "port '\uff15\uff10' is not a number 1-65535",  # not ASCII digits
    "[::1": "no closing ']'",
    "[::1]50051": "':PORT' expected after ']'",
    "[sidecar]:50051": "'sidecar' is not an IPv6 address",
    "": "empty",
    " 127.0.0.1:50051": "padded with spaces",
}


@pytest.mark.parametrize("target", GOOD)
def test_an_address_grpc_resolves_is_taken(target: str) -> None:
    check_target(target)


@pytest.mark.parametrize(("target", "said"), sorted(BAD.items()))
def test_an_address_grpc_cannot_resolve_is_refused_with_what_is_wrong(
    target: str, said: str
) -> None:
    with pytest.raises(ValueError, match="target ") as caught:
        check_target(target)
    assert said in str(caught.value)


def test_both_clients_refuse_it_when_made() -> None:
    for client in (MemLineageClient, AsyncMemLineageClient):
        with pytest.raises(ValueError, match="more than one ':'"):
            client("garbage::")


def test_the_cli_refuses_it_as_a_command_line_error_before_any_call() -> None:
    """Exit 2 (the command line is wrong), the reason on stderr; before, the check
    waited its whole --timeout and exited 1, "is a sidecar serving there?"."""
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "check", "read", "m1", "--target", "host:99999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "argument --target: target 'host:99999': port '99999'" in out.stderr
    assert "Traceback" not in out.stderr
