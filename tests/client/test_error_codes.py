"""A refused call carries the sidecar's stable error code and the field it blames
(trailing metadata `memlineage-error-code` / `-field`), and both clients expose them as
`MemLineageError.reason` / `.field`: one gRPC status covers several refusals (a stale
version and a forbidden transition are both FAILED_PRECONDITION; an unknown dependency
and a cycle both INVALID_ARGUMENT), which a caller tells apart without parsing text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from memlineage.client import (
    AsyncMemLineageClient,
    FailedPrecondition,
    InvalidArgument,
    MemLineageClient,
    MemLineageError,
    NotFound,
    Unauthenticated,
)
from memlineage.client import errors as client_errors
from memlineage.config import Config, TokenGrant
from memlineage.grpc_api import servicer
from support.sidecar import BUNDLED_POLICIES, RunningSidecar


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    with RunningSidecar(Config(policy_dir=BUNDLED_POLICIES)) as s:
        yield s


def refusal(call: object) -> MemLineageError:
    with pytest.raises(MemLineageError) as caught:
        call()  # type: ignore[operator]  # a zero-argument lambda
    return caught.value


def test_the_client_reads_the_keys_the_servicer_writes() -> None:
    assert client_errors.ERROR_CODE_KEY == servicer.ERROR_CODE_KEY
    assert client_errors.ERROR_FIELD_KEY == servicer.ERROR_FIELD_KEY


def test_one_status_several_reasons(sidecar: RunningSidecar) -> None:
    with MemLineageClient(sidecar.address, timeout=10) as c:
        c.record("a", creator="user:alice")
        c.record("b", creator="user:alice", dependencies=["a"])
        unknown = refusal(lambda: c.record("x", creator="user:alice", dependencies=["a", "nope"]))
        assert isinstance(unknown, InvalidArgument)
        assert (unknown.reason, unknown.field) == (
            "UNKNOWN_DEPENDENCY",
            "memory.dependencies[1]",
        )
        cycle = refusal(
            lambda: c.revise("a", expected_version=1, creator="user:alice", dependencies=["b"])
        )
        assert isinstance(cycle, InvalidArgument) and cycle.reason == "CYCLE"
        stale = refusal(lambda: c.revise("a", expected_version=7, creator="user:alice"))
        assert isinstance(stale, FailedPrecondition) and stale.reason == "VERSION_CONFLICT"
        c.revoke("a", reason="wrong", actor="user:alice")
        again = refusal(lambda: c.confirm("a", actor="user:alice"))
        assert isinstance(again, FailedPrecondition) and again.reason == "INVALID_TRANSITION"
        missing = refusal(lambda: c.explain("never-recorded"))
        assert isinstance(missing, NotFound) and missing.reason == "NOT_FOUND"
        malformed = refusal(lambda: c.check("read", "bad id\n"))
        assert isinstance(malformed, InvalidArgument)
        assert (malformed.reason, malformed.field) == ("INVALID_ID", "memory_id")


def test_an_invalid_argument_is_a_value_error(sidecar: RunningSidecar) -> None:
    """A value the sidecar finds wrong is caught where Python code catches wrong values
    (the adapters document ValueError for lineage they or the sidecar refuse); other
    refusals are not ValueErrors."""
    with MemLineageClient(sidecar.address, timeout=10) as c:
        c.record("v1", creator="user:alice")
        with pytest.raises(ValueError, match="cannot depend on itself") as caught:
            c.record("v2", creator="user:alice", dependencies=["v2"])
        assert isinstance(caught.value, InvalidArgument)
        assert caught.value.field == "memory.dependencies[0]"
        stale = refusal(lambda: c.revise("v1", expected_version=9, creator="user:alice"))
        assert not isinstance(stale, ValueError)
        assert not isinstance(refusal(lambda: c.explain("v-none")), ValueError)


def test_the_async_client_reads_them_too(sidecar: RunningSidecar) -> None:
    async def main() -> MemLineageError:
        async with AsyncMemLineageClient(sidecar.address, timeout=10) as c:
            await c.record("p", creator="user:alice")
            try:
                await c.record("q", creator="user:alice", dependencies=["p", "gone"])
            except MemLineageError as exc:
                return exc
        raise AssertionError("the record was not refused")

    exc = asyncio.run(main())
    assert isinstance(exc, InvalidArgument)
    assert (exc.reason, exc.field) == ("UNKNOWN_DEPENDENCY", "memory.dependencies[1]")


def test_a_refusal_at_the_token_gate_carries_its_code() -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, tokens=(TokenGrant("tok-1", ("ns",), name="app"),))
    with (
        RunningSidecar(config) as s,
        MemLineageClient(s.address, token="wrong", timeout=10) as c,
    ):
        exc = refusal(lambda: c.check("read", "m"))
    assert isinstance(exc, Unauthenticated) and exc.reason == "UNAUTHENTICATED"


def test_a_call_that_never_reached_a_sidecar_has_no_reason() -> None:
    from support.redis_servers import free_port

    with MemLineageClient(f"127.0.0.1:{free_port()}", timeout=0.5, retries=0) as c:
        exc = refusal(lambda: c.check("read", "m"))
    assert (exc.reason, exc.field) == ("", "")
