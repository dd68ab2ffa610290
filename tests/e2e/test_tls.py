"""TLS: the sidecar serves over TLS when given a certificate and key; a client
that trusts the certificate gets answers, a plaintext client does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.config import Config
from support.sidecar import BUNDLED_POLICIES, RunningSidecar


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 / localhost (openssl, from the OS)."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_serves_trusting_clients_only(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    config = Config(policy_dir=BUNDLED_POLICIES, tls_cert=str(cert), tls_key=str(key))
    with RunningSidecar(config) as s:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with MemLineageClient(s.address, credentials=creds) as c:
            assert c.health() == "SERVING"
            assert c.record("m", creator="user:alice").recorded
        with (
            MemLineageClient(s.address, timeout=1, retries=0) as plain,
            pytest.raises(MemLineageError),
        ):
            plain.health()


@pytest.mark.any_runtime  # what the CLI says: the client's side
def test_the_cli_speaks_tls_with_tls_ca(tmp_path: Path) -> None:
    """`memlineage check --tls-ca` reaches a TLS sidecar; without it (or where nothing
    serves) the one line says where it asked and what to check (before: no TLS option,
    and `DEADLINE_EXCEEDED: Deadline Exceeded` alone)."""
    import subprocess
    import sys

    from support.redis_servers import free_port

    cert, key = self_signed(tmp_path)
    config = Config(policy_dir=BUNDLED_POLICIES, tls_cert=str(cert), tls_key=str(key))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memlineage", "check", "read", "m", "--timeout", "2", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    with RunningSidecar(config) as s:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with MemLineageClient(s.address, credentials=creds) as c:
            c.record("m", creator="user:alice")
        ok = cli("--target", s.address, "--tls-ca", str(cert))
        assert ok.returncode == 0 and ok.stdout.startswith("ALLOW"), ok.stderr
        plain = cli("--target", s.address)
        assert (plain.returncode, plain.stderr) == (
            1,
            f"error: {s.address} serves TLS and this call was plaintext: pass --tls-ca with "
            "the CA certificate that signed the sidecar's\n",
        )
    nobody = f"127.0.0.1:{free_port()}"
    gone = cli("--target", nobody)
    assert (gone.returncode, gone.stderr) == (
        1,
        f"error: nothing listens at {nobody} (connection refused): is the sidecar running, "
        "and is that its address (--target)?\n",
    )
    nope = tmp_path / "nope.pem"
    missing = cli("--target", nobody, "--tls-ca", str(nope))
    assert (missing.returncode, missing.stderr) == (
        1,
        f"error: --tls-ca {nope}: cannot be read (No such file or directory)\n",
    )
    # a file that is no CA certificate is named as such (before: "no answer ... is a
    # sidecar serving there?", as if the sidecar were the problem)
    for wrong in (key, tmp_path / "garbage.pem"):
        if wrong.name == "garbage.pem":
            wrong.write_bytes(
                b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
            )
        bad = cli("--target", nobody, "--tls-ca", str(wrong))
        assert bad.returncode == 1, bad
        assert bad.stderr.startswith(f"error: --tls-ca {wrong}: is not a"), bad.stderr


@pytest.mark.any_runtime  # what the CLI says: the client's side
def test_the_cli_names_what_listens_where_no_answer_came(tmp_path: Path) -> None:
    """A call with no answer is followed by one probe of the address, so the line says
    what to change: a CA that is not the sidecar's, --tls-ca against a plaintext
    sidecar, a port that accepts and answers nothing (before: the same "is a sidecar
    serving there?" for all of them)."""
    import socket
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memlineage", "check", "read", "m", "--timeout", "1", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    cert, key = self_signed(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    other_ca, _ = self_signed(other)
    tls = Config(policy_dir=BUNDLED_POLICIES, tls_cert=str(cert), tls_key=str(key))
    with RunningSidecar(tls) as s:
        wrong_ca = cli("--target", s.address, "--tls-ca", str(other_ca))
    assert wrong_ca.returncode == 1
    assert wrong_ca.stderr.startswith(
        f"error: {s.address} serves TLS, but no call succeeded with --tls-ca {other_ca} "
    ), wrong_ca.stderr
    assert "the CA that signed its certificate" in wrong_ca.stderr
    with RunningSidecar(Config(policy_dir=BUNDLED_POLICIES)) as s:
        needless = cli("--target", s.address, "--tls-ca", str(cert))
    assert (needless.returncode, needless.stderr) == (
        1,
        f"error: {s.address} does not speak TLS (it refused a TLS handshake): drop "
        "--tls-ca, or serve TLS (tls_cert and tls_key)\n",
    )
    with socket.socket() as silent:  # listens, never accepts: the kernel queues the call
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        mute = cli("--target", target)
    assert mute.returncode == 1
    assert mute.stderr.startswith(f"error: no answer from {target} within 1 s ("), mute.stderr
    assert "something accepts connections there but answers nothing" in mute.stderr
