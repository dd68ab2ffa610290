"""Refuses compiled modules older than their sources.

setup.py compiles the hot path with mypyc and an editable install puts each
module's extension (`facts.cpython-311-x86_64-linux-gnu.so`) beside its source,
where Python imports the extension first. Once a source is edited, the old
compiled code would keep running silently; in a git checkout that is an
ImportError naming the rebuild instead. Installed packages are not checked (their
file times are the installer's).
"""

from __future__ import annotations

import os

REBUILD = "scripts/build_native.sh (or: pip install -e .)"


def stale(package_dir: str) -> list[str]:
    """The sources under `package_dir` edited after their extension was built."""
    found = []
    for root, dirs, names in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if not name.endswith(".so") or "__mypyc" in name:
                continue
            source = os.path.join(root, name.split(".", 1)[0] + ".py")
            built = os.path.join(root, name)
            if os.path.exists(source) and os.stat(source).st_mtime > os.stat(built).st_mtime:
                found.append(source)
    return sorted(found)


def refuse_stale(package_dir: str) -> None:
    """Raise ImportError when a compiled module of this checkout is stale."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(package_dir)))
    if not os.path.exists(os.path.join(checkout, ".git")):
        return
    edited = stale(package_dir)
    if edited:
        names = ", ".join(os.path.relpath(p, checkout) for p in edited)
        raise ImportError(
            f"{names} changed after it was compiled; rebuild with {REBUILD}, or set"
            " MEMLINEAGE_PURE_PYTHON=1 for that command to build without compiling"
        )
