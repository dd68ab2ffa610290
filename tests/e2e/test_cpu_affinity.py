"""`cpu_affinity`: `memlineage serve` runs every thread on the CPUs it names, or
refuses to start with one line when it cannot (a list it cannot read, a CPU this
process may not use)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memlineage.client import MemLineageClient
from memlineage.config import ConfigError
from memlineage.config.kinds import format_cpus, parse_cpus
from support.serve_process import ServeProcess, serve_command


def _threads_cpus(pid: int) -> dict[str, str]:
    """Each thread of `pid`: its allowed CPUs as the kernel lists them."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("Cpus_allowed_list:"))
        out[tid] = line.split(":", 1)[1].strip()
    return out


def test_every_thread_of_a_pinned_sidecar_runs_on_its_cpu_and_it_serves() -> None:
    """The last CPU this process may use (on a machine of more than one, not the
    whole set a sidecar gets unpinned): every thread, the gRPC server's included."""
    cpu = max(os.sched_getaffinity(0))
    served = ServeProcess(["--cpu-affinity", str(cpu)])
    try:
        with MemLineageClient(served.address) as client:
            client.record("m1", creator="user:alice")
            assert client.check("read", "m1").effect  # answered
            threads = _threads_cpus(served.proc.pid)
        assert len(threads) > 3  # the gRPC server's threads, started after the pinning
        assert set(threads.values()) == {str(cpu)}, threads
    finally:
        served.stop()


@pytest.mark.parametrize("beyond", [1, 2])
def test_cpus_this_process_may_not_use_are_refused_naming_those_it_ran_on(beyond: int) -> None:
    """One CPU past those it may use, or a range of two (beside one it may: the kernel
    takes the ones it can, which is not what was asked)."""
    allowed = os.sched_getaffinity(0)
    top = max(allowed)
    asked = f"{top + 1}" if beyond == 1 else f"{top}-{top + 2}"
    out = subprocess.run(
        serve_command(["--cpu-affinity", asked]), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    which = f"CPU {top + 1} is not one" if beyond == 1 else f"CPUs {top + 1}-{top + 2} are not ones"
    assert out.stderr == (
        f"error: configuration: cpu_affinity: {which} this process may run on "
        f"(it ran on {format_cpus(allowed)})\n"
    )


@pytest.mark.parametrize("route", ["flag", "env", "file"])
def test_a_list_it_cannot_read_is_one_line_by_every_route(route: str, tmp_path: Path) -> None:
    args, env = [], dict(os.environ)
    if route == "flag":
        args = ["--cpu-affinity", "one"]
    elif route == "env":
        env["MEMLINEAGE_CPU_AFFINITY"] = "one"
    else:
        (tmp_path / "c.toml").write_text('cpu_affinity = "one"\n')
        args = ["--config", str(tmp_path / "c.toml")]
    out = subprocess.run(serve_command(args), capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, out
    assert out.stderr.strip().splitlines()[-1] == (
        "error: configuration: cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got 'one'"
    )


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("", set()), ("1", {1}), ("0,2", {0, 2}), ("2-3,6", {2, 3, 6}), (" 0 - 2 ", {0, 1, 2})],
)
def test_cpu_lists_read_as_taskset_writes_them(text: str, cpus: set[int]) -> None:
    assert parse_cpus(text) == cpus


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1-", "cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got '1-'"),
        ("a", "cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got 'a'"),
        ("1,,2", "cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got '1,,2'"),
        ("-1", "cpu_affinity must be a CPU list such as 1, 0,2 or 2-3, got '-1'"),
        ("3-1", "cpu_affinity: the range 3-1 runs backwards (write 1-3)"),
        ("70000", "cpu_affinity: CPU 70000 is past 65535"),
    ],
)
def test_a_list_it_cannot_read_says_why(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cpus(text)
    assert str(caught.value) == said


@given(st.sets(st.integers(0, 300)))
def test_a_set_written_back_reads_the_same(cpus: set[int]) -> None:
    assert parse_cpus(format_cpus(cpus)) == cpus


def test_a_sidecar_started_on_other_cpus_moves_to_the_one_it_names() -> None:
    """Started under a narrower mask (`taskset -c 0 memlineage serve ...`, or a bench
    that pinned itself elsewhere): the CPUs it names are the kernel's to allow, not the
    mask it inherited."""
    cpus = sorted(os.sched_getaffinity(0))
    first, last = cpus[0], cpus[-1]
    command = serve_command(["--cpu-affinity", str(last)])
    narrowed = (  # set the narrower mask, then become `memlineage serve`
        f"import os; os.sched_setaffinity(0, {{{first}}}); os.execv({command[0]!r}, {command!r})"
    )
    proc = subprocess.Popen([sys.executable, "-c", narrowed], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        assert f"on CPUs {last})" in ready, ready
        assert set(_threads_cpus(proc.pid).values()) == {str(last)}
    finally:
        proc.kill()
        proc.wait(timeout=20)
