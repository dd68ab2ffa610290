"""`memlineage serve` as an operator runs it: a real process on a free loopback
port, its output read on a thread, for the suites that signal, kill or restart
the sidecar (`expect` waits for a line of its output); or run to its end when it
must refuse to start (`run_serve`, `serve_refusal`)."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REASONING_POLICY = """policy low_confidence_reasoning priority 50 {
  on read
  when memory.creator.kind == reasoning and memory.confidence < 0.7
  deny "doubtful reasoning"
}
"""
_SERVING = r"memlineage serving on (?:127\.0\.0\.1|\[::1\]):(\d+)"


def serve_command(args: list[str]) -> list[str]:
    """`memlineage serve --listen 127.0.0.1:0 --decision-log off ARGS...` (later flags
    win, so `args` may name another decision log)."""
    return [
        sys.executable,
        "-m",
        "memlineage",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--decision-log",
        "off",
        *args,
    ]


def run_serve(args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`serve_command(args)` run to its end (for a sidecar that must refuse to start),
    its output captured."""
    return subprocess.run(serve_command(args), capture_output=True, text=True, timeout=timeout)


def serve_refusal(args: list[str], timeout: float = 60.0) -> str:
    """The one line on stderr of `run_serve(args)`, which must exit with code 1 and no
    traceback (any other end fails the test)."""
    out = run_serve(args, timeout)
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


class ServeProcess:
    """`serve_command(args)` running; `address` once serving."""

    def __init__(
        self, args: list[str], env: dict[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.proc = subprocess.Popen(
            serve_command(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **env} if env else None,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        try:
            ready = self.expect(_SERVING, timeout)
        except AssertionError:
            self.kill()
            raise
        self.address = f"127.0.0.1:{ready.group(1)}"
        self.banner = ready.string  # the whole "memlineage serving on ..." line

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def expect(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """The first line of output from now on matching `pattern`."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"no line matching {pattern!r}; output was: {''.join(seen)}")

    def rest(self, timeout: float = 20.0) -> str:
        """Once it has exited: every line of output not yet taken (read to its end)."""
        assert self.proc.poll() is not None, "still running"
        self._pump_thread.join(timeout)
        out = []
        while not self.lines.empty():
            out.append(self.lines.get_nowait())
        return "".join(out)

    def kill(self) -> None:
        """SIGKILL (when still running), and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)

    def stop(self) -> int:
        """SIGTERM, the exit code once it has stopped (killed if it does not)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


NO_WEB_POLICY = """
policy no_web_at_all priority 99 {
  on read
  when memory.creator.id == "tool:web_fetch"
  deny "no web output at all"
}
"""
"""A candidate's policy for the rollout suites: one web tool's output denied outright
(a tool no bundled test names: the bundled tests still pass beside it)."""


@contextlib.contextmanager
def serving_copy_of(policies: str, directory: Path) -> Iterator[ServeProcess]:
    """`memlineage serve` on a copy of `policies` made at `directory` (which a test may
    then empty, edit or replace), no sweeps; killed at the end."""
    shutil.copytree(policies, directory)
    server = ServeProcess(["--policies", str(directory), "--sweep-interval", "0"])
    try:
        yield server
    finally:
        server.kill()
