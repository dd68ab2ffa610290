"""Callers, namespaces and admin rights, as the servicers apply them."""

from __future__ import annotations

import pytest
from memlineage.grpc_api.auth import (
    LOCAL,
    Authenticator,
    PermissionDenied,
    TokenGrant,
    Unauthenticated,
    is_loopback,
)

AUTH = Authenticator([TokenGrant("ta", ("a", "a2")), TokenGrant("tops", (), admin=True)])


def test_no_auth_means_one_default_namespace_and_loopback_admin() -> None:
    local = Authenticator().principal({})
    assert local is LOCAL and Authenticator.namespace(local, "") == "default"
    with pytest.raises(PermissionDenied):
        Authenticator.namespace(local, "other")
    Authenticator.require_admin(local, "ipv4:127.0.0.1:5555")
    Authenticator.require_admin(local, "ipv6:[::1]:5555")
    with pytest.raises(PermissionDenied):
        Authenticator.require_admin(local, "ipv4:10.1.2.3:5555")


def test_tokens_map_to_namespaces_and_admin() -> None:
    alice = AUTH.principal({"authorization": "Bearer ta"})
    assert Authenticator.namespace(alice, "") == "a"
    assert Authenticator.namespace(alice, "a2") == "a2"
    with pytest.raises(PermissionDenied, match="may not use namespace 'b'"):
        Authenticator.namespace(alice, "b")
    with pytest.raises(PermissionDenied):
        Authenticator.require_admin(alice, "ipv4:127.0.0.1:1")  # loopback is no excuse here
    ops = AUTH.principal({"authorization": "bearer tops"})
    Authenticator.require_admin(ops, "ipv4:10.0.0.1:1")
    with pytest.raises(PermissionDenied, match="no namespace"):
        Authenticator.namespace(ops, "")


@pytest.mark.parametrize(
    "metadata", [{}, {"authorization": "Bearer nope"}, {"authorization": "Basic ta"}]
)
def test_missing_or_unknown_tokens_are_unauthenticated(metadata) -> None:
    with pytest.raises(Unauthenticated):
        AUTH.principal(metadata)


def test_loopback_peers() -> None:
    assert is_loopback("ipv4:127.0.0.1:80") and is_loopback("unix:/tmp/s")
    assert not is_loopback("ipv4:192.168.1.1:80") and not is_loopback("ipv6:[fe80::1]:80")


def test_a_grant_needs_a_token_and_a_namespace_or_admin() -> None:
    with pytest.raises(ValueError):
        Authenticator([TokenGrant("", ("a",))])
    with pytest.raises(ValueError):
        Authenticator([TokenGrant("t", ())])


def test_a_token_of_many_namespaces_is_one_principal_with_its_scope() -> None:
    """Built once per token; its scope (default, every namespace) is what the Check
    memo keys on: two callers with the same namespaces in another order have another
    default, so they never share a remembered answer."""
    many = tuple(f"n{i}" for i in range(5000))
    auth = Authenticator([TokenGrant("tm", many), TokenGrant("tr", tuple(reversed(many)))])
    first = auth.principal({"authorization": "Bearer tm"})
    assert auth.principal({"authorization": "Bearer tm"}) is first
    assert Authenticator.namespace(first, "n4999") == "n4999"
    with pytest.raises(PermissionDenied):
        Authenticator.namespace(first, "n5000")
    other = auth.principal({"authorization": "Bearer tr"})
    assert first.scope[1] == other.scope[1]
    assert first.scope != other.scope  # n0 and n4999 are their defaults
    assert Authenticator.namespace(other, "") == "n4999"


def test_an_unnamed_token_is_named_by_its_place_never_by_its_value() -> None:
    """The name is the caller in the logs (`requested_by`) and in the per-caller bounds:
    before, an unnamed token was `token:` and its first 4 characters, a piece of the
    secret in every log line, and two unnamed tokens sharing them were one caller."""
    auth = Authenticator(
        [TokenGrant("tenant-one-secret", ("a",)), TokenGrant("tenant-two-secret", ("b",))]
    )
    one = auth.principal({"authorization": "Bearer tenant-one-secret"})
    two = auth.principal({"authorization": "Bearer tenant-two-secret"})
    assert (one.name, two.name) == ("token#0", "token#1")
    named = Authenticator([TokenGrant("s3cr3t-value", ("a",), name="agent")])
    assert named.principal({"authorization": "Bearer s3cr3t-value"}).name == "agent"


def test_two_tokens_of_one_name_are_refused() -> None:
    """Two callers of one name would share their bounds and their log lines."""
    with pytest.raises(ValueError, match="two tokens named 'x'"):
        Authenticator([TokenGrant("t1", ("a",), name="x"), TokenGrant("t2", ("b",), name="x")])
