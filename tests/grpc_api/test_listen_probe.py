"""`listen_probe.listen_problem`: why the server cannot listen, found before gRPC
logs its own C-core line (a served refusal is tested in tests/e2e/test_serve_cli.py)."""

from __future__ import annotations

import socket

from memlineage.grpc_api.listen_probe import listen_problem, split
from support.redis_servers import free_port


def test_an_address_in_use_is_named_and_a_free_one_passes() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        said = listen_problem(f"127.0.0.1:{port}")
        assert said is not None and said.startswith("the port is in use"), said
        # every address of the host taken: 0.0.0.0 overlaps 127.0.0.1 as gRPC's bind does
        said = listen_problem(f"0.0.0.0:{port}")
        assert said is not None and said.startswith("the port is in use"), said
    finally:
        taken.close()
    assert listen_problem(f"127.0.0.1:{port}") is None
    assert listen_problem(f"127.0.0.1:{free_port()}") is None
    assert listen_problem("127.0.0.1:0") is None  # any free port: nothing to probe


def test_a_host_not_of_this_machine_and_one_that_does_not_resolve() -> None:
    port = free_port()
    said = listen_problem(f"192.0.2.1:{port}")  # TEST-NET-1: never a local address
    assert said is not None and said.startswith("the host is not an address of this machine")
    said = listen_problem(f"no-such-host.invalid:{port}")
    assert said is not None and said.startswith("the host 'no-such-host.invalid' does not resolve")


def test_split_takes_bracketed_ipv6_and_refuses_what_is_not_host_port() -> None:
    assert split("[::1]:50051") == ("::1", 50051)
    assert split("0.0.0.0:7") == ("0.0.0.0", 7)
    assert split("localhost") is None
    assert split("localhost:http") is None
    assert listen_problem("not-an-address") is None  # the settings' check names it
