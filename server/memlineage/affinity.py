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
    inherit the mask. A CPU this process may not use is a ConfigError naming the ones
    it may (a container's cpuset, `taskset` around the sidecar)."""
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("cpu_affinity: this platform cannot pin a process to CPUs (Linux can)")
    allowed = os.sched_getaffinity(0)
    outside = sorted(cpus - allowed)
    if outside:
        raise ConfigError(
            f"cpu_affinity: CPU {format_cpus(outside)} is not one this process may run on "
            f"(it may: {format_cpus(allowed)})"
        )
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(int(tid), cpus)
