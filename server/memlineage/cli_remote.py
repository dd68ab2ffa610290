"""What the CLI's remote commands (`check`, `explain`, `shadow`, `sweep` over gRPC)
share: the `--timeout` type, the client they make from `--target`, `--token` and
`--tls-ca`, and the one line a failed call prints."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlineage.client import MemLineageClient


def seconds(text: str) -> float:
    """A ``--timeout``: a finite number of seconds > 0 (argparse's one-line error else,
    not a traceback from the client; ``nan`` is not a wait)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number of seconds > 0")
    return value


def named_path(text: str) -> str:
    """A path `lint`, `fmt` or `test` is given: an empty one names no file (it read as
    the current directory's name, "cannot read `.`", where the path was empty)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file or directory")
    return text


def target(text: str) -> str:
    """A ``--target`` gRPC can resolve (`check_target`): a wrong one is argparse's
    one-line error at once, not DEADLINE_EXCEEDED after the whole ``--timeout``."""
    from memlineage.client.targets import check_target

    try:
        check_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def rfc3339(text: str) -> float:
    """A ``--at``: an RFC 3339 time with its zone, in epoch seconds (argparse's
    one-line error else)."""
    from memlineage.lineage.times import parse_rfc3339

    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    """A ``--depth`` or ``--batch``: an integer 0 to 2,147,483,647, the requests' int32
    (argparse's one-line error else: a larger one was a protobuf traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 to 2,147,483,647")
    return value


def remote_error(exc: Exception, args: argparse.Namespace) -> None:
    """A failed call to the sidecar, in one line: one that never answered says where it
    was asked and what to check (before: `DEADLINE_EXCEEDED: Deadline Exceeded`)."""
    code = getattr(exc, "code", None)
    name = getattr(code, "name", "")
    details = str(getattr(exc, "details", "") or "")
    if getattr(exc, "reason", "") == "STORE_UNAVAILABLE":
        # the sidecar answered (its error code in the trailers): its store is down, not
        # "is a sidecar serving there?", which hides which store and why
        print(
            f"error: the sidecar at {args.target} answered UNAVAILABLE: {details}", file=sys.stderr
        )
        return
    if name in ("DEADLINE_EXCEEDED", "UNAVAILABLE") and not getattr(exc, "reason", ""):
        # no sidecar answered: what listens there says what to change
        from memlineage.cli_probe import no_answer

        message = no_answer(args.target, args.timeout, name, getattr(args, "tls_ca", None))
        print(f"error: {message}", file=sys.stderr)
    elif name == "UNAUTHENTICATED":
        print(f"error: {exc} (pass --token, or set MEMLINEAGE_TOKEN)", file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)


def tls_ca(path: str) -> bytes:
    """The `--tls-ca` file's PEM certificates, or OSError (one line, by main) naming
    the flag, the file and the problem: before, a garbage or key file was only found
    out as "no answer ... is a sidecar serving there?"."""
    import ssl

    from memlineage.oserrors import reason

    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        raise OSError(f"--tls-ca {path}: cannot be read ({reason(exc)})") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise OSError(f"--tls-ca {path}: is not a PEM certificate (no BEGIN CERTIFICATE block)")
    try:
        ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise OSError(f"--tls-ca {path}: is not a valid PEM certificate ({exc})") from None
    return data


def remote_client(args: argparse.Namespace) -> MemLineageClient:
    from memlineage.client import MemLineageClient

    credentials = None
    if args.tls_ca:
        import grpc

        credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca(args.tls_ca))
    return MemLineageClient(
        args.target,
        token=args.token or os.environ.get("MEMLINEAGE_TOKEN"),
        namespace=args.namespace,
        timeout=args.timeout,
        credentials=credentials,
    )
