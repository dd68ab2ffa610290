"""A sidecar address refused when it is given, not after the call's deadline.

gRPC takes any string as a target: one it cannot resolve (``garbage::``, a port
that is not one) leaves the channel failing to connect, and a call waiting for
it (``wait_for_ready``, the clients' default) ended DEADLINE_EXCEEDED after its
whole timeout, "is a sidecar serving there?", where the address itself was wrong.
`check_target` refuses such an address at once with what is wrong in it. It
checks only the plain ``host[:port]`` form (gRPC's default, resolved by DNS); a
target naming a scheme (``unix:``, ``dns:``, ``ipv4:``..., or any ``scheme://``)
is left to gRPC, whose resolvers own those forms.
"""

from __future__ import annotations

import ipaddress

__all__ = ["check_target"]

SCHEMES = ("unix", "unix-abstract", "vsock", "dns", "ipv4", "ipv6", "xds", "google-c2p")
"""gRPC's resolver schemes a target may begin with (``scheme:``); another scheme is
accepted only as ``scheme://...``."""

FORMS = "write HOST:PORT, [IPV6]:PORT, or a gRPC scheme such as unix:PATH"


def check_target(target: str) -> None:
    """ValueError naming what is wrong when `target` cannot be an address gRPC
    resolves; None when it may be (whether a sidecar serves there is the call's)."""
    if not target or target != target.strip():
        raise ValueError(f"target {target!r}: empty or padded with spaces; {FORMS}")
    scheme, colon, _ = target.partition(":")
    if colon and (scheme in SCHEMES or target.startswith(f"{scheme}://")):
        return
    if target.startswith("["):
        host, bracket, rest = target[1:].partition("]")
        if not bracket:
            raise ValueError(f"target {target!r}: no closing ']' after the IPv6 address")
        _ipv6(target, host)
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"target {target!r}: ':PORT' expected after ']'")
            _port(target, rest[1:])
        return
    if target.count(":") > 1:  # gRPC reads it as a bare IPv6 address, no port
        _ipv6(target, target, "more than one ':' outside '[...]' reads as a bare IPv6 address")
        return
    host, colon, port = target.partition(":")
    if not host:
        raise ValueError(f"target {target!r}: no host before ':'; {FORMS}")
    if colon:
        _port(target, port)


def _ipv6(target: str, host: str, why: str = "") -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        said = f"{why}, and {host!r} is not one" if why else f"{host!r} is not an IPv6 address"
        raise ValueError(f"target {target!r}: {said}; {FORMS}") from None


def _port(target: str, port: str) -> None:
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"target {target!r}: port {port!r} is not a number 1-65535")
