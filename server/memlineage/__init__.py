"""MemLineage sidecar: lineage store, decision engine, gRPC service and CLI."""

__version__ = "0.1.0"
