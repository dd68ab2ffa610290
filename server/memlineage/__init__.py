"""MemLineage sidecar: lineage store, decision engine, gRPC service and CLI."""

import os
from importlib.metadata import PackageNotFoundError, version

from memlineage_dsl.native import refuse_stale

refuse_stale(os.path.dirname(__file__))

try:
    __version__ = version("memlineage")  # stated once, in pyproject.toml
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
