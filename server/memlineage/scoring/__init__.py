"""Reliability, source credibility and value scores (PRODUCT.md §2).

`formulas` holds the per-memory reference implementation (the documentation
of record), `vectorized` the numpy batch implementation used on hot paths;
tests require the two to agree within 1e-9.
"""
