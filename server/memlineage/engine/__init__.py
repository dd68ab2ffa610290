"""The decision engine: joins compiled policies with lineage read from the store."""
