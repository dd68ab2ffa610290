"""Whether a refused decision log has room again, found without writing to it.

While the log refuses writes the sidecar reports the services that decide
NOT_SERVING; a probe lets it report SERVING again before any decision is tried
(nothing would be tried if readiness took it out of service). The log itself is
never written by a probe: a line's worth of bytes goes to a file beside it,
removed at once, after the file size limit (RLIMIT_FSIZE, per file) is checked
against the log's own size.
"""

from __future__ import annotations

import os
import resource
import stat

from memlineage.oserrors import reason

PROBE_SUFFIX = ".probe"


def room_for(path: str, size: int, nbytes: int) -> str | None:
    """Why `nbytes` more could not be appended now to the log file `path`, which holds
    `size` bytes; None when they could. A device or a pipe cannot be tried without
    writing to it, nor a log whose directory refuses the probe file (read-only, not
    ours): only its next line tells, and until then the answer is no."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return reason(exc)
    if not stat.S_ISREG(mode):
        return "not a regular file: only its next line tells"
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and size + nbytes > soft:
        return f"past the file size limit ({soft} bytes)"
    probe = path + PROBE_SUFFIX
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            data = memoryview(bytes(max(nbytes, 1)))
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        return reason(exc)
    return None
