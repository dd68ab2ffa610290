"""The `cpu_affinity` setting: which CPUs `memlineage serve` runs on.

A sidecar whose threads the kernel moves between CPUs refills its caches after each
move; on a box shared with the agent that calls it, a round trip at one call in
flight paid about a quarter more for it (`bench/grpc_bench.py --server-cpus`, README
"Performance"). Pinning is the operator's choice, as with Redis's `server_cpulist`
or a Kubernetes pod on the static CPU manager: off by default.
"""

from __future__ import annotations

import contextlib
import os

from memlineage.config.kinds import ConfigError, format_cpus


def pin_process(cpus: frozenset[int]) -> None:
    """Run every thread of this process on `cpus` only; the threads it starts later
    inherit the mask. The kernel, not the mask this process was started with, says
    which CPUs it may use (its cpuset, the CPUs online): one it refuses, or takes only
    some of, is a ConfigError naming those this process ran on."""
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("cpu_affinity: this platform cannot pin a process to CPUs (Linux can)")
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
        taken = os.sched_getaffinity(0)
    except OSError:
        taken = set()
    if taken != cpus:
        os.sched_setaffinity(0, before)
        missing = cpus - taken
        which = (
            f"CPU {format_cpus(missing)} is not one"
            if len(missing) == 1
            else f"CPUs {format_cpus(missing)} are not ones"
        )
        raise ConfigError(
            f"cpu_affinity: {which} this process may run on (it ran on {format_cpus(before)})"
        )
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(int(tid), cpus)
