"""MemLineage sidecar: lineage store, decision engine, gRPC service and CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memlineage")  # stated once, in pyproject.toml
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
