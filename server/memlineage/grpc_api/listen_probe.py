"""Why the gRPC server cannot listen where `listen` says, found with a plain socket
before gRPC tries: gRPC's own refusal is a C-core log line on stderr
("E1206 ... add_port.cc:83] Failed to add port ...") and an exception telling the
operator to set GRPC_VERBOSITY, neither saying what to change."""

from __future__ import annotations

import errno
import socket

_WHY = {
    errno.EADDRINUSE: "the port is in use (another process listens there: stop it, or "
    "choose another port with the setting listen)",
    errno.EADDRNOTAVAIL: "the host is not an address of this machine (setting listen; "
    "0.0.0.0 listens on every IPv4 address)",
    errno.EACCES: "a port under 1024 needs privileges this process does not have (setting listen)",
}


def split(listen: str) -> tuple[str, int] | None:
    """`HOST:PORT` (an IPv6 host in brackets) as (host, port); None when it is not."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def listen_problem(listen: str) -> str | None:
    """What stops a server listening on `listen` now, or None: nothing found (or a
    port 0, any free one). As gRPC, each address the host resolves to is bound (with
    SO_REUSEADDR), and one that binds is enough (``localhost`` where IPv6 is off).
    The probe's sockets are closed before it returns."""
    parts = split(listen)
    if parts is None or parts[1] == 0:
        return None
    host, port = parts
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (OSError, UnicodeError) as exc:
        return f"the host {host!r} does not resolve ({exc}; setting listen)"
    why: str | None = None
    for family, kind, proto, _, address in infos:
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:
            continue  # a family this machine has no stack for: gRPC skips it too
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            probe.bind(address)
            probe.listen(1)
        except OSError as exc:
            why = why or _WHY.get(exc.errno or 0)
        else:
            return None  # gRPC listens where it can bind, as long as one address binds
        finally:
            probe.close()
    return why
