"""What listens at a target that gave the CLI no answer: nothing, a TLS server, a server
that refuses TLS, or one that accepts and stays silent. gRPC reports all four as the
same DEADLINE_EXCEEDED or UNAVAILABLE; one TCP connection and one TLS handshake
(nothing verified, nothing sent after it) tell them apart, so the error line can say
what to change (`--tls-ca`, the address, the sidecar itself)."""

from __future__ import annotations

import re
import socket
import ssl
from typing import Literal

Listener = Literal["nothing", "tls", "plain", "silent", "unknown"]

_HOST_PORT = re.compile(r"\A(?:dns:(?:///)?|ipv4:|ipv6:)?(\[[^\]]+\]|[^:/\[\]]+):(\d{1,5})\Z")


def host_port(target: str) -> tuple[str, int] | None:
    """`HOST:PORT`, `[V6]:PORT` (with gRPC's `dns:///`, `ipv4:`, `ipv6:` prefixes) as
    (host, port); None for anything else (a unix socket, a name resolver's URI)."""
    m = _HOST_PORT.match(target)
    if m is None or not 0 < int(m.group(2)) < 65536:
        return None
    return m.group(1).strip("[]"), int(m.group(2))


def what_listens(target: str, timeout: float = 1.0) -> Listener:
    """Probe `target`: `nothing` (connection refused), `tls` (a TLS handshake
    completed), `plain` (it accepted, then refused TLS: a plaintext server), `silent`
    (it accepted and answered nothing within `timeout`: paused or overloaded), or
    `unknown` (not HOST:PORT, or unreachable for another reason)."""
    where = host_port(target)
    if where is None:
        return "unknown"
    try:
        sock = socket.create_connection(where, timeout=timeout)
    except ConnectionRefusedError:
        return "nothing"
    except OSError:
        return "unknown"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a probe: whose certificate it is comes later
    context.set_alpn_protocols(["h2"])
    try:
        with context.wrap_socket(sock, server_hostname=where[0]):
            return "tls"
    except TimeoutError:
        return "silent"
    except (ssl.SSLError, ConnectionError, OSError):
        return "plain"
    finally:
        sock.close()


def no_answer(target: str, timeout: float, status: str, tls_ca: str | None) -> str:
    """The CLI's line for a call that got no answer from `target` (without `error: `)."""
    found = what_listens(target, min(timeout, 2.0))
    if found == "nothing":
        return (
            f"nothing listens at {target} (connection refused): is the sidecar running, "
            "and is that its address (--target)?"
        )
    if found == "tls" and not tls_ca:
        return (
            f"{target} serves TLS and this call was plaintext: pass --tls-ca with the CA "
            "certificate that signed the sidecar's"
        )
    if found == "tls":
        host = (host_port(target) or (target, 0))[0]
        return (
            f"{target} serves TLS, but no call succeeded with --tls-ca {tls_ca} within "
            f"{timeout:g} s ({status}): is that the CA that signed its certificate, and "
            f"does the certificate name {host}?"
        )
    if found == "plain" and tls_ca:
        return (
            f"{target} does not speak TLS (it refused a TLS handshake): drop --tls-ca, or "
            "serve TLS (tls_cert and tls_key)"
        )
    if found == "silent":
        return (
            f"no answer from {target} within {timeout:g} s ({status}): something accepts "
            "connections there but answers nothing (a paused or overloaded sidecar?)"
        )
    if found == "plain":
        return (
            f"no answer from {target} within {timeout:g} s ({status}): a plaintext server "
            "listens there but gave no gRPC answer (an overloaded sidecar, or not a sidecar)"
        )
    return (
        f"no answer from {target} within {timeout:g} s ({status}): is a sidecar serving "
        "there? (one serving TLS needs --tls-ca)"
    )
